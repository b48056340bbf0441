"""Timing a kernel exercise's cases (GPU only) and placing them on the roofline.

The judge times the learner's kernel in batches on fresh inputs
(gpulab.judge.batches) beside the exercise's baseline, in one run, under
the GPU's timing lock; each row carries what the roofline needs to place it
later. A time below what the datasheet allows makes the check implausible.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from gpulab.course.content import eval_formula
from gpulab.device import ceilings
from gpulab.judge.batches import WARMUP_NEXT_S, WARMUP_S
from gpulab.judge.compare import dtype_name
from gpulab.judge.kernel import AuditSpan, Case, Kept, KernelSpec, guarded_call
from gpulab.judge.timed_rows import BackwardRow, KernelRow, KernelTiming, RemoteTiming

if TYPE_CHECKING:
    from gpulab.device.timing import L2Flusher
    from gpulab.judge.context import GradeContext


def time_cases(ctx: GradeContext, spec: KernelSpec, fn: Any, cases: list[Case]) -> None:
    """Time the learner's kernel and the baseline side by side (GPU only),
    holding the GPU's timing lock so no other gpulab run times at once."""
    from gpulab.device.gpulock import gpu_timing_lock

    index = torch.cuda.current_device()
    with gpu_timing_lock(f"checking {ctx.request.exercise}", gpu=index, on_wait=ctx.stage):
        _time_cases(ctx, spec, fn, cases)


def _geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else 0.0


def _time_cases(ctx: GradeContext, spec: KernelSpec, fn: Any, cases: list[Case]) -> None:
    from gpulab.device.timing import L2Flusher

    device_name = torch.cuda.get_device_name(0)
    flusher = L2Flusher()
    kept = _check_sizes(ctx, spec, fn, cases)
    rows: list[KernelRow] = []
    implausible = None
    for i, case in enumerate(cases):
        ctx.stage(f"timing {i + 1} of {len(cases)}: {case.name}", i, len(cases))
        # The first case's warm-up also brings the clocks up from idle; the
        # others follow timed work at once.
        warmup_s = WARMUP_S if i == 0 else WARMUP_NEXT_S
        row, why = _time_case(
            ctx, spec, fn, case, flusher, device_name, warmup_s, kept.get(case.name)
        )
        implausible = implausible or why
        if spec.baseline is not None:
            ctx.stage(
                f"timing {i + 1} of {len(cases)}: {case.name} ({spec.baseline_name})", i, len(cases)
            )
            _time_baseline(spec, case, row, flusher)
        rows.append(row)
    ctx.timing = _summary(spec, rows, device_name, implausible)


def _check_sizes(
    ctx: GradeContext, spec: KernelSpec, fn: Any, cases: list[Case]
) -> dict[str, Kept]:
    """Each timed case once under the guards first (which also compiles and
    autotunes its kernels), the calls sharing one profile (AuditSpan, as the
    correctness cases do: on an H200 a profile apart cost about 0.15 s a
    call). The profile ends before the first timed batch. Where the replay
    times the kernels (gpulab.judge.replay_timing), each case is called a
    second time with its launches recorded: the first call of a shape may
    choose among kernels by timing them (the softmax reference does), the
    second launches only the chosen ones. Returns those records by case."""
    kept: dict[str, Kept] = {}
    replaying = ctx.replayer is not None and ctx.device == "cuda"
    # The replay times and checks the kernels apart from the file: torch's
    # profiler in the learner's process is not asked then (as for the
    # correctness cases: gpulab.judge.kernel.check_cases).
    span = None if replaying else AuditSpan()
    for i, case in enumerate(cases):
        ctx.stage(f"timing {i + 1} of {len(cases)}: {case.name} (checked first)", i, len(cases))
        _, problem = guarded_call(ctx, spec, fn, case, span=span, audit=not replaying)
        if not problem and replaying:
            keep = Kept()
            _, problem = guarded_call(ctx, spec, fn, case, keep=keep, audit=False)
            kept[case.name] = keep
        if problem:
            if span is not None:  # an earlier call's cheat first
                span.judge(ctx, upto=len(span.calls) - 1)
            ctx.fail(f"timing {case.name}: {problem}")
    if span is not None:
        span.judge(ctx)
    return kept


def _replayed(
    ctx: GradeContext, spec: KernelSpec, case: Case, keep: Kept, warmup_s: float
) -> tuple[dict[str, float] | None, str]:
    """The case's kernels timed in the replay's sandbox: the statistics, or
    None and why they could not be had."""
    import zlib

    from gpulab.judge.replay_timing import replayed_times

    assert ctx.replayer is not None
    ctx.stage(f"timing {case.name} (your kernels replayed)")
    seed = ctx.seed(zlib.crc32(f"replay timing {case.name}".encode()) % 100003)
    return replayed_times(ctx.replayer, spec, case, keep, seed, warmup_s)


def _time_replayed(
    ctx: GradeContext, spec: KernelSpec, case: Case, keep: Kept, t: RemoteTiming, warmup_s: float
) -> str | None:
    """The case's kernels timed again in the replay's sandbox: `t` takes the
    replay's times, the sandbox's claim kept beside them (`claimed_ms`); or
    why they could not be had, which makes the timing implausible: with the
    replay on, no time rests on the sandbox's claim alone."""
    return _take_replayed(case, t, _replayed(ctx, spec, case, keep, warmup_s))


