"""Grader for lesson 05, step 4: the backward, as a plain function.

Contract: `rmsnorm_rope_backward(x, weight, cos, sin, dy, eps=1e-6)` returns
`(dx, dweight)`, the gradients of the exercise's forward
(gpulab.judge.graders.rope_rmsnorm) for the upstream gradient dy: dx in x's
shape and dtype, dweight (D,) in weight's dtype. x is a view as in the
forward; dy may be a non-contiguous view. No autograd: the step is the
backward's maths and the reduction of dweight over every row, written as
kernels; the exercise then wires them to autograd.

The cases, the float64 reference (autograd of the unfused chain), the
tolerances, the banned ops and the eager-op guard are the exercise's
backward checks. The wrapper may allocate, view, copy and add up (P, D)
partials with one `.sum(0)`, nothing else. On the CPU (and on a GPU with
the replay) every passing case is run again apart from the learner's code,
on the same inputs and on the inputs times a power of two (gpulab.judge.replay).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import torch

from gpulab.judge.case_row import CaseFields, case_row
from gpulab.judge.compare import compare, describe_mismatch, dtype_name, worst
from gpulab.judge.graders.rope_rmsnorm import (
    BACKWARD,
    BACKWARD_GPU,
    INTERPRETER_SKIPS,
    SPEC,
    Drawn,
    Spec,
    _cases,
    _scaled_tol,
    eager_fail,
    reference_grads,
)
from gpulab.judge.kernel import INTERPRETER_NOTE, Refs, compile_ahead, remote_call, replay_verdict
from gpulab.judge.kernel_guards import guards_for, report_failures
from gpulab.judge.kernel_spec import Case, Expect
from gpulab.judge.replay import Result
from gpulab.judge.replay_again import OTHER_SCALES, draw_scale, scale_case
from gpulab.judge.standard import STEP_NOTE
from gpulab.measure import compile_specs as cs
from gpulab.wire.status import StageKind

if TYPE_CHECKING:
    from gpulab.judge.context import GradeContext
    from gpulab.wire.calls import Returned
    from gpulab.wire.result import CaseRow

FUNCTION = "rmsnorm_rope_backward"
# The exercise's backward cases but those that differ only in how autograd
# is asked (y.backward): here there is no autograd to ask. Plus x as a slice
# of a fused QKV projection, with dy contiguous (x's strides are not dy's),
# and the first case's shape drawn again: an answer remembered by shape fails.
CASES: list[Spec] = [s for s in BACKWARD if "grad_api" not in s[6]] + [
    (1, 3, 4, 64, "fp16", 39, {"layout": "qkv"}),
    (2, 3, 5, 16, "fp32", 42, {"label": "second draw"}),
]


def step_case(drawn: Drawn) -> Case:
    """The exercise's case with dy as the fifth argument."""
    case, dy, _ = drawn
    return dataclasses.replace(case, args=(*case.args, dy))


def results(case: Case) -> list[Result]:
    """dx and dweight as the replay must give them (`case`: step_case's)."""
    x, w, cos, sin, dy = case.args
    gx, gw = reference_grads(dataclasses.replace(case, args=(x, w, cos, sin)), dy)
    return [
        Result(Expect(x.shape, x, "x"), gx, _scaled_tol(gx, x.dtype), "dx"),
        Result(Expect(w.shape, w, "weight"), gw, _scaled_tol(gw, w.dtype), "dweight"),
    ]


def _again(ctx: GradeContext, case: Case, first: list[Result]) -> tuple[float, list[Result]] | None:
    """The replay's second run: every input, dy included, times c (the
    drawn c, or another where that one leaves dx and dweight as they were)."""
    drawn = draw_scale(ctx.secret_seed, case.name)
    for c in (drawn, *(s for s in OTHER_SCALES if s != drawn)):
        others = results(scale_case(case, c))
        if any(
            compare(o.reference, f.reference, *f.tolerance).mismatches
            for o, f in zip(others, first, strict=True)
        ):
            return c, others
    return None


def _shape_problem(ctx: GradeContext, reply: Returned, name: str) -> None:
    """Fail where the function did not return two tensors."""
    desc = reply.desc
    if desc.type != "Tensor" and not reply.rest_copied:
        ctx.fail(
            f"case {name}: returned {desc.type or 'something'}, expected (dx, dweight)",
            "Return a tuple of two tensors: dx in x's shape and dtype, then dweight, "
            "shape (D,) in weight's dtype.",
        )


