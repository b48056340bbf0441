"""Grader for lesson 06's reduce-overhead step: CUDA graphs applied to a
launch-bound model, and the speedup measured.

Contract (exercises/reduce_overhead.py): the file keeps the starter's
`Model` and defines `compile_step(model)`, which returns the model compiled
with CUDA graphs, and `time_per_call(step, x, sync)`, the milliseconds a
warm call of step(x) takes by the host's clock, `sync()` waiting for the
device. The check

  1. times SCENARIOS, simulated devices whose true time per call gpulab
     knows (gpulab.sandbox.overhead.SimulatedDevice: a call costs the host
     its launch and queues its work, which runs while the host goes on; the
     first calls are slow, as a compile and a recording are), with the
     learner's time_per_call: each figure within BAND of the truth. A
     method that reads the clock before the device is done, or counts the
     first calls, is off by far more;
  2. calls compile_step on a Model with the judge's weights: some
     torch.compile call must ask for CUDA graphs (mode "reduce-overhead" or
     "max-autotune", Inductor's triton.cudagraphs option, or the
     "cudagraphs" backend), and the result must compute the model on the
     judge's inputs (float64 reference). On the CPU, which has no CUDA
     graphs, the sandbox compiles with Dynamo's eager backend instead;
  3. on a GPU, times the model as it is in this process and the learner's
     compiled step around whole requests to the sandbox (the slope between
     runs of N and 2N calls, so the requests' own cost cancels), in
     alternating rounds: the step must be MIN_SPEEDUP times faster; and
     the speedup the learner's own method measures there must agree with
     the judge's within AGREE.

Where each part is decided: the outputs and the GPU times are the judge's;
which torch.compile calls were made is the sandbox's report (it runs in
the learner's process), worth only what the GPU's timing confirms.
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from gpulab.judge.case_row import CaseFields, case_row
from gpulab.judge.compare import compare, describe_mismatch
from gpulab.judge.context import GradeFailed
from gpulab.wire.dynamo import Overhead, OverheadRequest, Scenario
from gpulab.wire.replies import Raised
from gpulab.wire.status import StageKind, Status

if TYPE_CHECKING:
    from gpulab.judge.context import GradeContext
    from gpulab.wire.result import CaseRow

WIDTH, DEPTH, BATCH = 256, 8, 8
# (launch_ms, work_ms, slow_calls, slow_ms): launch-bound, then busy; the
# first three calls of each take 150 ms (a compile, a warm-up, a recording).
SCENARIOS: tuple[Scenario, ...] = ((5.0, 1.0, 3, 150.0), (0.5, 8.0, 3, 150.0))
# Milliseconds a call once warm: the host and the device overlap.
TRUTH = tuple(max(launch, work) for launch, work, _, _ in SCENARIOS)
# A sleep on a busy 2-core machine overshoots by up to a millisecond, and
# a method that syncs after every call measures launch + work (1.2x the
# launch-bound truth): honest. No sync reads 0.06x the busy truth, the
# slow calls counted in 100 calls 1.9x or more.
BAND = (0.7, 1.6)
# To be confirmed on a GPU (scripts/tools/gpu_session.sh step
# `reduce-overhead`): eager launches ~32 kernels a call, a CUDA graph one.
MIN_SPEEDUP = 2.0
AGREE = 1.5
N_CALLS, ROUNDS = 50, 5
TOL = (1e-4, 1e-4)


class Model(nn.Module):
    """The starter's Model, pristine: the judge's eager baseline."""

    def __init__(self, width: int = WIDTH, depth: int = DEPTH) -> None:
        super().__init__()
        self.norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(depth))
        self.linears = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for norm, linear in zip(self.norms, self.linears, strict=True):
            x = x + F.gelu(linear(norm(x)))
        return x


def make_weights(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    weights: dict[str, torch.Tensor] = {}
    for i in range(DEPTH):
        weights[f"norms.{i}.weight"] = 1 + 0.1 * torch.randn(WIDTH, generator=g)
        weights[f"norms.{i}.bias"] = 0.1 * torch.randn(WIDTH, generator=g)
        weights[f"linears.{i}.weight"] = torch.randn(WIDTH, WIDTH, generator=g) / WIDTH**0.5
        weights[f"linears.{i}.bias"] = 0.1 * torch.randn(WIDTH, generator=g)
    return weights


def reference(x: torch.Tensor, weights: dict[str, torch.Tensor]) -> torch.Tensor:
    model = Model().double()
    model.load_state_dict({k: v.double().cpu() for k, v in weights.items()})
    with torch.no_grad():
        out: torch.Tensor = model(x.double().cpu())
    return out


def _ask(ctx: GradeContext, msg: OverheadRequest) -> tuple[Overhead, float]:
    start = time.perf_counter()
    got = ctx.sandbox.ask(msg, Overhead)
    wall = time.perf_counter() - start
    if isinstance(got, Raised):
        ctx.fail(got.summary, got.message)
    if not isinstance(got, Overhead):
        raise GradeFailed(
            f"the sandbox could not run your step: {got.summary}", status=Status.ERROR
        )
    return got, wall


# --- 1. the method ------------------------------------------------------------------


def _scenario_name(s: Scenario) -> str:
    launch, work, slow_calls, slow = s
    kind = "launch-bound" if launch > work else "busy"
    return (
        f"time_per_call on a {kind} device ({launch:g} ms to launch a call, {work:g} ms of "
        f"work; the first {slow_calls} calls {slow:g} ms)"
    )


def method_cases(ctx: GradeContext) -> None:
    ctx.stage(StageKind.TIMING, "timing simulated devices with your time_per_call")
    got, _ = _ask(ctx, OverheadRequest(part="method", scenarios=SCENARIOS))
    for i, (scenario, truth) in enumerate(zip(SCENARIOS, TRUTH, strict=True)):
        ms = got.measured[i] if i < len(got.measured) else None
        error = got.errors[i] if i < len(got.errors) else "no answer"
        case: CaseFields = {"name": _scenario_name(scenario), "passed": False}
        if ms is None:
            case["detail"] = f"gave no time: {error or 'not a number'}"
        else:
            ratio = ms / truth
            case["passed"] = BAND[0] <= ratio <= BAND[1]
            detail = f"measured {ms:.3g} ms a call; the device's true {truth:g} ms"
            if ratio < BAND[0]:
                detail += (
                    ": the clock was read before the device finished the work the calls "
                    "queued. Call sync() before reading the clock at the end (and before "
                    "starting it, after the warm-up)"
                )
            elif ratio > BAND[1]:
                detail += (
                    ": the first calls (the compile, the recording) were counted. Warm up "
                    "with a few calls first, then time many"
                )
            case["detail"] = detail
        ctx.add_case(case_row(**case))


# --- 2. compile_step -----------------------------------------------------------------


class Step:
    """The learner's compiled step in the sandbox, inputs and slots shared."""

    def __init__(self, ctx: GradeContext, weights: dict[str, torch.Tensor], xs: list[Any]) -> None:
        nbytes = sum(t.numel() * 4 + 512 for t in weights.values()) + 2 * len(xs) * (
            BATCH * WIDTH * 4 + 512
        )
        self.ctx, self.arena = ctx, ctx.arena(nbytes + 8192)
        self.weights = {k: self.arena.put(v.to(ctx.device)) for k, v in weights.items()}
        self.inputs = [self.arena.put(x) for x in xs]
        self.slots = [self.arena.slot((BATCH, WIDTH), torch.float32) for _ in xs]

    def request(self, part: str, indices: list[int], calls: int = 0) -> tuple[Overhead, float]:
        msg = OverheadRequest(
            part=part,
            weights=dict(self.weights),
            inputs=tuple(self.inputs[i] for i in indices),
            outs=tuple(self.slots[i] for i in indices),
            calls=calls,
        )
        return _ask(self.ctx, msg)

    def output(self, i: int) -> torch.Tensor:
        out: torch.Tensor = self.arena.view(self.slots[i]).clone()
        return out


