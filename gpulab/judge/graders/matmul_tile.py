"""Grader for lesson 03, step 1: one tile.

Contract: `matmul(a, b)` with contiguous a (M, K) and b (K, N), fp32 or
fp16, M, N and K from 1 to 64; returns a new (M, N) tensor in a's dtype,
computed by a Triton kernel. Correctness only (a step is not timed); the
tolerances and guards are the lesson's exercise's (gpulab.judge.graders.matmul).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpulab.judge.graders.matmul import checked, interpreter_skips, make_case, make_spec
from gpulab.judge.kernel_spec import Case
from gpulab.judge.standard import grade_kernel
from gpulab.measure import compile_specs as cs

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext


def correctness_cases(ctx: CaseContext, skip: set[str]) -> list[Case]:
    specs = [
        # (M, N, K, dtype, public seed, label)
        (1, 1, 1, "fp32", 1, ""),
        (16, 16, 16, "fp32", 2, ""),
        (64, 64, 64, "fp16", 3, ""),  # the tile exactly
        (33, 47, 20, "fp32", 4, ""),  # nothing fills the block: every mask counts
        (5, 64, 7, "fp16", 5, ""),
        (64, 1, 50, "fp32", 6, ""),  # a single column
        (40, 50, 64, "fp16", 7, ""),
        # The same shape again with fresh data: a cached answer fails here.
        (33, 47, 20, "fp32", 8, "second draw"),
    ]
    return [
        make_case(ctx, M, N, K, dt, seed, label=label)
        for M, N, K, dt, seed, label in specs
        if dt not in skip
    ]


def grade(ctx: GradeContext) -> None:
    def cases() -> list[Case]:
        skip = interpreter_skips(ctx, ("fp16",)) if ctx.interpreter else set()
        return correctness_cases(ctx, skip)

    grade_kernel(ctx, make_spec(ctx.interpreter), "matmul", cases, None, check=checked)


# --- `gpulab dev compile` (the manifest's tools: "compile") ---------------------
# The reference's kernels as it launches them, and the starter's with the same
# signature (gpulab.measure.compile_specs).
COMPILE_SPECS = tuple(
    cs.Spec(
        "matmul_tile_kernel",
        f"{dt} 64x64x64 w4",
        cs.simple(dt, {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}, 4),
        starter="matmul_tile_kernel",
    )
    for dt in ("fp16", "fp32")
)
