"""Grader for lesson 05, step 1: RoPE alone.

Contract: `rope(x, cos, sin)` for x of shape (B, S, H, D), fp16/bf16/fp32, D
a power of two from 16 to 256, unit stride along D and any strides on B, S
and H; cos and sin (S, D//2) fp32. Returns a new tensor of x's shape and
dtype, the rotate-half (NeoX) rotation of each head by its position's row
of the tables, computed by a Triton kernel. Correctness only (a step is not
timed); the inputs, tolerances and the eager-op guard are the lesson's
exercise's (gpulab.judge.graders.rope_rmsnorm).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from gpulab.judge import capability
from gpulab.judge.graders.rope_rmsnorm import DTYPES, TOLERANCE, make_inputs
from gpulab.judge.kernel import check_cases
from gpulab.judge.kernel_guards import guards_for
from gpulab.judge.kernel_spec import Case, Expect, KernelSpec
from gpulab.judge.standard import grade_kernel
from gpulab.measure import compile_specs as cs

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE in x's dtype: (x1, x2) -> (x1 c - x2 s, x2 c + x1 s)."""
    x1, x2 = x.chunk(2, dim=-1)
    c, s = cos.to(x.dtype)[:, None, :], sin.to(x.dtype)[:, None, :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


def reference(case: Case) -> torch.Tensor:
    x, cos, sin = case.args
    return rotate(x.double(), cos, sin)


SPEC = KernelSpec(
    reference=reference,
    tolerance=lambda dt: TOLERANCE[dt],
    expect=lambda case: Expect(case.args[0].shape, case.args[0], "x"),
)

# (B, S, H, D, dtype, public seed, layout, label)
CASES: list[tuple[int, int, int, int, str, int, str, str]] = [
    (1, 1, 1, 16, "fp32", 1, "", "S=1"),
    (2, 3, 5, 32, "fp32", 2, "", ""),  # B > 1: row s of the tables, not b·S + s
    (1, 4, 3, 64, "fp16", 3, "", ""),
    (1, 3, 2, 128, "bf16", 4, "", ""),
    (1, 2, 3, 256, "fp32", 5, "", ""),
    (2, 2, 7, 16, "bf16", 6, "", ""),  # 7 heads: a partial block of heads
    (1, 3, 4, 64, "fp16", 7, "qkv", ""),
    (2, 3, 3, 32, "fp32", 8, "bhsd", ""),
    (2, 3, 5, 32, "fp32", 9, "", "second draw"),  # fresh data, same shape
]
CASES_GPU: list[tuple[int, int, int, int, str, int, str, str]] = [
    (2, 1000, 7, 128, "bf16", 20, "", ""),
    (1, 777, 32, 64, "fp16", 21, "qkv", ""),
    (4, 333, 9, 16, "bf16", 22, "bhsd", ""),
]


def make_case(
    ctx: CaseContext,
    B: int,
    S: int,
    H: int,
    D: int,
    dt: str,
    seed: int,
    layout: str = "",
    label: str = "",
) -> Case:
    x, _, cos, sin, _ = make_inputs(
        B, S, H, D, DTYPES[dt], ctx.seed(seed), ctx.device, layout=layout or "contiguous"
    )
    shape = f"{B}×{S}×{H}×{D}" + (f" ({layout} view)" if layout else "")
    return Case(
        name=f"{shape} {dt}" + (f" {label}" if label else ""),
        args=(x, cos, sin),
        dtype=x.dtype,
        shape=shape,
        sizes={"B": B, "S": S, "H": H, "D": D},
    )


def guarded(ctx: GradeContext, spec: KernelSpec, fn: Any, cases: list[Case]) -> None:
    """check_cases under the lesson's eager-op guard: torch arithmetic on the
    graded path is refused (the maths belongs in the kernel)."""
    check_cases(
        ctx, spec, fn, cases, guards=lambda c: guards_for(spec, eager_width=c.args[0].shape[-1])
    )


def grade(ctx: GradeContext) -> None:
    def cases() -> list[Case]:
        skip = capability.skip_for_device(ctx)
        specs = CASES + ([] if ctx.interpreter else CASES_GPU)
        return [make_case(ctx, *s) for s in specs if s[4] not in skip]

    grade_kernel(ctx, SPEC, "rope", cases, None, check=guarded)


# --- `gpulab dev compile` (the manifest's tools: "compile") ---------------------
# The reference's kernels as it launches them, and the starter's with the same
# signature (gpulab.measure.compile_specs).
COMPILE_SPECS = tuple(
    cs.Spec(
        "rope_kernel",
        f"{dt} D=128 BLOCK_H=16",
        cs.simple(dt, {"HALF": 64, "BLOCK_H": 16}, 4, fp32_ptrs=("cos_ptr", "sin_ptr")),
        starter="rope_kernel",
    )
    for dt in ("bf16", "fp32")
)