def compile_cases(
    ctx: GradeContext, step: Step, xs: list[torch.Tensor], weights: dict[str, torch.Tensor]
) -> None:
    ctx.stage(StageKind.COMPILE, "compiling your step")
    n = len(xs) - 1  # the last input is kept for the timed runs
    got, _ = step.request("compile", list(range(n)))
    asked = any(got.cudagraphs)
    seen = "; ".join(got.compiles)
    ctx.add_case(
        case_row(
            name="compile_step asks torch.compile for CUDA graphs",
            passed=asked,
            detail=(
                f"torch.compile was called with {seen}" if seen else "torch.compile was not called"
            )
            + (
                ""
                if asked
                else ': compile the model with mode="reduce-overhead" (CUDA graphs replay '
                "the step's kernels with one launch)"
            ),
        )
    )
    bad = []
    for i in range(n):
        if i >= len(got.copied) or not got.copied[i]:
            bad.append(f"call {i + 1} returned no ({BATCH}, {WIDTH}) float32 tensor")
            continue
        rep = compare(step.output(i), reference(xs[i], weights).to(ctx.device), *TOL)
        if rep.mismatches:
            bad.append(f"call {i + 1}: {describe_mismatch(rep)}")
    ctx.add_case(
        case_row(
            name=f"the compiled step computes the model ({n} inputs)",
            passed=not bad,
            detail="; ".join(bad)[:600],
        )
    )
    if ctx.device != "cuda":
        ctx.notes.append(
            "CUDA graphs need a GPU: on the CPU your compiled step ran with Dynamo's eager "
            "backend, and your method was checked on simulated devices. On a GPU the check "
            "also times your step itself and compares your measured speedup with its own."
        )


