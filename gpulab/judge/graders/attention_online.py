"""Grader for lesson 04, step 2: the online softmax across key tiles.

Contract: `attention(q, k, v, sm_scale=None)` with contiguous q (B, H, Sq, D)
and k, v (B, H, Sk, D), Sq and Sk of any length, D in {16, 32, 64, 128},
fp32 or fp16; not causal. Returns a new (B, H, Sq, D) tensor in q's dtype,
computed by a Triton kernel. Correctness only (a step is not timed); the
reference, tolerances and guards are the lesson's exercise's
(gpulab.judge.graders.flash_attention).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpulab.judge import capability
from gpulab.judge.graders.flash_attention import Extras, make_case, make_spec
from gpulab.judge.graders.matmul import checked, interpreter_skips
from gpulab.judge.kernel_spec import Case
from gpulab.judge.standard import grade_kernel
from gpulab.measure import compile_specs as cs

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext


def correctness_cases(ctx: CaseContext, skip: set[str]) -> list[Case]:
    # fp16 for the large scores on a GPU: there tl.dot rounds fp32 inputs to
    # tf32, whose 10-bit mantissa cannot hold scores of ±100s to the digits an
    # fp32 check asks (as in the lesson's exercise, seen on an H200).
    big = "fp32" if ctx.interpreter else "fp16"
    specs: list[tuple[int, int, int, int, int, str, int, Extras]] = [
        # (B, H, Sq, Sk, D, dtype, seed, extras)
        (1, 1, 1, 1, 16, "fp32", 1, {}),
        (1, 1, 33, 5, 32, "fp16", 2, {}),  # fewer keys than one tile
        (2, 2, 70, 77, 32, "fp32", 3, {}),  # Sq != Sk, partial tiles
        (1, 1, 20, 300, 64, "fp16", 4, {}),  # many key tiles
        (1, 1, 30, 70, 128, "fp32", 5, {}),
        (1, 2, 64, 96, 64, "fp32", 6, {"sm_scale": 0.3}),  # whole tiles only
        # Scores of ±100s: exp overflows unless the running max is subtracted.
        (1, 2, 64, 100, 64, big, 7, {"scale": 8.0, "label": "large scores"}),
        # The same shape again with fresh data: a cached answer fails here.
        (2, 2, 70, 77, 32, "fp32", 8, {"label": "second draw"}),
    ]
    if ctx.device == "cuda":
        specs += [
            (1, 4, 500, 500, 64, "fp16", 20, {}),
            (2, 4, 777, 1500, 128, "fp16", 21, {}),
            (1, 2, 100, 1200, 128, "fp16", 22, {"scale": 4.0, "label": "large scores"}),
        ]
    return [
        make_case(ctx, B, H, Sq, Sk, D, False, dt, seed, **kw)
        for B, H, Sq, Sk, D, dt, seed, kw in specs
        if dt not in skip
    ]


def grade(ctx: GradeContext) -> None:
    def cases() -> list[Case]:
        skip = interpreter_skips(ctx, ("fp16",)) if ctx.interpreter else set()
        return correctness_cases(ctx, skip | capability.skip_for_device(ctx))

    grade_kernel(ctx, make_spec(ctx.interpreter), "attention", cases, None, check=checked)


# --- `gpulab dev compile` (the manifest's tools: "compile") ---------------------
# The reference's kernels as it launches them, and the starter's with the same
# signature (gpulab.measure.compile_specs).
COMPILE_SPECS = tuple(
    cs.Spec(
        "attention_online_kernel",
        f"{dt} D=128 32x16 w4",
        cs.simple(
            dt,
            {"HEAD_DIM": 128, "BLOCK_M": 32, "BLOCK_N": 16},
            4,
            floats=("qk_scale",),
            ptrs=("Q", "K", "V", "O"),
            stages=1,
        ),
        starter="attention_online_kernel",
    )
    for dt in ("fp16", "fp32")
)
