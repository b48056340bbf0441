"""Grader for lesson 04: the FlashAttention-2 forward pass in Triton.

Contract: `attention(q, k, v, causal=False, sm_scale=None)` with q (B, H, Sq, D)
and k, v (B, H, Sk, D), D in {16, 32, 64, 128}, fp16 or bf16 (fp32 for the
checks on the CPU), any strides. `sm_scale` defaults to 1/sqrt(D); `causal`
needs Sq == Sk and lets query i see keys j <= i. Returns (B, H, Sq, D) in q's
dtype, computed by a Triton kernel. Checked against a float64 reference.

Off the graded path: F.scaled_dot_product_attention, torch's softmax in every
spelling, and torch's matmuls (an attention assembled from torch matmuls is
not a Triton kernel). On a GPU: TFLOP/s (4·B·H·Sq·Sk·D, halved when causal)
and the speedup over torch's SDPA, timed in the same run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import torch
import torch.nn.functional as F

from gpulab.judge import capability
from gpulab.judge.graders.matmul import BANNED as MATMUL_BANNED
from gpulab.judge.graders.matmul import BANNED_ATEN as MATMUL_BANNED_ATEN
from gpulab.judge.graders.matmul import DTYPES, checked, interpreter_skips
from gpulab.judge.kernel_spec import Case, Expect, KernelSpec
from gpulab.judge.standard import grade_kernel
from gpulab.measure import compile_specs as cs
from gpulab.wire.protocol import Kwargs

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext

BANNED = (
    F.scaled_dot_product_attention,
    torch.softmax,
    torch.Tensor.softmax,
    F.softmax,
    torch.log_softmax,
    torch.Tensor.log_softmax,
    F.log_softmax,
    torch.special.softmax,
    torch.special.log_softmax,
    torch.nn.Softmax.forward,
    torch.nn.LogSoftmax.forward,
    torch.nn.MultiheadAttention.forward,
    F.multi_head_attention_forward,
    *MATMUL_BANNED,
)
BANNED_ATEN = (
    "scaled_dot_product_attention",
    "_scaled_dot_product_attention_math",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_flash_attention_forward",
    "_efficient_attention_forward",
    "_softmax",
    "softmax",
    "_safe_softmax",
    "_log_softmax",
    "log_softmax",
    *MATMUL_BANNED_ATEN,
)
BANNED_LABEL = (
    "F.scaled_dot_product_attention, torch's softmax and torch's matmuls "
    "(torch.matmul, @, bmm, einsum, ...)"
)

# (atol, rtol) against float64. Values are unit normals, so outputs (weighted
# averages of rows of v) are O(1). fp32: the interpreter's tl.dot is fp32.
# fp16/bf16: P is rounded to the input dtype for the second tensor-core
# matmul (as every FlashAttention does), then the output is rounded: a few
# half-ulps (4.9e-4 in fp16, 3.9e-3 in bf16) of the largest terms.
TOLERANCE = {
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-3, 3e-3),
    torch.bfloat16: (8e-3, 2.4e-2),
}
# On a GPU, tl.dot rounds fp32 inputs to tf32 (10-bit mantissa) by default,
# as cuBLAS does when TF32 is allowed: both matmuls get tf32 slack there
# (seen on an H200: 3e-4 relative on a 1x1x16 head).
TOLERANCE_GPU = {**TOLERANCE, torch.float32: (1e-2, 1e-2)}


def make_qkv(
    ctx: CaseContext,
    B: int,
    H: int,
    Sq: int,
    Sk: int,
    D: int,
    dtype: torch.dtype,
    seed: int,
    layout: str = "",
    scale: float = 1.0,
) -> tuple[torch.Tensor, ...]:
    """q, k, v as unit normals (q and k times `scale`) in the given memory layout."""
    device = ctx.device
    g = torch.Generator(device=device).manual_seed(ctx.seed(seed))

    def make(S: int, s: float) -> torch.Tensor:
        if layout == "bshd":  # (B, S, H, D) as a projection writes it, viewed as (B, H, S, D)
            return (
                (torch.randn(B, S, H, D, generator=g, device=device) * s).to(dtype).transpose(1, 2)
            )
        if layout == "dlast":  # the head dim is the strided one
            return (
                (torch.randn(B, H, D, S, generator=g, device=device) * s).to(dtype).transpose(2, 3)
            )
        if layout == "pad":  # a slice of a wider buffer: every stride is padded
            return (torch.randn(B, H + 1, S + 3, 2 * D, generator=g, device=device) * s).to(dtype)[
                :, 1:, 3:, :D
            ]
        return (torch.randn(B, H, S, D, generator=g, device=device) * s).to(dtype)

    return make(Sq, scale), make(Sk, scale), make(Sk, 1.0)


LAYOUT_NAMES = {"bshd": "(B, S, H, D) memory", "dlast": "strided head dim", "pad": "padded strides"}


class Extras(TypedDict, total=False):
    """A case's settings beyond its sizes, dtype and seed (make_case's keywords)."""

    layout: str  # q, k and v views (LAYOUT_NAMES)
    scale: float  # of q and k: large scores
    sm_scale: float
    label: str  # added to the case's name


def make_case(
    ctx: CaseContext,
    B: int,
    H: int,
    Sq: int,
    Sk: int,
    D: int,
    causal: bool,
    dt: str,
    seed: int,
    **extras: Unpack[Extras],
) -> Case:
    layout, scale = extras.get("layout", ""), extras.get("scale", 1.0)
    sm_scale, label = extras.get("sm_scale"), extras.get("label", "")
    q, k, v = make_qkv(ctx, B, H, Sq, Sk, D, DTYPES[dt], seed, layout, scale)
    kwargs: Kwargs = {}
    if causal:
        kwargs["causal"] = True
    if sm_scale is not None:
        kwargs["sm_scale"] = sm_scale
    # "causal" is part of the shape: tables that show only the shape (the
    # bench, the roofline) must still tell the two passes apart.
    shape = f"B{B} H{H} Sq{Sq} Sk{Sk} D{D}" + (" causal" if causal else "")
    notes = [
        x
        for x in (
            LAYOUT_NAMES.get(layout, ""),
            f"sm_scale={sm_scale:g}" if sm_scale is not None else "",
            label,
        )
        if x
    ]
    name = f"{shape} {dt}" + (f" ({', '.join(notes)})" if notes else "")
    return Case(
        name=name,
        args=(q, k, v),
        kwargs=kwargs,
        dtype=q.dtype,
        shape=shape,
        sizes={"B": B, "H": H, "Sq": Sq, "Sk": Sk, "D": D, "causal": int(causal)},
    )


def correctness_cases(ctx: CaseContext, skip: set[str]) -> list[Case]:
    specs: list[tuple[int, int, int, int, int, bool, str, int, Extras]] = [
        # (B, H, Sq, Sk, D, causal, dtype, seed, extras)
        (1, 1, 1, 1, 16, False, "fp32", 1, {}),
        (1, 1, 1, 1, 16, True, "fp16", 2, {}),
        (1, 2, 17, 17, 16, True, "fp16", 3, {}),
        (2, 3, 100, 77, 32, False, "fp32", 4, {}),  # Sq != Sk, partial tiles
        (1, 2, 130, 130, 64, True, "fp16", 5, {}),
        (1, 1, 150, 150, 128, True, "fp32", 6, {}),
        (2, 1, 40, 300, 64, False, "fp16", 7, {}),  # many key tiles
        (1, 2, 96, 96, 64, False, "fp32", 8, {"sm_scale": 0.3}),
        (1, 2, 80, 80, 32, True, "fp32", 9, {"layout": "bshd"}),
        (1, 1, 50, 70, 64, False, "fp16", 10, {"layout": "dlast"}),
        (2, 2, 33, 65, 32, False, "fp32", 11, {"layout": "pad"}),
        # Scores of ±100s: exp overflows unless the running max is subtracted.
        # (fp16 on a GPU: tf32's 10-bit mantissa cannot hold scores of ±100s to
        # the digits an fp32 check asks, seen on an H200.)
        (
            1,
            2,
            64,
            100,
            64,
            False,
            "fp32" if ctx.interpreter else "fp16",
            12,
            {"scale": 8.0, "label": "large scores"},
        ),
        (1, 1, 70, 70, 32, True, "fp16", 13, {"scale": 6.0, "label": "large scores"}),
        (1, 2, 64, 90, 64, False, "bf16", 14, {}),
        (1, 1, 100, 100, 32, True, "bf16", 15, {}),
        # bf16 too: an online softmax that kept no running max for bf16 alone
        # passed on the CPU (its other bf16 cases' scores never overflow exp).
        (1, 1, 64, 64, 32, False, "bf16", 17, {"scale": 8.0, "label": "large scores"}),
        # The same shape again with fresh data: a cached answer fails here.
        (2, 3, 100, 77, 32, False, "fp32", 16, {"label": "second draw"}),
    ]
    if ctx.device == "cuda":
        # Ragged shapes stay under the reference's tuning threshold; the big
        # ones share dtype and alignment with the timing cases, so a check
        # compiles few kernel variants.
        specs += [
            (4, 4, 513, 513, 32, True, "bf16", 20, {"layout": "bshd"}),
            (1, 4, 500, 500, 64, False, "fp16", 21, {}),
            (2, 4, 777, 777, 16, True, "fp16", 22, {}),
            (1, 2, 100, 1200, 128, False, "bf16", 23, {"scale": 4.0, "label": "large scores"}),
            (2, 8, 1024, 1024, 128, True, "bf16", 24, {}),
            (1, 4, 256, 4096, 128, False, "bf16", 25, {}),
            (1, 8, 4096, 4096, 64, True, "bf16", 26, {}),
        ]
    return [
        make_case(ctx, B, H, Sq, Sk, D, c, dt, seed, **kw)
        for B, H, Sq, Sk, D, c, dt, seed, kw in specs
        if dt not in skip
    ]


def timing_cases(ctx: CaseContext) -> list[Case]:
    # H·D = 2048 throughout (a 2048-wide model); as many tokens at S = 4096
    # (batch 4) as at 16384 (batch 1).
    cases = []
    for i, (S, D, causal) in enumerate(
        [
            (4096, 64, False),
            (4096, 64, True),
            (4096, 128, False),
            (4096, 128, True),
            (16384, 64, False),
            (16384, 64, True),
            (16384, 128, False),
            (16384, 128, True),
        ]
    ):
        B, H = (4 if S == 4096 else 1), 2048 // D
        cases.append(
            make_case(ctx, B, H, S, S, D, causal, capability.timed_dtype(ctx, "bf16"), 100 + i)
        )
    return cases


def reference(case: Case) -> torch.Tensor:
    """softmax(q kᵀ · scale) v in float64, a block of queries at a time (the
    full score matrix of one 16k-token head would be 2 GiB in float64)."""
    q = case.args[0]
    return _attend(case, torch.arange(q.shape[2], device=q.device))


def reference_rows(case: Case, rows: torch.Tensor) -> torch.Tensor:
    """The reference at some query positions only (sorted), for every batch
    and head: how the judge checks a timed output (gpulab.judge.batches)."""
    return _attend(case, rows)


def _attend(case: Case, rows: torch.Tensor) -> torch.Tensor:
    q, k, v = case.args
    causal = case.kwargs.get("causal", False)
    D = q.shape[-1]
    scale = case.kwargs.get("sm_scale") or 1.0 / math.sqrt(D)
    B, H = q.shape[:2]
    Sk = k.shape[2]
    n = rows.numel()
    out = torch.empty(B, H, n, D, dtype=torch.float64, device=q.device)
    chunk = max(1, 2**26 // max(1, H * Sk))
    for b in range(B):
        kb, vb = k[b].double(), v[b].double()
        for s0 in range(0, n, chunk):
            pos = rows[s0 : s0 + chunk]
            qb = q[b].index_select(1, pos).double()
            # Causal: keys past this chunk's last query are masked for every
            # row in it, so they are left out (their exp is 0): half the work
            # on a long sequence.
            keys = min(Sk, int(pos[-1]) + 1) if causal else Sk
            s = torch.matmul(qb, kb[:, :keys].transpose(-1, -2)) * scale
            if causal:
                cols = torch.arange(keys, device=q.device)[None, :]
                s = s.masked_fill(cols > pos[:, None], float("-inf"))
            out[b, :, s0 : s0 + chunk] = torch.matmul(torch.softmax(s, dim=-1), vb[:, :keys])
    return out


def expect(case: Case) -> Expect:
    q = case.args[0]
    return Expect(q.shape, q, "q")


def _sdpa_baseline(case: Case) -> Callable[[], torch.Tensor]:
    """torch's SDPA with the flash backend (the CUDA FlashAttention-2 that
    ships with torch) where the GPU has it (sm80+), else SDPA's own choice."""
    q, k, v = case.args
    causal = case.kwargs.get("causal", False)
    scale = case.kwargs.get("sm_scale")
    if torch.cuda.get_device_capability() >= (8, 0):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def run() -> torch.Tensor:
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

        return run
    return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


