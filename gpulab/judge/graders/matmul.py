"""Grader for lesson 03: the tiled matmul in Triton.

Contract: `matmul(a, b)` with a (M, K) and b (K, N), both fp16, bf16 or fp32
of one dtype, any strides (transposed views, padded rows, stepped columns);
M, N and K need not be multiples of any block size. The product is
accumulated in fp32 and returned as an (M, N) tensor in a's dtype, computed
by a Triton kernel. torch.matmul, `@`, mm, bmm, addmm, einsum and F.linear
(and the aten ops under them) are off the graded path.

On a GPU the grade is the fraction of cuBLAS (torch.matmul, timed in the same
run) reached on large LLM-sized shapes; the book's pass line is 70%.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from gpulab.judge import capability
from gpulab.judge.compare import dtype_name
from gpulab.judge.kernel import check_cases
from gpulab.judge.kernel_spec import Case, Expect, KernelSpec
from gpulab.judge.standard import grade_kernel
from gpulab.measure import compile_specs as cs
from gpulab.sandbox.learner import LearnerError

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}

# Layouts of an operand: how its (rows, cols) view sits in memory.
LAYOUTS = {
    "": "",
    "T": "a transposed view",  # made (cols, rows) contiguous, then .t()
    "pad": "padded rows",  # a slice big[:, :cols] of a wider tensor
    "step": "every other column",  # big[:, ::2]: column stride 2
}


def _present(*pairs: tuple[object, str]) -> tuple[Callable[..., Any], ...]:
    # Looked up by name so a torch without one of them (chain_matmul is
    # deprecated) still loads this grader.
    return tuple(getattr(ns, name) for ns, name in pairs if hasattr(ns, name))


_T = torch.Tensor
BANNED = _present(
    (torch, "matmul"),
    (_T, "matmul"),
    (_T, "__matmul__"),
    (_T, "__rmatmul__"),
    (torch, "mm"),
    (_T, "mm"),
    (torch, "bmm"),
    (_T, "bmm"),
    (torch, "addmm"),
    (_T, "addmm"),
    (torch, "baddbmm"),
    (_T, "baddbmm"),
    (torch, "addbmm"),
    (torch, "einsum"),
    (torch, "tensordot"),
    (torch, "mv"),
    (_T, "mv"),
    (torch, "inner"),
    (torch, "chain_matmul"),
    (torch.linalg, "multi_dot"),
    (torch.linalg, "matmul"),
    (F, "linear"),
    (F, "bilinear"),
)
BANNED_ATEN = (
    "mm",
    "bmm",
    "addmm",
    "addbmm",
    "baddbmm",
    "matmul",
    "_scaled_mm",
    "linear",
    "mv",
    "addmv",
    "dot",
    "vdot",
    "einsum",
    "tensordot",
    "_int_mm",
)
# Rebuilding the product from broadcast multiplies and a sum is matmul by
# torch too: banned on operands of 4096+ elements (a wrapper needs neither).
BANNED_LARGE = ("mul", "sum", "mean", "prod", "cumsum")
BANNED_LABEL = "torch's matmul (torch.matmul, @, mm, bmm, addmm, einsum, F.linear)"

# (atol, rtol). Inputs are scaled so every output has a standard deviation
# of about 1 whatever K is, so absolute tolerances mean the same at every
# size. fp16/bf16: fp32 accumulation, then one rounding to the output dtype
# (half an ulp: 4.9e-4 relative in fp16, 3.9e-3 in bf16). fp32: exact in the
# interpreter; on a GPU tl.dot rounds fp32 inputs to tf32 (10-bit mantissa)
# by default, as cuBLAS does when TF32 is allowed, so a GPU gets tf32 slack.
TOL_CPU = {torch.float32: (2e-5, 1e-4), torch.float16: (1e-3, 2e-3), torch.bfloat16: (8e-3, 1.6e-2)}
TOL_GPU = {**TOL_CPU, torch.float32: (1e-2, 1e-2)}


def interpreter_dot_ok(dtype: torch.dtype) -> bool:
    """Does the Triton interpreter compute a `dtype` tl.dot faithfully here?

    Asked of the interpreter as the sandboxes run it: with gpulab's fixes
    (gpulab.sandbox.interpreter_fixes; Triton 3.6-3.9's interpreter
    multiplied bf16's bits as integers, garbage of 1e10). The judge runs the
    probe kernel itself, so the answer is never the sandbox's word; asking
    instead of hard-coding keeps a Triton the fixes do not reach honest."""
    import triton
    import triton.language as tl

    from gpulab.sandbox import interpreter_fixes

    interpreter_fixes.apply()

    # A Triton kernel: its arguments are Triton's, its decorator untyped.
    @triton.jit  # type: ignore[untyped-decorator]
    def _dot(a_ptr, b_ptr, c_ptr, B: tl.constexpr):  # type: ignore[no-untyped-def]
        i = tl.arange(0, B)
        a = tl.load(a_ptr + i[:, None] * B + i[None, :])
        b = tl.load(b_ptr + i[:, None] * B + i[None, :])
        tl.store(c_ptr + i[:, None] * B + i[None, :], tl.dot(a, b))

    g = torch.Generator().manual_seed(0)
    a = torch.randn(16, 16, generator=g).to(dtype)
    b = torch.randn(16, 16, generator=g).to(dtype)
    c = torch.empty(16, 16, dtype=torch.float32)
    try:
        _dot[(1,)](a, b, c, B=16)
    except Exception:  # noqa: BLE001 - an unsupported dtype counts as unfaithful
        return False
    return torch.allclose(c.double(), a.double() @ b.double(), atol=1e-2, rtol=1e-2)


def interpreter_skips(ctx: GradeContext, dtypes: tuple[str, ...] = ("fp16", "bf16")) -> set[str]:
    """Dtypes whose tl.dot the interpreter gets wrong; recorded in ctx.skipped."""
    bad = {dt for dt in dtypes if not interpreter_dot_ok(DTYPES[dt])}
    ctx.skipped.extend(
        f"{dt} cases: the Triton interpreter on this machine computes {dt} "
        "tl.dot incorrectly (a gap of the interpreter, not of your kernel), so they "
        "are checked only on a GPU"
        for dt in sorted(bad)
    )
    return bad


# The loose bound a dtype's cases are held to where the interpreter's
# tl.dot for it is wrong even with gpulab's fixes (a Triton they do not
# reach): outputs have a standard deviation of about 1 (make_case), so
# zeros, a wrong sign or garbage fail it, and the values are not graded.
LOOSE = (0.5, 0.5)


def loose_dtypes(ctx: GradeContext, dtypes: tuple[str, ...] = ("bf16",)) -> set[str]:
    """Dtypes whose cases are checked loosely, not skipped, on this
    interpreter: what can still be checked (shape, dtype, every element
    written, values within LOOSE of the reference), each said in ctx.skipped."""
    bad = {dt for dt in dtypes if not interpreter_dot_ok(DTYPES[dt])}
    ctx.skipped.extend(
        f"{dt} not graded here: the Triton interpreter on this machine computes {dt} "
        "tl.dot incorrectly (a gap of the interpreter, not of your kernel), so your "
        f"{dt} results were checked only for shape, dtype, every element written and "
        f"a loose bound (within {LOOSE[0]} of the answer); a GPU grades them"
        for dt in sorted(bad)
    )
    return bad


AUTOTUNE_HINT = (
    "Your kernel is autotuned over several configs, and the Triton interpreter (no GPU "
    "here) cannot benchmark them. Give @triton.autotune a single config when "
    "os.environ.get('TRITON_INTERPRET') == '1' (the lesson shows how)."
)


def checked(ctx: GradeContext, spec: KernelSpec, fn: Any, cases: list[Case]) -> None:
    """check_cases, with a hint for the one interpreter error a learner can't decode."""
    try:
        check_cases(ctx, spec, fn, cases)
    except LearnerError as exc:
        if ctx.interpreter and "active drivers" in f"{exc.summary} {exc.message}":
            raise LearnerError(
                "autotuning needs a GPU: " + exc.summary, f"{AUTOTUNE_HINT}\n\n{exc.message}"
            ) from None
        raise


def operand(
    rows: int,
    cols: int,
    dtype: torch.dtype,
    g: torch.Generator,
    device: str,
    layout: str,
    scale: float,
) -> torch.Tensor:
    """A random (rows, cols) operand with the given memory layout."""

    def randn(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, device=device) * scale).to(dtype)

    if layout == "T":
        return randn(cols, rows).t()
    if layout == "pad":
        return randn(rows, cols + 8)[:, :cols]
    if layout == "step":
        return randn(rows, 2 * cols)[:, ::2]
    return randn(rows, cols)


