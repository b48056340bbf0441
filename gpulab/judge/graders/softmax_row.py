"""Grader for lesson 02, step 1: one row in one block.

Contract: `softmax(x)` for a contiguous 2-D fp32/fp16 tensor of 1 to 1024
columns; returns a new contiguous tensor of the same shape and dtype,
computed by a Triton kernel. Correctness only (a step is not timed); the
cases and guards are the lesson's exercise's (gpulab.judge.graders.softmax).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpulab.judge.graders.softmax import SPEC, Spec, _case
from gpulab.judge.kernel_spec import Case
from gpulab.judge.standard import grade_kernel
from gpulab.measure import compile_specs as cs

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext

WIDTH = 1024  # the block of this step: every row fits it


def correctness_cases(ctx: CaseContext) -> list[Case]:
    specs: list[Spec] = [
        # (rows, cols, dtype, public seed, extras)
        (1, 1, "fp32", 1, {}),
        (3, 7, "fp32", 2, {}),  # most of the block is past the row: the mask
        (4, 100, "fp16", 3, {}),
        (5, 1000, "fp32", 4, {}),
        (2, WIDTH, "fp16", 5, {}),  # the row fills the block exactly
        (6, 333, "fp32", 6, {"scale": 1e4, "label": "large magnitudes"}),
        # fp16 holds |x| up to 65504 (the contract's other dtype; bf16 comes
        # with the lesson's exercise): the max subtracted for fp16 rows too.
        (3, 333, "fp16", 9, {"scale": 8e3, "label": "large magnitudes"}),
        (6, 100, "fp32", 7, {"neg_inf": True, "label": "with -inf"}),
        # The same shape again with fresh data: a cached answer fails here.
        (5, 1000, "fp32", 8, {"label": "second draw"}),
    ]
    if ctx.device == "cuda":
        specs += [(1823, 781, "fp16", 20, {}), (4096, WIDTH, "fp32", 21, {})]
    return [_case(ctx, r, c, dt, seed, **kw) for r, c, dt, seed, kw in specs]


def grade(ctx: GradeContext) -> None:
    grade_kernel(ctx, SPEC, "softmax", lambda: correctness_cases(ctx), None)


# --- `gpulab dev compile` (the manifest's tools: "compile") ---------------------
# The reference's kernels as it launches them, and the starter's with the same
# signature (gpulab.measure.compile_specs).
COMPILE_SPECS = tuple(
    cs.Spec(
        "softmax_row_kernel",
        f"{dt} BLOCK=1024 w4",
        cs.simple(dt, {"BLOCK": 1024}, 4),
        starter="softmax_row_kernel",
    )
    for dt in ("fp16", "fp32")
)