def _baseline_name() -> str:
    if torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0):
        return "SDPA (flash backend)"
    return "SDPA"


def make_spec(interpreter: bool = False) -> KernelSpec:
    tol = TOLERANCE if interpreter else TOLERANCE_GPU
    return KernelSpec(
        reference=reference,
        reference_rows=reference_rows,
        row_axis=2,
        banned=BANNED,
        banned_aten=BANNED_ATEN,
        banned_label=BANNED_LABEL,
        tolerance=lambda dt: tol[dt],
        expect=expect,
        baseline=_sdpa_baseline,
        baseline_name=_baseline_name(),
        # Against torch's own CUDA FlashAttention-2, timed in the same run.
        grade_on="speedup",
        grades=((1.0, "A"), (0.85, "B"), (0.70, "C"), (0.0, "D")),
    )


def kernel_spec(ctx: CaseContext) -> KernelSpec:
    """The spec where `ctx` runs (the interpreter's tolerances on the CPU)."""
    return make_spec(ctx.interpreter)


def grade(ctx: GradeContext) -> None:
    def cases() -> list[Case]:
        skip = set(interpreter_skips(ctx)) if ctx.interpreter else set()
        return correctness_cases(ctx, skip | capability.skip_for_device(ctx))

    spec = kernel_spec(ctx)
    grade_kernel(
        ctx,
        spec,
        "attention",
        cases,
        lambda: timing_cases(ctx),
        check=checked,
        timing_note=f"Graded by the speedup over {spec.baseline_name}, timed in the "
        "same run: A ≥ 1.0×, B ≥ 0.85×, C ≥ 0.70×. TFLOP/s count 4·B·H·Sq·Sk·D, "
        "halved when causal.",
    )