def make_case(
    ctx: CaseContext,
    M: int,
    N: int,
    K: int,
    dt: str,
    seed: int,
    a_layout: str = "",
    b_layout: str = "",
    label: str = "",
) -> Case:
    device = ctx.device
    g = torch.Generator(device=device).manual_seed(ctx.seed(seed))
    scale = K**-0.25  # each output sums K products of two such numbers: std ≈ 1
    a = operand(M, K, DTYPES[dt], g, device, a_layout, scale)
    b = operand(K, N, DTYPES[dt], g, device, b_layout, scale)
    views = [f"{x} is {LAYOUTS[lay]}" for x, lay in (("a", a_layout), ("b", b_layout)) if lay]
    shape = f"{M}×{K} @ {K}×{N}"
    name = (
        f"{shape} {dt}"
        + (f" ({', '.join(views)})" if views else "")
        + (f" {label}" if label else "")
    )
    return Case(name=name, args=(a, b), dtype=a.dtype, sizes={"M": M, "N": N, "K": K}, shape=shape)


def correctness_cases(ctx: CaseContext, skip: set[str]) -> list[Case]:
    specs = [
        # (M, N, K, dtype, public seed, a layout, b layout, label)
        (1, 1, 1, "fp32", 1, "", "", ""),
        (2, 3, 5, "fp16", 2, "", "", ""),
        (16, 16, 16, "fp32", 3, "", "", ""),
        (64, 64, 64, "fp16", 4, "", "", ""),
        (33, 47, 65, "fp16", 5, "", "", ""),  # nothing divides a block size
        (100, 37, 129, "fp32", 6, "", "", ""),
        (130, 70, 200, "fp16", 7, "", "", ""),  # several K steps and a tail
        (1, 150, 70, "fp32", 8, "", "", ""),  # a single row
        (90, 1, 48, "fp16", 9, "", "", ""),  # a single column
        (70, 90, 50, "fp32", 10, "T", "", ""),
        (77, 96, 50, "fp16", 11, "", "T", ""),
        (60, 50, 40, "fp32", 12, "T", "T", ""),
        (45, 66, 77, "fp16", 13, "pad", "step", ""),
        (48, 40, 72, "bf16", 14, "", "", ""),
        (37, 53, 61, "bf16", 15, "", "T", ""),
        # The same shape again with fresh data: a cached answer fails here.
        (33, 47, 65, "fp16", 16, "", "", "second draw"),
    ]
    if ctx.device == "cuda":
        # Odd shapes stay under the reference's tuning threshold (512³) and
        # the big ones match the timing shapes' dtypes and alignment, so a
        # check compiles few kernel variants.
        specs += [
            (513, 1025, 255, "bf16", 20, "", "", ""),
            (1000, 300, 400, "fp16", 21, "T", "", ""),
            (257, 700, 700, "bf16", 22, "", "T", ""),
            (128, 128, 8000, "bf16", 23, "", "", "(long K)"),
            (4, 5000, 4096, "fp16", 24, "", "", "(decode-like: 4 rows)"),
            (500, 600, 400, "fp32", 25, "", "", ""),
            (2048, 2048, 2048, "bf16", 26, "", "", ""),
            (1024, 3072, 2048, "fp16", 27, "", "", ""),
        ]
    return [
        make_case(ctx, M, N, K, dt, seed, la, lb, label)
        for M, N, K, dt, seed, la, lb, label in specs
        if dt not in skip
    ]


