"""Grader for lesson 06: take the graph breaks out of a model step.

Contract: `step(x, lengths, params)` computes one single-head pre-norm
transformer block (x: B×S×D float32, lengths: B int64 valid lengths,
params: a dict of float32 tensors) and must

  1. give the same output as the original step (kept here, pristine, as
     `original_step`) on fresh inputs: several shapes and seeds, with the
     data-dependent rescale both taken and not taken;
  2. be captured by Dynamo as ONE graph: no graph break on any of the inputs
     traced, proven with `fullgraph=True`; the graph must hold the real ops
     (not an opaque `allow_in_graph` or custom op), and the function must not
     be excluded from tracing (`torch.compiler.disable`);
  3. still match the original once compiled (aot_eager on the CPU, where
     Inductor's C++ build takes ~30 s cold; Inductor on a GPU).

On a GPU the result also times the original, your step eagerly, and your step
under torch.compile's default and reduce-overhead (CUDA graph) modes.

Dynamo's settings are its defaults: changes your file makes to
torch._dynamo.config are undone (and named in the notes).

Where each part runs: the judge draws the inputs, runs the original step and
compares every output (eager and compiled), which the sandbox copies into
slots the judge owns. Dynamo's trace can only happen where the step lives:
the sandbox reports the graphs and breaks (gpulab.sandbox.dynamo), and the
judge applies the rules to that report (gpulab.judge.graph_dynamo).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import torch

from gpulab.judge.case_row import CaseFields, case_row
from gpulab.judge.compare import compare, describe_mismatch
from gpulab.judge.graph_dynamo import (
    args_nbytes,
    check_dynamo,
    config_changed,
    refuse_disabled,
    sandbox_reply,
)
from gpulab.judge.graph_step import (
    CASES,
    TIMING_SHAPES,
    clone_inputs,
    make_inputs,
    original_step,
    step_flops,
)
from gpulab.wire.dynamo import (
    CompiledSteps,
    CompileRequest,
    DynamoConfig,
    DynamoConfigRequest,
    Modes,
    ModesRequest,
)
from gpulab.wire.status import StageKind

if TYPE_CHECKING:
    from gpulab.judge.context import GradeContext
    from gpulab.judge.graph_step import StepInputs
    from gpulab.judge.timed_rows import Json
    from gpulab.wire.result import CaseRow

# Your rewrite may reorder a float operation or two: 1e-5 relative is a few
# ulps in fp32, far below what any change of meaning produces.
EAGER_TOL = (1e-5, 1e-5)  # (atol, rtol)
# Compiled code fuses and reorders reductions (and may use FMA): looser.
COMPILED_TOL = (1e-4, 1e-4)
# Traced by Dynamo: one input on each side of the data-dependent branch.
TRACE_CASES = (0, 3)
# Compiled and compared: one shape, the branch both ways.
COMPILED_CASES = (0, 1)


# --- grading ------------------------------------------------------------------


def _eager_case(ctx: GradeContext, fn: Any, args: StepInputs, name: str) -> CaseRow:
    """The step once in the sandbox on the judge's inputs, against the
    judge's original step."""
    from gpulab.judge.kernel import remote_call
    from gpulab.judge.kernel_spec import Expect, desc_problem

    x = args[0]
    expect = Expect(tuple(x.shape), x, "x")
    reply, out, _ = remote_call(ctx, fn.name, args, {}, expect=expect, guards=None)
    record: CaseFields = {"name": name, "dtype": "fp32", "shape": name.split(" ")[0]}
    problem = desc_problem(reply.desc, expect) or (
        None if out is not None else "the result could not be copied out"
    )
    if problem or out is None:
        record.update({"passed": False, "detail": problem})
        return case_row(**record)
    rep = compare(out, original_step(*clone_inputs(args)), *EAGER_TOL)
    record.update(
        {
            "passed": rep.mismatches == 0,
            "max_abs": rep.max_abs,
            "max_rel": rep.max_rel,
            "mismatches": rep.mismatches,
        }
    )
    if rep.mismatches:
        record["detail"] = "output differs from the original step: " + describe_mismatch(rep)
    return case_row(**record)


