"""Grader for lesson 07's find-the-bottleneck step: name the operator that
dominates a slow block, and fix the block.

Contract: the learner's file sets BOTTLENECK to the operator's name and
defines `block(x, weights)`, one block of a small sequence model (layer
norm, causal prefix mean, linear, GELU, residual; `original_block` here is
the starter's, pristine). The check

  1. compares BOTTLENECK with the operator that dominates the original
     (aten::mean: the prefix mean calls it once per position);
  2. compares every output with a float64 reference on inputs drawn from
     the secret seed, fresh for every call, and checks that x and the
     weights are unchanged;
  3. times the learner's block with the judge's own clock, around whole
     requests to the sandbox, beside the original run in this process, in
     alternating rounds: the block must be at least SPEEDUP times faster;
  4. reads a profile of PROFILED calls (torch.profiler, in the sandbox) and
     requires the operator's share of the call's CPU time to be under
     SHARE_MAX, after checking the profile's times against the judge's
     clock (they cannot exceed the time the judge saw the request take).

Where each part is decided: the outputs and the times are the judge's own;
the profile is the sandbox's report (it ran in the learner's process), so a
forged one can only claim a share for a block the judge's clock already
found SPEEDUP times faster. The trace goes to
<workspace>/traces/find_bottleneck.json.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from gpulab.gpu.traces import KernelTime
from gpulab.judge.case_row import CaseFields, case_row
from gpulab.judge.compare import Comparison, compare, describe_mismatch
from gpulab.judge.context import GradeFailed
from gpulab.judge.graders.nvtx_profile import (
    OpRow,
    Profile,
    ProfileTiming,
    copy_untrusted,
    trace_file,
)
from gpulab.wire.protocol import text
from gpulab.wire.replies import Raised
from gpulab.wire.result import CaseRow
from gpulab.wire.status import StageKind, Status
from gpulab.wire.training import BlockOp, Blocks, BottleneckRequest

if TYPE_CHECKING:
    from gpulab.judge.context import GradeContext

B, S, D = 4, 256, 32
OP = "aten::mean"  # what dominates the original, on a CPU and on a GPU
# An operator a learner may name instead, and what it says about the profile.
NEAR = {
    "aten::sum": "aten::sum is where mean's work lands on the CPU (its self time)",
    "aten::div_": "aten::div_ is part of mean on the CPU (it divides the sum)",
    "aten::copy_": "aten::copy_ is a child of another operator here",
    "aten::slice": "aten::slice is the view each mean reads (cheap per call)",
    "aten::stack": "aten::stack runs once, after the loop",
}
# The reference: 5.3-5.4x through the check on a 2-core CPU (IPC included); honest
# variants (a chunked loop, an averaging matrix) 2.6-3.0x on a loaded 2-core box, where
# a bar of 3 refused them. The bar is there to make a forged profile worthless (the
# starter's loop with its rows hidden: 1x), so 2 does that and refuses no honest fix.
SPEEDUP = 2.0
SHARE_MAX = 0.20  # the original's aten::mean: about 70% (measured on a loaded 2-core CPU)
ROUNDS, PER_ROUND = 5, 8
PROFILED = 3  # calls in the profile
TOL = (1e-4, 1e-4)  # (atol, rtol): a running sum rounds differently from 256 means


# --- the original block and its inputs -------------------------------------------


def original_block(x: torch.Tensor, weights: dict[str, torch.Tensor]) -> torch.Tensor:
    """The starter's block, timed as the baseline."""
    h = F.layer_norm(x, (x.shape[-1],), weights["norm.weight"], weights["norm.bias"])
    context = torch.stack([h[:, : t + 1].mean(dim=1) for t in range(h.shape[1])], dim=1)
    u = F.linear(torch.cat([h, context], dim=-1), weights["mix.weight"], weights["mix.bias"])
    return x + F.gelu(u)


def reference(x: torch.Tensor, weights: dict[str, torch.Tensor]) -> torch.Tensor:
    """The same block in float64, the prefix mean as a running sum (the same
    numbers as the loop, to float64's rounding)."""
    x = x.double()
    w = {k: v.double() for k, v in weights.items()}
    h = F.layer_norm(x, (x.shape[-1],), w["norm.weight"], w["norm.bias"])
    counts = torch.arange(1, h.shape[1] + 1, dtype=h.dtype, device=h.device)
    context = h.cumsum(dim=1) / counts[:, None]
    u = F.linear(torch.cat([h, context], dim=-1), w["mix.weight"], w["mix.bias"])
    return x + F.gelu(u)


def make_weights(seed: int, device: str) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    weights = {
        "norm.weight": 1 + 0.1 * torch.randn(D, generator=g),
        "norm.bias": 0.1 * torch.randn(D, generator=g),
        "mix.weight": torch.randn(D, 2 * D, generator=g) / (2 * D) ** 0.5,
        "mix.bias": 0.1 * torch.randn(D, generator=g),
    }
    return {k: v.to(device) for k, v in weights.items()}