def timing_cases(ctx: CaseContext) -> list[Case]:
    # (M, N, K): square, and the up- and down-projections of an 8B-class MLP
    # (hidden 4096, intermediate 14336) on 8192 tokens.
    shapes = [
        ("bf16", 4096, 4096, 4096),
        ("bf16", 8192, 8192, 8192),
        ("bf16", 8192, 14336, 4096),
        ("bf16", 8192, 4096, 14336),
        ("fp16", 4096, 4096, 4096),
        ("fp16", 8192, 8192, 8192),
        ("fp16", 8192, 14336, 4096),
        ("fp16", 8192, 4096, 14336),
    ]
    if capability.lacks_bf16(ctx):  # the fp16 sets already time these shapes
        capability.timed_dtype(ctx, "bf16")
        shapes = [s for s in shapes if s[0] != "bf16"]
    return [make_case(ctx, M, N, K, dt, 100 + i) for i, (dt, M, N, K) in enumerate(shapes)]


def reference(case: Case) -> torch.Tensor:
    a, b = case.args
    return torch.matmul(a.double(), b.double())


def reference_rows(case: Case, rows: torch.Tensor) -> torch.Tensor:
    """The reference at some rows of the result only: how the judge checks a
    timed output (gpulab.judge.batches)."""
    a, b = case.args
    return torch.matmul(a.index_select(0, rows).double(), b.double())


def expect(case: Case) -> Expect:
    a, b = case.args
    return Expect((a.shape[0], b.shape[1]), a, "a")