def _compiled_cases(
    ctx: GradeContext,
    fn: Any,
    cases: list[tuple[str, StepInputs]],
    names: list[str],
    backend: str,
) -> None:
    """torch.compile(step, backend, fullgraph=True) in the sandbox; each
    output compared here with the original step."""
    from gpulab.judge.kernel import Refs, encode

    chosen = [cases[i][1] for i in COMPILED_CASES]
    arena = ctx.arena(sum(args_nbytes(a) * 2 for a in chosen) + 4096)
    refs: Refs = {}
    inputs = [[encode(arena, a, refs) for a in args] for args in chosen]
    slots = [arena.slot(tuple(args[0].shape), args[0].dtype) for args in chosen]
    request = CompileRequest(fn.name, backend, inputs, tuple(slots))
    reply = sandbox_reply(ctx.sandbox.ask(request, CompiledSteps))
    config_changed(ctx, reply.config_changed)
    copied = reply.copied
    for k, (i, args, slot) in enumerate(zip(COMPILED_CASES, chosen, slots, strict=True)):
        name = f"compiled ({backend}) {names[i]}"
        if k >= len(copied) or copied[k] is not True:
            ctx.add_case(
                case_row(
                    name=name,
                    dtype="fp32",
                    passed=False,
                    detail="the compiled step did not return a tensor of x's "
                    "shape, dtype and device",
                )
            )
            continue
        rep = compare(arena.view(slot).clone(), original_step(*clone_inputs(args)), *COMPILED_TOL)
        case: CaseFields = {
            "name": name,
            "dtype": "fp32",
            "passed": rep.mismatches == 0,
            "max_abs": rep.max_abs,
            "max_rel": rep.max_rel,
            "mismatches": rep.mismatches,
        }
        if rep.mismatches:
            case["detail"] = describe_mismatch(rep)
        ctx.add_case(case_row(**case))


def grade(ctx: GradeContext) -> None:
    fn = ctx.function("step")
    # Changes the file made at import (the sandbox recorded Dynamo's config
    # before it ran): undone there, and said here.
    reply = sandbox_reply(ctx.sandbox.ask(DynamoConfigRequest(fn.name), DynamoConfig))
    changed = reply.changed
    if changed:
        ctx.notes.append(
            "Your file changed torch._dynamo.config ("
            + ", ".join(changed)
            + "); the check undid that and ran with Dynamo's defaults."
        )
    if reply.disabled:
        refuse_disabled(ctx)
    device = ctx.device
    if device == "cpu":
        # Tiny tensors: waking OpenMP threads costs more than the work (an op
        # took ~16 ms instead of ~30 µs on a busy 2-core machine).
        torch.set_num_threads(1)
    cases = [
        (label, make_inputs(b, s, d, ctx.seed(seed), rms=rms, full=full, device=device))
        for b, s, d, seed, rms, full, label in CASES
    ]
    names = [f"{b}×{s}×{d} {label}" for b, s, d, _, _, _, label in CASES]

    # 1. Eager outputs against the original.
    for (_, args), name in zip(cases, names, strict=True):
        ctx.stage(StageKind.CORRECTNESS, f"comparing outputs: {name}")
        ctx.add_case(_eager_case(ctx, fn, args, name), len(cases))
    config_changed(
        ctx,
        sandbox_reply(ctx.sandbox.ask(DynamoConfigRequest(fn.name), DynamoConfig)).changed,
    )
    if any(not c.passed for c in ctx.cases):
        return

    # 2. Graph breaks.
    traced = [(names[i], cases[i][1]) for i in TRACE_CASES]
    if not check_dynamo(ctx, fn, traced):
        return

    # 3. Compiled output, on one shape with the branch taken and not taken
    # (one compile: the shape is the same, only the data differs).
    backend = "inductor" if device == "cuda" else "aot_eager"
    ctx.stage(StageKind.COMPILE, f"compiling with torch.compile(backend={backend!r})")
    _compiled_cases(ctx, fn, cases, names, backend)
    if device == "cpu":
        ctx.notes.append(
            "On the CPU the compiled check uses backend='aot_eager' (Dynamo + "
            "AOTAutograd, no code generation): Inductor's C++ build takes about "
            "30 s here. A GPU check compiles with Inductor and times the modes."
        )
    if ctx.want_timing and all(c.passed for c in ctx.cases):
        ctx.correct()
        time_modes(ctx, fn)


# --- timing (GPU) ---------------------------------------------------------------


def time_modes(ctx: GradeContext, fn: Any) -> None:
    """Original vs your step: eager, torch.compile default, reduce-overhead,
    holding the GPU's timing lock (compiles included: they are in the loop)."""
    from gpulab.gpu.gpulock import gpu_timing_lock

    with gpu_timing_lock(
        "checking graph_breaks", gpu=torch.cuda.current_device(), on_wait=ctx.waiting
    ):
        _time_modes(ctx, fn)


