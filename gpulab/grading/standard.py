"""The body every kernel grader shares: the learner's function, the
correctness cases, and, once they all pass and a GPU is here, the timed
cases (gpulab.grading.kernel, gpulab.grading.speed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpulab.grading.kernel import INTERPRETER_NOTE, Case, KernelSpec, check_cases
from gpulab.grading.speed import time_cases


def grade_kernel(
    ctx: Any,
    spec: KernelSpec,
    function: str,
    correctness: Callable[[], list[Case]],
    timing: Callable[[], list[Case]],
    *,
    check: Callable | None = None,
    timing_note: str = "",
) -> None:
    """The body every kernel grader shares: the learner's function, the
    correctness cases (`check`, default check_cases), and, once they all
    pass and a GPU is here, the timed cases."""
    fn = ctx.function(function)
    if ctx.interpreter:
        ctx.notes.append(INTERPRETER_NOTE)
    (check or check_cases)(ctx, spec, fn, correctness())
    if any(not c["passed"] for c in ctx.cases) or not ctx.want_timing:
        return
    if timing_note:
        ctx.notes.append(timing_note)
    time_cases(ctx, spec, fn, timing())
