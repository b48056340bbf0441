"""The body every kernel grader shares: the learner's function, the
correctness cases, and, once they all pass and a GPU is here, the timed
cases (gpulab.judge.kernel, gpulab.judge.speed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from gpulab.judge.kernel import INTERPRETER_NOTE, check_cases, compile_ahead
from gpulab.judge.kernel_spec import Case, KernelSpec
from gpulab.judge.speed import time_cases

if TYPE_CHECKING:
    from gpulab.judge.context import GradeContext
    from gpulab.judge.remote import Remote

STEP_NOTE = (
    "A step is graded on correctness only, on the CPU and on a GPU: "
    "the lesson's final exercise is the one timed."
)


def grade_kernel(
    ctx: GradeContext,
    spec: KernelSpec,
    function: str,
    correctness: Callable[[], list[Case]],
    timing: Callable[[], list[Case]] | None,
    *,
    check: Callable[[GradeContext, KernelSpec, Remote, list[Case]], None] | None = None,
    timing_note: str = "",
) -> None:
    """The body every kernel grader shares: the learner's function, the
    correctness cases (`check`, default check_cases), and, once they all
    pass and a GPU is here, the timed cases. `timing` None: correctness
    only (a lesson's steps; its final exercise is the one timed)."""
    fn = ctx.function(function)
    compile_ahead(ctx)
    if ctx.interpreter:
        ctx.notes.append(INTERPRETER_NOTE)
    (check or check_cases)(ctx, spec, fn, correctness())
    if timing is None:
        ctx.notes.append(STEP_NOTE)
        return
    if any(not c.passed for c in ctx.cases) or not ctx.want_timing:
        return
    if timing_note:
        ctx.notes.append(timing_note)
    ctx.correct()
    time_cases(ctx, spec, fn, timing())
