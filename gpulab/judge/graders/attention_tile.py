"""Grader for lesson 04, step 1: one query block against every key at once.

Contract: `attention(q, k, v, sm_scale=None)` with contiguous q (B, H, Sq, D)
and k, v (B, H, Sk, D), Sk from 1 to 64 (one key tile), D in {16, 32, 64,
128}, fp32 or fp16; not causal. Returns a new (B, H, Sq, D) tensor in q's
dtype, computed by a Triton kernel. Correctness only (a step is not timed);
the reference, tolerances and guards are the lesson's exercise's
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

KEYS = 64  # the key tile of this step: every Sk fits it


def correctness_cases(ctx: CaseContext, skip: set[str]) -> list[Case]:
    # fp16 for the large scores on a GPU: there tl.dot rounds fp32 inputs to
    # tf32, whose 10-bit mantissa cannot hold scores of ±100s to the digits an
    # fp32 check asks (as in the lesson's exercise, seen on an H200).
    big = "fp32" if ctx.interpreter else "fp16"
    specs: list[tuple[int, int, int, int, int, str, int, Extras]] = [
        # (B, H, Sq, Sk, D, dtype, seed, extras)
        (1, 1, 1, 1, 16, "fp32", 1, {}),
        (1, 2, 17, 17, 16, "fp16", 2, {}),
        (2, 3, 40, KEYS, 32, "fp32", 3, {}),  # the keys fill the tile; two query blocks
        (1, 2, 70, 33, 64, "fp16", 4, {}),  # Sq != Sk, nothing fills a block: the masks
        (1, 1, 20, 50, 128, "fp32", 5, {}),
        (1, 2, 48, 40, 64, "fp32", 6, {"sm_scale": 0.3}),
        # Scores of ±100s: exp overflows unless the row max is subtracted.
        (1, 2, 32, 64, 64, big, 7, {"scale": 8.0, "label": "large scores"}),
        # The same shape again with fresh data: a cached answer fails here.
        (1, 2, 70, 33, 64, "fp16", 8, {"label": "second draw"}),
    ]
    if ctx.device == "cuda":
        specs += [
            (4, 8, 1000, KEYS, 128, "fp16", 20, {}),
            (2, 4, 513, 37, 64, "fp16", 21, {"scale": 4.0, "label": "large scores"}),
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
        "attention_tile_kernel",
        f"{dt} D=128 32x64 w4",
        cs.simple(
            dt,
            {"HEAD_DIM": 128, "BLOCK_M": 32, "BLOCK_N": 64},
            4,
            floats=("qk_scale",),
            ptrs=("Q", "K", "V", "O"),
            stages=1,
        ),
        starter="attention_tile_kernel",
    )
    for dt in ("fp16", "fp32")
)