def _time_modes(ctx: GradeContext, fn: Any) -> None:
    """The original is timed here; your step's modes in the sandbox (their
    times are the sandbox's report, not graded), every output checked here."""
    from gpulab.judge.kernel import Refs, encode
    from gpulab.measure.timing import L2Flusher, measure

    flusher = L2Flusher()
    rows: list[ModeRow] = []
    for b, s, d in TIMING_SHAPES:
        shape = f"{b}×{s}×{d}"
        args = make_inputs(b, s, d, ctx.seed(500 + s), rms=1.0, device="cuda")
        expected = original_step(*clone_inputs(args))
        ctx.stage(StageKind.TIMING, f"timing {shape}: original step (eager)")
        with torch.no_grad():
            t = measure(partial(original_step, *args), flusher=flusher)
        rows.append(_row("original step (eager)", shape, (b, s, d), t, None, None))
        arena = ctx.arena(args_nbytes(args) * 2 + 4096)
        refs: Refs = {}
        slots = [arena.slot(tuple(args[0].shape), args[0].dtype) for _ in MODES]
        ctx.stage(StageKind.TIMING, f"timing {shape}: your step, eager and compiled")
        request = ModesRequest(
            fn.name, tuple(MODES.values()), [encode(arena, a, refs) for a in args], tuple(slots)
        )
        got = sandbox_reply(ctx.sandbox.ask(request, Modes)).rows
        if len(got) != len(MODES):
            ctx.fail(f"timing {shape}: the sandbox sent no usable timing")
        for (name, _), slot, r in zip(MODES.items(), slots, got, strict=True):
            rep = compare(arena.view(slot).clone(), expected, *COMPILED_TOL)
            if rep.mismatches:
                ctx.fail(f"timing {shape} {name}: the output is wrong", describe_mismatch(rep))
            if r.ms is None or not r.ms > 0:
                ctx.fail(f"timing {shape}: the sandbox sent no usable timing")
            rows.append(_row(name, shape, (b, s, d), r.times(), r.kernels, r.compile_s))
        base_ms = next(r.ms for r in rows[-4:] if r.name == "your step (eager)")
        for row in rows[-4:]:
            row.baseline, row.speedup = "your step (eager)", base_ms / row.ms
    best = {r.shape.split(" ")[0]: r for r in rows if r.name.endswith("reduce-overhead")}
    parts = [
        f"{shape}: reduce-overhead {r.speedup:.1f}x eager ({r.kernels} kernels "
        f"vs {next(x.kernels for x in rows if x.shape == shape + ' your step (eager)')})"
        for shape, r in best.items()
    ]
    ctx.notes.append(
        "Your step's times are measured in the sandbox and reported, not graded; "
        "every timed output was checked by the judge."
    )
    ctx.timing = ModesTiming(rows, "; ".join(parts), torch.cuda.get_device_name(0))


# Your step's variants, timed in the sandbox: name -> torch.compile mode (None: eager).
MODES = {
    "your step (eager)": None,
    "torch.compile default": "default",
    "torch.compile reduce-overhead": "reduce-overhead",
}


@dataclass
class ModeRow:
    """One shape's step timed one way: the original (by the judge) or one of
    your step's modes (by the sandbox, reported, not graded)."""

    name: str
    shape: str
    times: dict[str, object]  # the timing's numbers as measured (ms, p20_ms, ...)
    ms: float
    flops: float
    kernels: int | None
    compile_s: float | None
    # With speedup, once the shape's eager step is timed.
    baseline: str | None = None
    speedup: float = 0.0

    def to_json(self) -> Json:
        out: Json = {"name": self.name, "shape": self.shape, "dtype": "fp32", **self.times}
        out.update(
            flops=self.flops,
            throughput=self.flops / (self.ms * 1e-3) / 1e12,
            unit="TFLOP/s",
            kernels=self.kernels,
            compile_s=self.compile_s,
        )
        if self.baseline is not None:
            out.update(baseline=self.baseline, speedup=self.speedup)
        return out


@dataclass
class ModesTiming:
    """The timing the app shows: each shape's modes beside the original."""

    cases: list[ModeRow]
    summary: str
    device: str
    implausible: str | None = None  # not graded, so never refused

    def to_json(self) -> Json:
        return {
            "cases": [r.to_json() for r in self.cases],
            "summary": self.summary,
            "baseline": "your step (eager)",
            "unit": "TFLOP/s",
            "device": self.device,
            "ms": self.cases[1].ms if len(self.cases) > 1 else None,
        }


def _row(
    name: str,
    shape: str,
    bsd: tuple[int, int, int],
    t: Mapping[str, object],
    kernels: int | None,
    compile_s: float | None,
) -> ModeRow:
    ms = t["ms"]
    assert isinstance(ms, (int, float))  # measure's and the sandbox's (checked) both have it
    return ModeRow(name, f"{shape} {name}", dict(t), ms, step_flops(*bsd), kernels, compile_s)


# --- `gpulab profile` (the manifest's tools: "profile") ---------------------------


def profile_step(module: Any, device: str) -> Callable[[], None]:
    """The learner's step eager, then compiled, each in a named range, on
    the inputs the check times (gpulab.judge.graph_step)."""
    b, s, d = TIMING_SHAPES[-1] if device == "cuda" else CASES[1][:3]
    args = make_inputs(b, s, d, 0, rms=8.0, device=device)
    compiled = torch.compile(module.step)
    # torch leaves the NVTX calls unannotated: typed here for the strict check.
    range_push: Callable[[str], int] = torch.cuda.nvtx.range_push
    range_pop: Callable[[], int] = torch.cuda.nvtx.range_pop

    def both() -> None:
        for name, fn in (("eager", module.step), ("compiled", compiled)):
            # A named range for torch.profiler and, on a GPU, for nsys.
            with torch.no_grad(), torch.profiler.record_function(name):
                if device == "cuda":
                    range_push(name)
                fn(*args)
                if device == "cuda":
                    range_pop()

    return both