def record(case: Case, dx: torch.Tensor | None, dw: torch.Tensor | None) -> CaseRow:
    """The case: dx and dweight against float64 autograd of the unfused chain."""
    x, w = case.args[0], case.args[1]
    want = results(case)
    row: CaseFields = {
        "name": case.name,
        "shape": case.shape,
        "dtype": dtype_name(case.dtype),
        "passed": True,
    }
    details = []
    for got, res, like in ((dx, want[0], x), (dw, want[1], w)):
        if got is None:
            row["passed"] = False
            details.append(
                f"{res.label} does not have shape {tuple(res.reference.shape)} and dtype "
                f"{dtype_name(like.dtype)} ({'x' if like is x else 'weight'}'s)"
            )
            continue
        rep = compare(got, res.reference, *res.tolerance)
        row["dx_max_abs" if res.label == "dx" else "dweight_max_abs"] = rep.max_abs
        row["max_abs"] = worst(row.get("max_abs"), rep.max_abs)
        row["max_rel"] = worst(row.get("max_rel"), rep.max_rel)
        row["mismatches"] = row.get("mismatches", 0) + rep.mismatches
        if rep.mismatches:
            row["passed"] = False
            details.append(f"{res.label}: {describe_mismatch(rep)}")
    if details:
        row["detail"] = "; ".join(details)
    return case_row(**row)


def check(ctx: GradeContext, drawn: list[Drawn]) -> None:
    fn = ctx.function(FUNCTION)
    ctx.uses_triton = True
    compile_ahead(ctx)
    replayer = ctx.replayer
    if replayer is not None:
        replayer.ensure_started()
    total = len(drawn)
    for i, one in enumerate(drawn):
        case = step_case(one)
        ctx.stage(StageKind.CORRECTNESS, f"case {i + 1} of {total}: {case.name}", i, total)
        x, w = case.args[0], case.args[1]
        guards = guards_for(SPEC, eager_width=x.shape[-1])
        if replayer is not None:
            # The replay judges on a GPU: torch's profiler is not asked there.
            guards = dataclasses.replace(guards, replay=True, audit=ctx.device != "cuda")
        refs: Refs = {}
        reply, dx, rest = remote_call(
            ctx,
            fn.name,
            case.args,
            case.kwargs,
            expect=Expect(x.shape, x, "x"),
            guards=guards,
            contiguous=False,
            rest=[Expect(w.shape, w, "weight")],
            refs_out=refs,
        )
        _shape_problem(ctx, reply, case.name)
        report = reply.report
        ops = [*report.banned, *report.eager]
        if ops:
            eager_fail(ctx, ops, "your backward")
        report_failures(ctx, SPEC, report, case.name)
        dw = rest[0] if reply.rest_copied[:1] == (True,) else None
        row = record(case, dx, dw)
        ctx.add_case(row, total)
        if replayer is not None and row.passed:
            replay_verdict(ctx, replayer.collect())  # the case before this one
            first = results(case)
            why = replayer.submit(
                case,
                report.replay,
                refs,
                first,
                _again(ctx, case, first),
                sum_size=x.shape[-1],
            )
            replay_verdict(ctx, (case.name, why) if why else None)
    if replayer is not None and replayer.pending is not None:
        ctx.stage(StageKind.REPLAY, "your kernels again, apart from your code: the last case")
        replay_verdict(ctx, replayer.collect())


def grade(ctx: GradeContext) -> None:
    if ctx.interpreter:
        ctx.notes.append(INTERPRETER_NOTE)
        ctx.skipped.extend(f"{dt}: {why}" for dt, why in INTERPRETER_SKIPS.items())
    check(ctx, _cases(ctx, CASES + ([] if ctx.interpreter else BACKWARD_GPU)))
    # Say why no time or letter comes, as the other steps do (standard.py).
    ctx.notes.append(STEP_NOTE)


# --- `gpulab dev compile` (the manifest's tools: "compile") ---------------------
# The reference's kernels as it launches them, and the starter's with the same
# signature (gpulab.measure.compile_specs).
COMPILE_SPECS = (
    cs.Spec(
        "rmsnorm_rope_bwd_kernel",
        "bf16 D=128 BLOCK_H=16",
        cs.simple(
            "bf16",
            {"D": 128, "HALF": 64, "BLOCK_H": 16},
            4,
            floats=("eps",),
            fp32_ptrs=("cos_ptr", "sin_ptr", "dw_part_ptr"),
        ),
        starter="rmsnorm_rope_bwd_kernel",
    ),
)
