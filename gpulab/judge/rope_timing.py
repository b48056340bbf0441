"""Lesson 05's extra timing on a GPU: torch.compile of the same chain beside
the learner's forward, and the learner's backward beside torch.compile's.

The forward against the eager chain is speed.time_cases' (graded); what is
here is reported beside it and not graded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import torch

from gpulab.judge.compare import dtype_name
from gpulab.judge.context import GradeFailed
from gpulab.judge.kernel_spec import Case, KernelSpec
from gpulab.judge.speed import _geomean
from gpulab.judge.timed_rows import BackwardRow, KernelRow, KernelTiming, RemoteTiming
from gpulab.sandbox import learner
from gpulab.wire.status import StageKind

if TYPE_CHECKING:
    from gpulab.judge.context import GradeContext
    from gpulab.measure.timing import L2Flusher

# One prepared case: (case, dy, x leaf, w leaf, compiled y).
Prepared = tuple[Case, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
# (case, dy, what the forward check kept) a case, as the grader timed them.
Timed = tuple[Case, torch.Tensor, object]
Reference = Callable[[Any, torch.Tensor], tuple[torch.Tensor, ...]]
Tolerance = Callable[[torch.Tensor, torch.dtype], tuple[float, float]]


def backward_bytes(case: Case) -> float:
    """Minimal traffic of the backward: x and dy read, dx written, cos/sin read,
    weight read and dweight written."""
    x: torch.Tensor = case.args[0]
    w: torch.Tensor = case.args[1]
    B, S, H, D = x.shape
    return 3 * B * S * H * D * x.element_size() + 2 * S * (D // 2) * 4 + 2 * D * w.element_size()


def time_compile_and_backward(
    ctx: GradeContext,
    fn: Any,
    timed: Sequence[Timed],
    *,
    spec: KernelSpec,
    chain: Callable[..., torch.Tensor],
    reference: Reference,
    tolerance: Tolerance,
) -> None:
    """torch.compile of the same chain beside the learner's forward (timed by
    the judge in speed.time_cases), then the learner's backward, timed in
    the judge's batches on fresh inputs and a fresh dy each repetition (every
    dx and dweight checked, against `reference` within `tolerance`), beside
    torch.compile's backward. `chain` is the unfused eager chain."""
    from gpulab.gpu import ceilings
    from gpulab.gpu.gpulock import gpu_timing_lock
    from gpulab.measure.timing import L2Flusher, measure

    device_name = torch.cuda.get_device_name(0)
    peak_bw, _ = ceilings.floor_peaks(device_name)
    compiled = torch.compile(chain, dynamic=False)
    prepared = _compile_both(ctx, compiled, timed)
    flusher = L2Flusher()
    rows = [r for r in _timing(ctx).cases if isinstance(r, KernelRow)]
    bwd_rows: list[BackwardRow] = []
    with gpu_timing_lock(
        "checking rope_rmsnorm", gpu=torch.cuda.current_device(), on_wait=ctx.waiting
    ):
        for (case, dy, xg, wg, yc), row in zip(prepared, rows, strict=True):
            ctx.stage(StageKind.TIMING, f"timing {case.name}: torch.compile forward")
            c = measure(partial(compiled, *case.args), flusher=flusher, log_clocks=False)
            row.compile_ms = float(c["ms"])
            row.speedup_compile = row.compile_ms / row.ms
            ctx.stage(StageKind.TIMING, f"timing {case.name}: your backward")
            t = _time_learner_backward(ctx, spec, fn, case, row, flusher, reference, tolerance)
            if t is None:
                continue
            ctx.stage(StageKind.TIMING, f"timing {case.name}: torch.compile backward")
            b = measure(
                partial(torch.autograd.grad, yc, (xg, wg), dy, retain_graph=True),
                flusher=flusher,
                log_clocks=False,
            )
            bwd_rows.append(_backward_row(ctx, case, t, float(b["ms"]), device_name, peak_bw))
    _timing(ctx).cases.extend(bwd_rows)
    _report_compile(ctx, rows, bwd_rows)


def _timing(ctx: GradeContext) -> KernelTiming:
    """The forward's timing, which speed.time_cases set before any of this runs."""
    assert isinstance(ctx.timing, KernelTiming)
    return ctx.timing