def make_spec(interpreter: bool, loose: frozenset[str] = frozenset()) -> KernelSpec:
    tol = TOL_CPU if interpreter else TOL_GPU
    tol = {dt: LOOSE if dtype_name(dt) in loose else t for dt, t in tol.items()}
    return KernelSpec(
        banned_large=BANNED_LARGE,
        reference=reference,
        reference_rows=reference_rows,
        banned=BANNED,
        banned_aten=BANNED_ATEN,
        banned_label=BANNED_LABEL,
        tolerance=lambda dt: tol[dt],
        expect=expect,
        baseline=lambda case: partial(torch.matmul, case.args[0], case.args[1]),
        baseline_name="cuBLAS (torch.matmul)",
        # The fraction of cuBLAS: the book's pass line is 70%.
        grade_on="speedup",
        grades=((0.95, "A"), (0.85, "B"), (0.70, "C"), (0.0, "D")),
    )


def kernel_spec(ctx: CaseContext, loose: frozenset[str] = frozenset()) -> KernelSpec:
    """The spec where `ctx` runs (the interpreter's tolerances on the CPU;
    LOOSE for the dtypes in `loose`)."""
    return make_spec(ctx.interpreter, loose)


def grade(ctx: GradeContext) -> None:
    # bf16 is graded on the CPU where the interpreter's bf16 tl.dot is right
    # (with gpulab's fixes, Triton 3.6-3.9); where it is not, its cases are
    # checked loosely and said not graded, never skipped: a bf16 matmul that
    # returned zeros passed on the CPU while they were.
    loose = frozenset(loose_dtypes(ctx)) if ctx.interpreter else frozenset()

    def cases() -> list[Case]:
        skip = interpreter_skips(ctx, ("fp16",)) if ctx.interpreter else set()
        return correctness_cases(ctx, skip | capability.skip_for_device(ctx))

    grade_kernel(
        ctx,
        kernel_spec(ctx, loose),
        "matmul",
        cases,
        lambda: timing_cases(ctx),
        check=checked,
        timing_note="Graded by the fraction of cuBLAS (torch.matmul) "
        "reached, timed in the same run: A ≥ 95%, B ≥ 85%, C ≥ 70% (the book's "
        "pass line).",
    )


# --- `gpulab dev compile` (the manifest's tools: "compile") ---------------------
# The reference's kernels as it launches them, and the starter's with the same
# signature (gpulab.measure.compile_specs).
def _matmul_tma(persistent: bool) -> cs.Build:
    def build(m: Any, fn: Any) -> cs.Built:
        bm, bn, bk = m.TMA_BLOCK
        import triton.language as tl

        ce = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "OUT_DTYPE": tl.float16}
        if persistent:
            ce["NUM_SMS"] = 132
        descs = {
            "a_desc": cs.tma_desc("fp16", (bm, bk)),
            "b_desc": cs.tma_desc("fp16", (bk, bn)),
            "c_desc": cs.tma_desc("fp16", (bm, bn)),
        }
        return (
            cs.signature(fn, "fp16", ce, descs=descs),
            ce,
            {"num_warps": 8, "num_stages": 3 if persistent else 4},
        )

    return build


def _small_config(m: Any, fn: Any) -> cs.Built:
    """The reference's config for small problems, in bf16."""
    c = m.SMALL_CONFIG
    ce = dict(c.kwargs)
    return cs.signature(fn, "bf16", ce), ce, {"num_warps": c.num_warps, "num_stages": c.num_stages}


_AUTOTUNED = cs.autotuned("GPU_CONFIGS", "fp16", {})

COMPILE_SPECS = (
    *(
        cs.Spec(
            "matmul_kernel",
            f"config {i} fp16",
            _AUTOTUNED(i),
            starter="matmul_kernel" if i == 5 else "",
        )
        for i in range(6)
    ),
    cs.Spec("matmul_kernel", "small config bf16", _small_config),
    cs.Spec("matmul_kernel_tma", "TMA 128x256x64 fp16", _matmul_tma(False), archs=cs.TMA),
    cs.Spec(
        "matmul_kernel_tma_persistent",
        "TMA persistent fp16",
        _matmul_tma(True),
        archs=cs.TMA,
    ),
)


# --- `gpulab counters --ncu` (the manifest's tools: "counters") ------------------
# The recordings of gpulab.gpu.counters taken of this exercise's reference,
# each built on the inputs it was recorded on (gpulab.targets.counter_cases
# hands in the reference module and counts one call of what comes back).


def _matmul_8k(reference: Any) -> Callable[[], object]:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    mm = reference.matmul
    return lambda: mm(a, b)


COUNTER_CASES = {"matmul_8k": _matmul_8k}
