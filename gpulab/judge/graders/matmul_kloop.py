"""Grader for lesson 03, step 2: every tile, and the K loop.

Contract: `matmul(a, b)` with contiguous a (M, K) and b (K, N), fp32 or
fp16, of any size; returns a new (M, N) tensor in a's dtype, computed by a
Triton kernel. Correctness only (a step is not timed); the tolerances and
guards are the lesson's exercise's (gpulab.judge.graders.matmul).
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
        (32, 32, 32, "fp32", 2, ""),
        (64, 96, 128, "fp16", 3, ""),  # several tiles and K steps, no tails
        (33, 47, 65, "fp16", 4, ""),  # a tail in M, N and K
        (100, 37, 129, "fp32", 5, ""),
        (130, 70, 200, "fp16", 6, ""),
        (1, 150, 70, "fp32", 7, ""),  # a single row
        (90, 1, 48, "fp16", 8, ""),  # a single column
        # The same shape again with fresh data: a cached answer fails here.
        (33, 47, 65, "fp16", 9, "second draw"),
    ]
    if ctx.device == "cuda":
        specs += [
            (513, 1025, 255, "fp16", 20, ""),
            (1000, 300, 400, "fp32", 21, ""),
            (128, 128, 8000, "fp16", 22, "(long K)"),
            (4, 5000, 4096, "fp16", 23, "(decode-like: 4 rows)"),
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
        "matmul_kloop_kernel",
        f"{dt} 32x32x32 w4",
        cs.simple(dt, {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, 4),
        starter="matmul_kloop_kernel",
    )
    for dt in ("fp16", "fp32")
)