def _compile_both(
    ctx: GradeContext, compiled: Callable[..., torch.Tensor], timed: Sequence[Timed]
) -> list[Prepared]:
    """Each case's forward and backward graphs compiled before the timing lock
    is taken (compiling takes seconds: others would wait on the GPU for it).
    Returns (case, dy, x leaf, w leaf, compiled y) a case, for timing the
    compiled backward on that graph."""
    prepared = []
    for case, dy, _ in timed:  # compile both graphs before taking the timing lock
        ctx.stage(StageKind.COMPILE, f"preparing {case.name}: torch.compile")
        x, w, cos, sin = case.args
        compiled(x, w, cos, sin)
        xg, wg = x.detach().requires_grad_(), w.detach().clone().requires_grad_()
        yc = compiled(xg, wg, cos, sin)
        torch.autograd.grad(yc, (xg, wg), dy, retain_graph=True)
        prepared.append((case, dy, xg, wg, yc))
    return prepared


def _time_learner_backward(
    ctx: GradeContext,
    spec: KernelSpec,
    fn: Any,
    case: Case,
    row: KernelRow,
    flusher: L2Flusher,
    reference: Reference,
    tolerance: Tolerance,
) -> RemoteTiming | None:
    """The learner's backward timed in the judge's batches, or None (with a
    note) when its timing failed or was refused: it is not graded, so only
    its row goes. A failing or wrong backward is the verdict: raised."""
    from gpulab.judge.batches import Backward, time_remote

    x = case.args[0]
    try:
        t = time_remote(
            ctx,
            spec,
            fn,
            case,
            flusher,
            backward=Backward(
                grad_args=(0, 1),
                y_shape=tuple(x.shape),
                y_dtype=x.dtype,
                reference=reference,
                tolerance=tolerance,
                forward_ms=row.ms,
                labels=("dx", "dweight"),
            ),
        )
    except (learner.LearnerError, GradeFailed):
        raise  # the learner's backward failed or was wrong: that is the verdict
    except Exception as exc:  # noqa: BLE001 - the backward's timing is not graded
        ctx.notes.append(f"backward {case.shape}: not timed ({type(exc).__name__}: {exc})"[:300])
        return None
    if t.implausible:
        # Not graded, so not a refusal of the whole check: the row goes.
        ctx.notes.append(f"backward {case.shape}: timing refused: {t.implausible}")
        return None
    return t


def _report_compile(ctx: GradeContext, rows: list[KernelRow], bwd_rows: list[BackwardRow]) -> None:
    """torch.compile's speedups into the timing and its summary, and a note a
    row: the forward beside both baselines, the backward beside compile's."""
    fwd_compile = _geomean([r.speedup_compile for r in rows if r.speedup_compile])
    bwd_compile = _geomean([r.speedup for r in bwd_rows]) if bwd_rows else None
    timing = _timing(ctx)
    timing.speedup_compile = fwd_compile
    timing.backward_speedup_compile = bwd_compile
    timing.baselines = ["eager chain", "torch.compile"]
    timing.summary += f", {fwd_compile:.2f}x torch.compile"
    if bwd_compile:
        timing.summary += f"; backward {bwd_compile:.2f}x torch.compile's"
    for r in rows:
        if r.compile_ms and r.speedup_compile is not None:
            ctx.notes.append(
                f"forward {r.shape} {r.dtype}: {r.ms * 1e3:.1f} µs, eager "
                f"chain {(r.baseline_ms or 0.0) * 1e3:.1f} µs, torch.compile "
                f"{r.compile_ms * 1e3:.1f} µs ({r.speedup_compile:.2f}x)"
            )
    for b in bwd_rows:
        ctx.notes.append(
            f"backward {b.shape}: {b.ms * 1e3:.1f} µs "
            f"({b.throughput:.0f} GB/s), torch.compile "
            f"{b.baseline_ms * 1e3:.1f} µs ({b.speedup:.2f}x; not graded)"
        )


def _backward_row(
    ctx: GradeContext,
    case: Case,
    t: RemoteTiming,
    baseline_ms: float,
    device_name: str,
    peak_bw: float | None,
) -> BackwardRow:
    from gpulab.gpu import ceilings

    nbytes, sec = backward_bytes(case), t.ms * 1e-3
    cap, label = ceilings.ceiling(
        "memory", dtype_name(case.dtype), device_name, ctx.request.workspace
    )
    row = BackwardRow(
        name=f"{case.name} backward",
        shape=f"{case.shape} backward",
        dtype=dtype_name(case.dtype),
        timed=t,
        bytes=nbytes,
        sizes=dict(case.sizes),
        throughput=nbytes / sec / 1e9,
        roofline_fraction=(nbytes / sec) / cap if cap else None,
        ceiling=label,
        baseline_ms=baseline_ms,
        speedup=baseline_ms / t.ms,
    )
    if peak_bw and sec < 0.9 * nbytes / peak_bw:
        _timing(ctx).implausible = (
            f"{row.name} took {t.ms * 1e3:.1f} µs, below the "
            f"{nbytes / peak_bw * 1e6:.1f} µs the datasheet allows"
        )
    return row