def _take_replayed(
    case: Case, t: RemoteTiming, replayed: tuple[dict[str, float] | None, str]
) -> str | None:
    stats, why = replayed
    if stats is None:
        return f"{case.name}: the replay could not time your kernels: {why}"
    t.claimed_ms = t.ms
    t.stats = stats
    return None


def _time_case(
    ctx: GradeContext,
    spec: KernelSpec,
    fn: Any,
    case: Case,
    flusher: L2Flusher,
    device_name: str,
    warmup_s: float = 0.2,
    keep: Kept | None = None,
) -> tuple[KernelRow, str | None]:
    """One case timed through the judge: its row, and why it is implausible
    (if it is). `keep`: the case's launches recorded, where the replay
    times them (the sandbox's batches then stop after one that passes:
    their checks of the whole call still count, their times do not)."""
    from gpulab.judge.batches import time_remote

    req, ws = ctx.request, ctx.request.workspace
    # The graded time first, then the sandbox's checking batch: a size's
    # first heavy work finds the GPU as a check without the replay finds it
    # (on the H100 matmul's replayed times, taken right after 20 products
    # of the sandbox's batch, were 1-5% above that batch's own).
    replayed = _replayed(ctx, spec, case, keep, warmup_s) if keep is not None else None
    t = time_remote(ctx, spec, fn, case, flusher, warmup_s=warmup_s, one_batch=keep is not None)
    implausible = t.implausible
    if replayed is not None and not implausible:
        implausible = _take_replayed(case, t, replayed)
    names = {**case.sizes, "elt": case.dtype.itemsize}
    nbytes = eval_formula(req.bytes, names) if req.bytes else None
    flops = eval_formula(req.flops, names) if req.flops else None
    sec = t.ms * 1e-3
    # Carried in the row so the roofline can place this run later.
    row = KernelRow(
        name=case.name,
        shape=case.shape,
        dtype=dtype_name(case.dtype),
        timed=t,
        flops=flops,
        bytes=nbytes,
        kind=req.kind,
        sizes=dict(case.sizes),
        intensity=(flops / nbytes) if flops and nbytes else None,
    )
    if req.kind == "compute" and flops:
        row.throughput, row.unit = flops / sec / 1e12, "TFLOP/s"
        cap, label = ceilings.ceiling("compute", dtype_name(case.dtype), device_name, ws)
        row.roofline_fraction = (flops / sec) / cap if cap else None
    elif nbytes:
        row.throughput, row.unit = nbytes / sec / 1e9, "GB/s"
        cap, label = ceilings.ceiling("memory", dtype_name(case.dtype), device_name, ws)
        row.roofline_fraction = (nbytes / sec) / cap if cap else None
    else:
        label = ""
    row.ceiling = label
    peak_bw, peak_flops = ceilings.floor_peaks(device_name)
    floor = max(
        (nbytes or 0) / peak_bw if peak_bw else 0.0,
        (flops or 0) / peak_flops.get(dtype_name(case.dtype), math.inf) if peak_flops else 0.0,
    )
    if floor and sec < 0.9 * floor:
        implausible = (
            f"{case.name} took {t.ms * 1e3:.1f} µs, below the "
            f"{floor * 1e6:.1f} µs the datasheet allows"
        )
    return row, implausible


def _time_baseline(spec: KernelSpec, case: Case, row: KernelRow, flusher: L2Flusher) -> None:
    from gpulab.device.timing import measure

    assert spec.baseline is not None  # timed only for a spec that has one
    # Right after the learner's batches, at their clocks: a short warm-up,
    # still held until two successive batches agree (measure's rule).
    b = measure(spec.baseline(case), flusher=flusher, log_clocks=False, warmup_s=WARMUP_NEXT_S)
    row.baseline, row.baseline_ms = spec.baseline_name, float(b["ms"])
    row.speedup = row.baseline_ms / row.ms


def _summary(
    spec: KernelSpec, rows: list[KernelRow], device_name: str, implausible: str | None
) -> KernelTiming:
    fractions = [r.roofline_fraction for r in rows if r.roofline_fraction]
    speedups = [r.speedup for r in rows if r.speedup]
    score = _geomean(speedups if spec.grade_on == "speedup" else fractions)
    grade = next(letter for threshold, letter in spec.grades if score >= threshold)
    summary = f"grade {grade}: {_geomean(fractions):.0%} of the roofline"
    if speedups:
        summary += f", {_geomean(speedups):.2f}x {spec.baseline_name}"
    cases: list[KernelRow | BackwardRow] = [*rows]
    return KernelTiming(
        cases=cases,
        grade=grade,
        roofline_fraction=_geomean(fractions),
        speedup=_geomean(speedups) if speedups else None,
        baseline=spec.baseline_name,
        throughput=_geomean([r.throughput or 0.0 for r in rows]),
        unit=rows[0].unit if rows else "",
        ms=_geomean([r.ms for r in rows]),
        summary=summary,
        implausible=implausible,
        device=device_name,
    )