def bench_baselines(case: Case) -> dict[str, Callable[[], torch.Tensor]]:
    """For `gpulab bench`: both of torch's fast SDPA backends on Hopper, the
    CUDA FlashAttention-2 (flash) and cuDNN's (FlashAttention-3 class)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = case.args
    causal = case.kwargs.get("causal", False)
    scale = case.kwargs.get("sm_scale")

    def backend(which: SDPBackend) -> Callable[[], torch.Tensor]:
        def run() -> torch.Tensor:
            with sdpa_kernel(which):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

        return run

    return {
        "SDPA flash": backend(SDPBackend.FLASH_ATTENTION),
        "SDPA cuDNN": backend(SDPBackend.CUDNN_ATTENTION),
    }


# --- `gpulab dev compile` (the manifest's tools: "compile") ---------------------
# The reference's kernels as it launches them, and the starter's with the same
# signature (gpulab.measure.compile_specs).
def _attention_tma(m: Any, fn: Any) -> cs.Built:
    D = 128
    bm, bn, warps, stages = m.TMA_TILES[D]
    ce = {"HEAD_DIM": D, "CAUSAL": True, "BLOCK_M": bm, "BLOCK_N": bn}
    descs = {
        n: cs.tma_desc("fp16", (bm if n in ("q_desc", "o_desc") else bn, D))
        for n in ("q_desc", "k_desc", "v_desc", "o_desc")
    }
    return (
        cs.signature(fn, "fp16", ce, floats=("qk_scale",), descs=descs),
        ce,
        {"num_warps": warps, "num_stages": stages},
    )


def _fa3(m: Any, fn: Any) -> cs.Built:
    D, causal = 128, True
    sched = m.SCHEDULES[D, causal]

    def desc(box: int) -> str:
        return f"tensordesc<fp16[{box}, {D}],{m.shared_layout(torch.float16, [box, D])!r}>"

    ce = {
        "CAUSAL": causal,
        "STAGES": sched["stages"],
        "NUM_WG": sched["num_wg"],
        "PINGPONG": sched["pingpong"],
        "POLY": sched["poly"],
        "SPLIT": False,
    }
    sig = {
        "q_desc": desc(64),
        "k_desc": desc(sched["block_n"]),
        "v_desc": desc(sched["block_n"]),
        "o_desc": desc(64),
        "Sq": "i32",
        "Sk": "i32",
        "qk_scale": "fp32",
        "G": "i32",
        **{k: "constexpr" for k in ce},
    }
    return sig, ce, {"num_warps": 4}


_AUTOTUNED = cs.autotuned(
    "GPU_CONFIGS",
    "fp16",
    {"HEAD_DIM": 64, "CAUSAL": True},
    floats=("qk_scale",),
    ptrs=("Q", "K", "V", "O"),
)  # the paper's names

COMPILE_SPECS = (
    *(
        cs.Spec(
            "attention_kernel",
            f"config {i} D=64 causal fp16",
            _AUTOTUNED(i),
            starter="attention_kernel" if i == 3 else "",
        )
        for i in range(4)
    ),
    cs.Spec("attention_kernel_tma", "TMA D=128 causal fp16", _attention_tma, archs=cs.TMA),
    cs.Spec(
        "attention_fa3",
        "Gluon FA3 D=128 causal fp16, 2 warpgroups",
        _fa3,
        archs=cs.HOPPER,
        file="hopper/flash_attention_fa3",
    ),
)
