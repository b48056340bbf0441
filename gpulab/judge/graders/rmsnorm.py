"""Grader for lesson 05, step 2: RMSNorm alone.

Contract: `rmsnorm(x, weight, eps=1e-6)` for a contiguous x of shape
(B, S, H, D), fp16/bf16/fp32, D a power of two from 16 to 256; weight (D,)
in x's dtype or fp32. Returns a new tensor of x's shape and dtype,
x · rsqrt(mean(x²) + eps) · weight over D, computed by a Triton kernel.
Correctness only (a step is not timed); the inputs, tolerances, banned ops
and the eager-op guard are the lesson's exercise's
(gpulab.judge.graders.rope_rmsnorm).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from gpulab.judge import capability
from gpulab.judge.graders.rope import guarded
from gpulab.judge.graders.rope_rmsnorm import DTYPES, TOLERANCE, Extras, Spec, make_inputs
from gpulab.judge.graders.rope_rmsnorm import SPEC as FUSED
from gpulab.judge.kernel_spec import Case, Expect, KernelSpec
from gpulab.judge.standard import grade_kernel
from gpulab.measure import compile_specs as cs

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext


def normalise(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm in x's dtype."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.to(x.dtype)


def reference(case: Case) -> torch.Tensor:
    x, w = case.args
    return normalise(x.double(), w, case.kwargs.get("eps", 1e-6))


SPEC = KernelSpec(
    reference=reference,
    # The lesson's own bans (F.rms_norm and kin), not a copy that can drift.
    banned=FUSED.banned,
    banned_aten=FUSED.banned_aten,
    banned_label=FUSED.banned_label,
    tolerance=lambda dt: TOLERANCE[dt],
    expect=lambda case: Expect(case.args[0].shape, case.args[0], "x"),
)

# (B, S, H, D, dtype, public seed, extras)
CASES: list[Spec] = [
    (1, 1, 1, 16, "fp32", 1, {}),
    (2, 3, 5, 32, "fp32", 2, {}),  # 30 rows: a partial last block of rows
    (1, 4, 3, 64, "fp16", 3, {}),
    (1, 3, 2, 128, "bf16", 4, {}),
    (1, 2, 3, 256, "fp32", 5, {}),
    (1, 2, 3, 128, "fp16", 6, {"scale": 300.0, "label": "large magnitudes"}),
    (1, 2, 3, 64, "bf16", 7, {"scale": 1e4, "label": "large magnitudes"}),
    (1, 3, 3, 64, "fp32", 8, {"scale": 1e-3, "label": "small: eps matters"}),
    (1, 2, 5, 32, "fp32", 9, {"eps": 0.1, "label": "eps=0.1"}),
    (1, 2, 3, 128, "bf16", 10, {"w_dtype": "fp32", "label": "fp32 weight"}),
    (2, 3, 5, 32, "fp32", 11, {"label": "second draw"}),  # fresh data, same shape
]
CASES_GPU: list[Spec] = [
    (2, 1000, 7, 128, "bf16", 20, {}),
    (3, 129, 5, 256, "fp32", 21, {}),
    (1, 4096, 32, 128, "fp16", 22, {"scale": 300.0, "label": "large magnitudes"}),
]


def make_case(
    ctx: CaseContext, B: int, S: int, H: int, D: int, dt: str, seed: int, kw: Extras
) -> Case:
    w_dtype = DTYPES[kw["w_dtype"]] if "w_dtype" in kw else None
    x, w, _, _, _ = make_inputs(
        B, S, H, D, DTYPES[dt], ctx.seed(seed), ctx.device,
        scale=kw.get("scale", 1.0), w_dtype=w_dtype,
    )  # fmt: skip
    shape = f"{B}×{S}×{H}×{D}"
    label = kw.get("label", "")
    return Case(
        name=f"{shape} {dt}" + (f" {label}" if label else ""),
        args=(x, w),
        dtype=x.dtype,
        shape=shape,
        kwargs={"eps": kw["eps"]} if "eps" in kw else {},
        sizes={"B": B, "S": S, "H": H, "D": D},
    )


def grade(ctx: GradeContext) -> None:
    def cases() -> list[Case]:
        skip = capability.skip_for_device(ctx)
        specs = CASES + ([] if ctx.interpreter else CASES_GPU)
        return [make_case(ctx, *s) for s in specs if s[4] not in skip]

    grade_kernel(ctx, SPEC, "rmsnorm", cases, None, check=guarded)


# --- `gpulab dev compile` (the manifest's tools: "compile") ---------------------
# The reference's kernels as it launches them, and the starter's with the same
# signature (gpulab.measure.compile_specs).
COMPILE_SPECS = tuple(
    cs.Spec(
        "rmsnorm_kernel",
        f"{dt} D=256 BLOCK_R=16",
        cs.simple(dt, {"D": 256, "BLOCK_R": 16}, 4, floats=("eps",)),
        starter="rmsnorm_kernel",
    )
    for dt in ("bf16", "fp32")
)
