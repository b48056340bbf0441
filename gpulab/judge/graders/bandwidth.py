"""Grader for lesson 01: the STREAM triad, `triad(x, y, alpha) = alpha * x + y`.

Contract: x and y are 1-D contiguous tensors of one dtype (fp32, fp16 or
bf16) and any length >= 1, possibly views that start inside a larger buffer;
alpha is a Python float. Return a NEW tensor of the same length and dtype,
computed by a Triton kernel with fp32 arithmetic. The wrapper may allocate
(torch.empty*) and nothing else: torch's elementwise arithmetic, in any
spelling, is off the graded path.

On a GPU the kernel is timed against eager `torch.add(y, x, alpha=alpha)` and
placed on the roofline: 3 * N * elt bytes (read x, read y, write out) over
the measured HBM bandwidth.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

import torch

from gpulab.judge.kernel_spec import Case, Expect, KernelSpec
from gpulab.judge.standard import grade_kernel
from gpulab.measure import compile_specs as cs

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}

# fp32: an un-fused alpha*x then +y rounds twice (the interpreter does that);
# with |alpha*x| up to ~20 the first rounding is up to ~1e-6, so atol 1e-5.
# fp16/bf16: one rounding of an fp32 result (half an ulp). Arithmetic done in
# fp16 itself rounds alpha*x first and fails where alpha*x and y nearly cancel.
TOLERANCE = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (1e-5, 2e-3),
    torch.bfloat16: (1e-4, 1.6e-2),
}

# Every way of doing the arithmetic in torch instead of Triton, by callable
# and by aten name (the second catches spellings the first misses, like
# Tensor.__rmul__ or torch.Tensor.add_).
_T = torch.Tensor
BANNED = (
    torch.add,
    torch.mul,
    torch.sub,
    torch.addcmul,
    torch.addcdiv,
    torch.lerp,
    torch.multiply,
    torch.subtract,
    torch.rsub,
    torch.true_divide,
    torch.div,
    torch.mm,
    torch.matmul,
    torch.mv,
    torch.addmv,
    torch.einsum,
    torch.baddbmm,
    _T.add,
    _T.add_,
    _T.mul,
    _T.mul_,
    _T.sub,
    _T.sub_,
    _T.addcmul,
    _T.addcmul_,
    _T.lerp,
    _T.lerp_,
    _T.__add__,
    _T.__radd__,
    _T.__iadd__,
    _T.__mul__,
    _T.__rmul__,
    _T.__imul__,
    _T.__sub__,
    _T.__rsub__,
    _T.__isub__,
    _T.__matmul__,
)
BANNED_ATEN = (
    "add",
    "add_",
    "mul",
    "mul_",
    "sub",
    "sub_",
    "rsub",
    "div",
    "div_",
    "addcmul",
    "addcmul_",
    "addcdiv",
    "addcdiv_",
    "lerp",
    "lerp_",
    "mm",
    "addmm",
    "mv",
    "addmv",
    "bmm",
    "baddbmm",
    "dot",
    "vdot",
    "matmul",
    "_foreach_add",
    "_foreach_mul",
    "_foreach_lerp",
    "_foreach_addcmul",
)
# On a GPU a result computed elsewhere (the CPU, numpy) has to be copied in.
# The interpreter itself copies every argument back after a launch, so this
# guard only applies to native runs.
GPU_ONLY_ATEN = ("copy_", "_copy_from", "_to_copy")


# The letter, from the fraction of the datasheet's bandwidth (one fixed roof:
# gpulab.gpu.ceilings). The plain masked kernel the lesson teaches measured
# 87-88% of the H200's 4.8 TB/s and 89% of the H100's 3.35 (BENCHMARKS.md,
# 2026-12-05: the copy itself reaches 88.5% and about 89%), its worst shape
# 83% (50,000,017 fp32 elements, whose odd length costs the vector loads): an
# A from 80%. A triad in two kernels (alpha * x stored, then read back and
# added to y) moves 5 elements for 3, so about 3/5 of that: a C.
GRADES = ((0.80, "A"), (0.65, "B"), (0.45, "C"), (0.0, "D"))


def make_pair(
    n: int, dtype: torch.dtype, seed: int, device: str, *, offset: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """x and y of length n; with `offset`, views starting inside a buffer."""
    g = torch.Generator(device=device).manual_seed(seed)  # drawn where it runs
    base = torch.randn(2, n + offset, generator=g, dtype=torch.float32, device=device).to(dtype)
    return base[0, offset:], base[1, offset:]


def _case(
    ctx: CaseContext, n: int, dt: str, alpha: float, seed: int, label: str = "", offset: int = 0
) -> Case:
    x, y = make_pair(n, DTYPES[dt], ctx.seed(seed), ctx.device, offset=offset)
    shape = f"N={n}" + (f" (views at offset {offset})" if offset else "")
    name = f"{shape} {dt} alpha={alpha:g}" + (f" {label}" if label else "")
    return Case(name=name, args=(x, y, alpha), dtype=x.dtype, sizes={"N": n}, shape=shape)


class Extras(TypedDict, total=False):
    label: str  # added to the case's name
    offset: int  # x and y views starting this many elements into their buffer


def correctness_cases(ctx: CaseContext) -> list[Case]:
    specs: list[tuple[int, str, float, int, Extras]] = [
        # (N, dtype, alpha, public seed, extras)
        (1, "fp32", 2.5, 1, {}),
        (2, "fp16", -1.0, 2, {}),
        (3, "bf16", 0.5, 3, {}),
        (1000, "fp32", 0.0, 4, {"label": "(alpha = 0: out is y)"}),
        (1023, "fp16", -3.75, 5, {}),
        (1025, "bf16", 1.0, 6, {}),
        (4099, "fp32", -0.5, 7, {"offset": 3}),
        (70001, "fp32", 3.0, 8, {"label": "large"}),
        (65537, "fp16", 0.25, 9, {"label": "large"}),
        (40000, "bf16", -2.0, 10, {"label": "large"}),
        # The same shape again with fresh data: a memorised answer fails here.
        (1023, "fp16", -3.75, 11, {"label": "second draw"}),
    ]
    if ctx.device == "cuda":
        specs += [
            (2**24 + 3, "fp32", 1.5, 20, {}),
            (10_000_019, "fp16", -0.75, 21, {}),
            (2**25, "bf16", 2.0, 22, {"offset": 1}),
        ]
    return [_case(ctx, n, dt, a, s, **kw) for n, dt, a, s, kw in specs]


def timing_cases(ctx: CaseContext) -> list[Case]:
    # 600-800 MB of traffic each: about 10x an H200's L2 and hundreds of
    # microseconds, far past the launch overhead, so the time is HBM time.
    specs = [(2**26, "fp32"), (50_000_017, "fp32"), (2**27, "fp16"), (2**27, "bf16")]
    return [_case(ctx, n, dt, 1.7, 100 + i) for i, (n, dt) in enumerate(specs)]


def reference(case: Case) -> torch.Tensor:
    x, y, alpha = case.args
    out: torch.Tensor = alpha * x.double() + y.double()
    return out


def expect(case: Case) -> Expect:
    x = case.args[0]
    return Expect(x.shape, x, "the inputs", contiguous=True)


def baseline(case: Case) -> Callable[[], torch.Tensor]:
    x, y, alpha = case.args
    return lambda: torch.add(y, x, alpha=alpha)


def spec(native: bool) -> KernelSpec:
    return KernelSpec(
        reference=reference,
        banned=BANNED,
        banned_aten=BANNED_ATEN + (GPU_ONLY_ATEN if native else ()),
        banned_label="torch's arithmetic (torch.add/mul/sub/addcmul/lerp, +, *, @, ...)",
        tolerance=lambda dt: TOLERANCE[dt],
        expect=expect,
        baseline=baseline,
        baseline_name="torch.add(y, x, alpha=alpha)",
        grades=GRADES,
    )


def kernel_spec(ctx: CaseContext) -> KernelSpec:
    """The spec where `ctx` runs: a GPU bans the GPU-only aten ops too."""
    return spec(native=not ctx.interpreter)


def grade(ctx: GradeContext) -> None:
    grade_kernel(
        ctx,
        kernel_spec(ctx),
        "triad",
        lambda: correctness_cases(ctx),
        lambda: timing_cases(ctx),
    )


# --- `gpulab dev compile` (the manifest's tools: "compile") ---------------------
# The reference's kernels as it launches them, and the starter's with the same
# signature (gpulab.measure.compile_specs).
COMPILE_SPECS = (
    cs.Spec(
        "triad_kernel",
        "fp32 BLOCK=1024 w4",
        cs.simple("fp32", {"BLOCK": 1024}, 4, floats=("alpha",)),
        starter="triad_kernel",
    ),
    cs.Spec(
        "triad_kernel",
        "bf16 BLOCK=1024 w4",
        cs.simple("bf16", {"BLOCK": 1024}, 4, floats=("alpha",)),
    ),
)