# --- 3. on a GPU: the judge's own times --------------------------------------------------


def _eager_seconds(model: Model, x: torch.Tensor, calls: int) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        model(x)
    torch.cuda.synchronize()
    return time.perf_counter() - start


def speed_cases(
    ctx: GradeContext, step: Step, xs: list[torch.Tensor], weights: dict[str, torch.Tensor]
) -> None:
    from gpulab.gpu.gpulock import gpu_timing_lock

    last = len(xs) - 1
    model = Model().to("cuda").eval()
    model.load_state_dict({k: v.to("cuda") for k, v in weights.items()})
    x = xs[last]
    ctx.stage(StageKind.TIMING, "warming up your compiled step and the model")
    with torch.no_grad():
        step.request("run", [last], calls=5)
        _eager_seconds(model, x, 5)
        ours: list[float] = []
        theirs: list[float] = []
        with gpu_timing_lock(
            "checking reduce_overhead", gpu=torch.cuda.current_device(), on_wait=ctx.waiting
        ):
            for r in range(ROUNDS):
                ctx.stage(
                    StageKind.TIMING, f"timing the model and your step, round {r + 1} of {ROUNDS}"
                )
                one = _eager_seconds(model, x, N_CALLS)
                two = _eager_seconds(model, x, 2 * N_CALLS)
                ours.append((two - one) / N_CALLS)
                _, one = step.request("run", [last], calls=N_CALLS)
                got, two = step.request("run", [last], calls=2 * N_CALLS)
                theirs.append((two - one) / N_CALLS)
        reported, _ = step.request("report", [last])
    eager_s, step_s = statistics.median(ours), statistics.median(theirs)
    speedup = eager_s / step_s if step_s > 0 else 0.0
    out_ok = (
        bool(got.copied[:1] == (True,))
        and not compare(step.output(last), reference(x, weights).to("cuda"), *TOL).mismatches
    )
    ctx.add_case(
        case_row(
            name="your compiled step, timed by gpulab",
            passed=out_ok and speedup >= MIN_SPEEDUP,
            detail=(
                f"{step_s * 1e6:.1f} µs a call against the model's {eager_s * 1e6:.1f} µs "
                f"as it is: {speedup:.2f}x (at least {MIN_SPEEDUP:g}x needed)"
                + ("" if out_ok else "; the timed calls' last output is wrong")
            ),
        )
    )
    ctx.add_case(_agreement(reported, speedup))


def _agreement(reported: Overhead, speedup: float) -> CaseRow:
    """The learner's speedup (their time_per_call, on the GPU, during the
    check) against the judge's."""
    eager, mine = reported.eager_ms, reported.step_ms
    if eager is None or mine is None or eager <= 0 or mine <= 0:
        return case_row(
            name="the speedup you measured",
            passed=False,
            detail="your time_per_call gave no usable times for the model and your step",
        )
    ratio = eager / mine
    return case_row(
        name="the speedup you measured",
        passed=speedup > 0 and 1 / AGREE <= ratio / speedup <= AGREE,
        detail=(
            f"your time_per_call: {eager:.4g} ms as it is, {mine:.4g} ms compiled, "
            f"{ratio:.2f}x; gpulab measured {speedup:.2f}x (within {AGREE:g}x needed)"
        ),
    )


def grade(ctx: GradeContext) -> None:
    for name in ("compile_step", "time_per_call"):
        ctx.function(name)  # the file loaded and defines both (or why not)
    method_cases(ctx)
    weights = make_weights(ctx.seed(6))
    g = torch.Generator().manual_seed(ctx.seed(60))
    xs = [torch.randn(BATCH, WIDTH, generator=g).to(ctx.device) for _ in range(4)]
    step = Step(ctx, weights, xs)
    compile_cases(ctx, step, xs, weights)
    if ctx.device == "cuda" and all(c.passed for c in ctx.cases):
        speed_cases(ctx, step, xs, weights)