def make_x(seed: int, device: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    # An offset per channel: a prefix mean that ignores it is visibly wrong.
    return (torch.randn(B, S, D, generator=g) + torch.randn(D, generator=g)).to(device)


def normalized(name: str) -> str:
    """'mean', 'torch.mean', 'aten::mean.dim', 'Tensor.mean' -> 'aten::mean'."""
    n = name.strip().strip("`'\"").lower()
    for prefix in ("aten::", "torch.", "tensor.", "torch.tensor.", "f."):
        if n.startswith(prefix):
            n = n[len(prefix) :]
    n = n.removesuffix("()").split(".", 1)[0]
    return f"aten::{n}" if n else ""


# --- grading ------------------------------------------------------------------


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


class Requests:
    """The learner's block in the sandbox: inputs and slots in shared memory,
    each request timed by the judge from sending it to the reply."""

    def __init__(
        self, ctx: GradeContext, fn: Any, weights: dict[str, torch.Tensor], xs: list[torch.Tensor]
    ) -> None:
        nbytes = sum(t.numel() * t.element_size() + 512 for t in weights.values())
        nbytes += 2 * sum(x.numel() * x.element_size() + 512 for x in xs) + 8192
        self.ctx, self.fn, self.arena = ctx, fn, ctx.arena(nbytes)
        self.weights = {k: self.arena.put(v) for k, v in weights.items()}
        self.inputs = [self.arena.put(x) for x in xs]
        self.slots = [self.arena.slot(tuple(x.shape), x.dtype) for x in xs]
        self.copied: dict[int, bool] = {}

    def run(
        self, indices: list[int], profile: bool = False, trace: str | None = None
    ) -> tuple[Blocks, float]:
        msg = BottleneckRequest(
            function=self.fn.name,
            weights=dict(self.weights),
            inputs=tuple(self.inputs[i] for i in indices),
            outs=tuple(self.slots[i] for i in indices),
            profile=profile,
            trace=trace,
        )
        start = time.perf_counter()
        got = self.ctx.sandbox.ask(msg, Blocks)
        wall = time.perf_counter() - start
        if isinstance(got, Raised):
            self.ctx.fail(got.summary, got.message)
        if not isinstance(got, Blocks):
            raise GradeFailed(
                f"the sandbox could not run your block: {got.summary}",
                status=Status.ERROR,
            )
        copied = got.copied
        for k, i in enumerate(indices):
            self.copied[i] = k < len(copied) and copied[k]
        return got, wall

    def output(self, i: int) -> torch.Tensor | None:
        return self.arena.view(self.slots[i]).clone() if self.copied.get(i) else None

    def unchanged(self, weights: dict[str, torch.Tensor], xs: list[torch.Tensor]) -> bool:
        same = all(torch.equal(self.arena.view(r), weights[k]) for k, r in self.weights.items())
        return same and all(
            torch.equal(self.arena.view(r), x) for r, x in zip(self.inputs, xs, strict=True)
        )


def grade(ctx: GradeContext) -> None:
    device = ctx.device
    if device == "cpu":
        torch.set_num_threads(1)  # as in the sandbox: both sides on one thread
    fn = ctx.function("block")
    weights = make_weights(ctx.seed(7), device)
    first = 1 + PROFILED  # a warm-up call, the profiled calls, then the timed ones
    n = first + ROUNDS * PER_ROUND
    xs = [make_x(ctx.seed(100 + i), device) for i in range(n)]
    calls = Requests(ctx, fn, weights, xs)

    ctx.stage(StageKind.RUNNING, "running your block")
    warm, _ = calls.run([0])
    _answer_case(ctx, warm.answer, warm.answer_type)
    original_block(xs[0].clone(), weights)  # the judge's warm-up
    ctx.stage(StageKind.PROFILING, f"profiling {PROFILED} calls of your block")
    trace, written = _trace_paths(ctx)
    profiled, profile_wall = calls.run(list(range(1, first)), profile=True, trace=str(written))
    theirs, ours = _time_rounds(ctx, calls, xs, weights, first)
    _output_case(ctx, calls, xs, weights)
    ctx.add_case(_speed_case(theirs, ours, profiled))
    ctx.add_case(_share_case(profiled, profile_wall))
    _report(ctx, profiled, theirs, ours, written, trace)


def _answer_case(ctx: GradeContext, answer: str | None, kind: str) -> None:
    """`kind`: the type's name of a BOTTLENECK that is not a string."""
    case: CaseFields = {"name": "names the bottleneck", "passed": False}
    if answer is None:
        case["detail"] = (
            "BOTTLENECK must be a string, the operator's name as torch.profiler's table "
            f"spells it (it is {'missing' if kind == 'NoneType' else 'a ' + kind})"
        )
    elif not answer.strip():
        case["detail"] = (
            "BOTTLENECK is empty: profile the original block (run the starter file) and "
            "name the operator at the top of the table sorted by CPU total"
        )
    else:
        got = normalized(answer)
        case["passed"] = got == OP
        if not case["passed"]:
            why = NEAR.get(got, "the original's profile does not put it on top")
            case["detail"] = (
                f"{text(answer, 60)!r} is not the operator that dominates the original step: "
                f"{why}. Sort the table by CPU total: the operator your code calls is the row "
                "whose total holds the time."
            )
    ctx.add_case(case_row(**case))


def _trace_paths(ctx: GradeContext) -> tuple[Path, Path]:
    """(where the trace belongs, where the sandbox writes it): a folder of
    the judge's, and the judge copies it out (the workspace's traces folder
    is never the sandbox's to write)."""
    wanted = trace_file(ctx, "find_bottleneck.json")
    if not ctx.outbox:  # in-process, in tests
        return wanted, wanted
    return wanted, Path(ctx.outbox) / wanted.name


def _time_rounds(
    ctx: GradeContext,
    calls: Requests,
    xs: list[torch.Tensor],
    weights: dict[str, torch.Tensor],
    first: int,
) -> tuple[list[float], list[float]]:
    """Per-call seconds of the learner's block (whole requests, the judge's
    clock) and of the original (here), in alternating rounds so that a busy
    machine slows both alike."""
    device = ctx.device
    theirs: list[float] = []
    ours: list[float] = []
    lock: Any = None
    if device == "cuda":
        from gpulab.gpu.gpulock import gpu_timing_lock

        lock = gpu_timing_lock(
            "checking find_bottleneck", gpu=torch.cuda.current_device(), on_wait=ctx.waiting
        )
        lock.__enter__()
    try:
        for r in range(ROUNDS):
            ctx.stage(
                StageKind.TIMING, f"timing your block and the original, round {r + 1} of {ROUNDS}"
            )
            idx = list(range(first + r * PER_ROUND, first + (r + 1) * PER_ROUND))
            mine = [xs[i].clone() for i in idx]
            _sync(device)
            start = time.perf_counter()
            for x in mine:
                original_block(x, weights)
                _sync(device)  # as the sandbox's call does after each of yours
            ours.append((time.perf_counter() - start) / len(idx))
            _, wall = calls.run(idx)
            theirs.append(wall / len(idx))
    finally:
        if lock is not None:
            lock.__exit__(None, None, None)
    return theirs, ours


def _output_case(
    ctx: GradeContext, calls: Requests, xs: list[torch.Tensor], weights: dict[str, torch.Tensor]
) -> None:
    worst: Comparison | None = None
    wrong = missing = 0
    for i, x in enumerate(xs):
        out = calls.output(i)
        if out is None:
            missing += 1
            continue
        rep = compare(out, reference(x, weights), *TOL)
        if rep.mismatches:
            wrong += 1
            worst = worst or rep
    case: CaseFields = {
        "name": f"outputs match the original on {len(xs)} fresh inputs",
        "passed": not wrong and not missing,
        "dtype": "fp32",
        "shape": f"{B}×{S}×{D}",
    }
    if missing:
        case["detail"] = (
            f"{missing} of {len(xs)} calls did not return a {B}×{S}×{D} float32 tensor on "
            "x's device"
        )
    elif wrong:
        case["detail"] = f"{wrong} of {len(xs)} outputs differ from the original block: " + (
            describe_mismatch(worst) if worst else ""
        )
    ctx.add_case(case_row(**case))
    if not calls.unchanged(weights, xs):
        ctx.add_case(
            case_row(
                name="inputs unchanged",
                passed=False,
                detail="your block wrote into its inputs (x or the weights changed)",
            )
        )


def _ms(s: float) -> str:
    return f"{s * 1e3:.2f} ms"


def speedup(theirs: list[float], ours: list[float]) -> float:
    """The median over rounds of the original's time over the learner's: each
    round's two figures were taken seconds apart, under the same load."""
    return statistics.median(
        o / t if t > 0 else math.inf for t, o in zip(theirs, ours, strict=True)
    )


def _speed_case(theirs: list[float], ours: list[float], profiled: Blocks) -> CaseRow:
    t, o = statistics.median(theirs), statistics.median(ours)
    ratio = speedup(theirs, ours)
    passed = ratio >= SPEEDUP
    detail = (
        f"{ratio:.1f}×: {_ms(t)} a call against the original's {_ms(o)} "
        f"(medians of {len(theirs)} rounds of {PER_ROUND} calls)"
    )
    if not passed:
        top = _ops(profiled)[:1]
        if top and top[0].calls >= S // 2:
            detail += (
                f". Your profile's top row, {text(top[0].name, 60)}, runs "
                f"{top[0].calls} times a call: still one small operation per position?"
            )
    return case_row(
        name=f"at least {SPEEDUP:g}× faster than the original (the judge's clock)",
        passed=passed,
        detail=detail,
    )


def _ops(reply: Blocks) -> list[BlockOp]:
    """The profile's operator rows (those Blocks.parse kept), per step: the
    profile holds PROFILED calls."""
    rows = [
        BlockOp(
            r.name,
            round(r.calls / PROFILED),
            r.self_cpu_us / PROFILED,
            r.cpu_total_us / PROFILED,
            r.self_device_us / PROFILED,
        )
        for r in reply.ops
    ]
    rows.sort(key=lambda r: r.cpu_total_us, reverse=True)
    return rows


def share_of(reply: Blocks) -> tuple[float, int, float]:
    """(OP's CPU total as a share of the profile's CPU time, its calls a
    step, the profile's CPU time a step in seconds), from the sandbox's rows."""
    total = reply.cpu_total_us
    total = total / PROFILED if total is not None and math.isfinite(total) and total > 0 else 0.0
    rows = [r for r in _ops(reply) if r.name == OP]
    op_us = sum(r.cpu_total_us for r in rows)
    share = op_us / total if total else (1.0 if op_us else 0.0)
    return min(share, 1.0), round(sum(r.calls for r in rows)), total * 1e-6


def _share_case(profiled: Blocks, wall: float) -> CaseRow:
    share, count, cpu_s = share_of(profiled)
    call_s = profiled.wall_s
    case: CaseFields = {
        "name": f"{OP} under {SHARE_MAX:.0%} of the step's CPU time ({PROFILED} calls profiled)",
        "passed": False,
    }
    if not cpu_s or call_s is None or not math.isfinite(call_s):
        case["detail"] = "the profile of your block came back empty"
    elif cpu_s * PROFILED > wall or call_s > wall:
        # Times the judge's clock could not have seen: the report was made up.
        case["detail"] = (
            f"the profile claims {_ms(max(cpu_s * PROFILED, call_s))} for calls the judge saw "
            f"take {_ms(wall)} from request to reply: its figures are not a profile of that call"
        )
    else:
        case["passed"] = share < SHARE_MAX
        case["detail"] = f"{OP}: {share:.0%} of {_ms(cpu_s)} of CPU time" + (
            f" ({count} calls a step)" if count else " (not called)"
        )
    return case_row(**case)


def _report(
    ctx: GradeContext,
    profiled: Blocks,
    theirs: list[float],
    ours: list[float],
    written: Path,
    wanted: Path,
) -> None:
    """What the app shows: the profile's top rows and kernels, the trace."""
    trace, problem = "", profiled.trace_error
    if not problem and written != wanted:
        try:
            copy_untrusted(written, wanted)
        except OSError as exc:
            problem = str(exc)
    if problem:
        ctx.notes.append(f"could not write the trace to {wanted}: {problem}")
    elif wanted.is_file():
        trace = str(wanted)
        ctx.notes.append(
            f"Trace of the profiled call written to {trace}: open it in "
            "https://ui.perfetto.dev (or chrome://tracing)."
        )
    rows = [
        OpRow(
            name=r.name,
            calls=round(r.calls),
            self_cpu_ms=r.self_cpu_us / 1e3,
            cpu_total_ms=r.cpu_total_us / 1e3,
            self_device_ms=r.self_device_us / 1e3,
        )
        for r in _ops(profiled)[:12]
    ]
    info: Profile = {"trace": trace, "device": ctx.device, "top_ops": rows, "sort": "cpu_total_ms"}
    if ctx.device == "cuda":
        info["top_kernels"] = [
            KernelTime(name=k.name, calls=k.calls, device_ms=k.device_ms)
            for k in profiled.top_kernels
        ]
    share, _, _ = share_of(profiled)
    t, o = statistics.median(theirs), statistics.median(ours)
    ctx.timing = ProfileTiming(
        info,
        f"{_ms(t)} a call against the original's {_ms(o)} "
        f"({speedup(theirs, ours):.1f}×); {OP} {share:.0%} of the profiled calls",
    )


# --- `gpulab profile` (the manifest's tools: "profile") ---------------------------


def profile_step(module: Any, device: str) -> Callable[[], None]:
    """One call of the learner's block in a named range, on the check's
    inputs (and, on the CPU, its single thread: the same table)."""
    x, weights = make_x(0, device), make_weights(0, device)

    def block() -> None:
        with torch.no_grad(), torch.profiler.record_function("block"):
            module.block(x, weights)

    return block
