"""Sweep Triton FlashAttention forward variants against SDPA's cuDNN and
flash backends on a GPU.

    python3 scripts/sweeps/sweep_attention.py OUT.json [--quick] [--shapes S16384] [--variants tma]
    python3 scripts/sweeps/sweep_attention.py --selftest   # CPU: every variant in the interpreter
    python3 scripts/sweeps/sweep_attention.py --list       # the cases and variants, no GPU

O = softmax(Q Kᵀ / √D) V for (B, H, S, D) bf16, D in {64, 128}, S in
{4096, 16384}, causal and not; H·D = 2048 and B·S = 16384 tokens (the
shapes gpulab's grader times). FLOPs counted as 4·B·H·S²·D, halved for
causal (the FlashAttention papers' convention).

Every variant is the FA2 forward: a program owns BLOCK_M query rows, streams
K and V tiles past them with an online softmax in exp2 (log2 e folded into
the scale, one FMA per score), P cast to bf16 for the second tensor-core
product; causal runs do the tiles below the diagonal without a mask, the
diagonal tiles with one, and skip the rest; causal programs start with the
longest query blocks. Families (configs named BMxBN wN sN):
  fa2      pointer loads (the portable kernel)
  tma      Q, K, V, O through host-built TMA descriptors over the (B·H·S, D)
           view (triton.tools.tensor_descriptor.TensorDescriptor)
  desc     the same with descriptors built on the device
           (tl.make_tensor_descriptor; needs triton.set_allocator)
  desc_ws  desc with warp specialisation of the K/V loop
           (tl.range(..., warp_specialize=True)): producer warps issue the
           TMA loads, consumer warps do the math. Triton's tutorial enables
           it on Hopper for the non-causal forward; where a release cannot
           compile it for sm_90 the error is recorded.
  tma_poly tma with a share of each score tile's exp2s (p1/2, p1/4, p1/8 of
           the columns) computed by a polynomial on the FMA pipe instead of
           MUFU (FlashAttention-4's trick; _exp2_poly)
  tma_pipe tma with the key loop pipelined by hand so that a tensor-core
           product overlaps the softmax (FlashAttention-3's intra-warpgroup
           overlap): "pv" runs the previous tile's P·V during it, "qk" the
           next tile's Q·Kᵀ (_loop_pipe says why only one of them can)
  fa3      kernels/hopper/flash_attention_fa3.py, the Gluon FlashAttention-3
           schedule (a TMA loader warp, two consumer warpgroups taking turns
           at the tensor cores, P·V of one tile under the softmax of the
           next); configs 128xBN sN, "free" without the turn-taking. Gluon
           has no interpreter: --selftest skips it (tests compile it for
           sm_90 instead)
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

if "--selftest" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import sweep_common as common  # noqa: E402
from sweep_common import Variant  # noqa: E402

NAME = "attention"
BASELINES = ["cudnn", "flash"]
LOG2E = 1.4426950408889634


# --------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------


@triton.jit
def _exp2_poly(x, DEG: tl.constexpr):
    """2^x for x <= 0 on the FMA pipe (FlashAttention-4's trick): Hopper's
    MUFU does ~16 exp2/clk/SM against ~4096 bf16 tensor FLOP/clk/SM, so at
    D=64 (256 FLOP per score) the exp2s alone take as long as both matmuls.
    2^x = 2^n · 2^f, n = round(x), f = x - n in [-1/2, 1/2]; 2^f by a minimax
    polynomial. Max relative error against torch.exp2 over [-126, 0],
    measured in the interpreter: 7.5e-5 at degree 3 (1.4e-4 within 1e-4 of
    -126, where the result is a denormal), 2.7e-6 at degree 4; P is rounded
    to bf16 (3.9e-3) afterwards."""
    # Clamped at 2^-126, the smallest normal float: masked scores (-1e6,
    # -inf) give 1.2e-38, never an underflowed exponent field or a NaN.
    x = tl.maximum(x, -126.0)
    # Adding 1.5·2^23 rounds x to an integer and leaves it in the low
    # mantissa bits (the ulp there is 1): no float-to-int conversion, which
    # runs at about MUFU's own rate. Without fast-math nothing folds
    # (x + c) - c back to x (checked: the sm_90 SASS keeps both FADDs).
    xr = x + 12582912.0
    f = x - (xr - 12582912.0)
    if DEG == 3:
        y = f * 0.05517175048589706 + 0.24261131882667542
        y = y * f + 0.6932609677314758
        y = y * f + 0.9999280571937561
    else:
        y = f * 0.009570818394422531 + 0.05591840669512749
        y = y * f + 0.24024727940559387
        y = y * f + 0.6931217312812805
        y = y * f + 0.9999992847442627
    # Multiply by 2^n by adding n to the exponent field: the shift keeps
    # xr's low 9 bits, n in two's complement, and drops the magic number's
    # (mod 2^32). y is in [0.7, 1.42] and n in [-126, 0], n = -126 only with
    # f >= 0: the exponent field stays in [0, 127], 0 (a denormal, ~1e-38)
    # only where y(f) < 1 at f ~ 0.
    bits = y.to(tl.int32, bitcast=True) + (xr.to(tl.int32, bitcast=True) << 23)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _halves(x):
    """Split a (BM, BN) tile into its left and right column halves. A
    thread of a wgmma accumulator holds a column pair in every 8-column
    group, so the column bits from 8 up select registers and the
    reshape/permute/split only renames registers (checked in the sm_90 TTGIR
    and PTX: linear layouts, no shuffles, no shared memory) for halves of at
    least 8 columns."""
    BM: tl.constexpr = x.shape[0]
    BN: tl.constexpr = x.shape[1]
    return x.reshape([BM, 2, BN // 2]).permute(0, 2, 1).split()


@triton.jit
def _unhalves(a, b):
    BM: tl.constexpr = a.shape[0]
    BN: tl.constexpr = a.shape[1]
    return tl.join(a, b).permute(0, 2, 1).reshape([BM, 2 * BN])


@triton.jit
def _exp2_mixed(x, POLY: tl.constexpr, DEG: tl.constexpr):
    """exp2 of a score tile with 1/POLY of it (the rightmost columns) on
    the FMA pipe and the rest on MUFU, so the two units work in parallel.
    POLY: 0 none (all MUFU), 1 all, 2 a half, 4 a quarter, 8 an eighth. The
    polynomial costs 8 FP32/ALU ops a score in the sm_90 SASS (FMNMX, 3
    FADD, 3 FFMA, one LEA for the shift-and-add) against one MUFU op at 1/8
    of the FP32 rate, and the softmax already spends ~3 FP32 ops a score, so
    the balance point is nearer a quarter than a half; the sweep decides."""
    if POLY == 0:
        p = tl.math.exp2(x)
    elif POLY == 1:
        p = _exp2_poly(x, DEG)
    elif POLY == 2:
        a, b = _halves(x)
        p = _unhalves(tl.math.exp2(a), _exp2_poly(b, DEG))
    elif POLY == 4:
        a, b = _halves(x)
        b0, b1 = _halves(b)
        p = _unhalves(tl.math.exp2(a), _unhalves(tl.math.exp2(b0), _exp2_poly(b1, DEG)))
    else:
        tl.static_assert(POLY == 8, "POLY is 0, 1, 2, 4 or 8")
        a, b = _halves(x)
        b0, b1 = _halves(b)
        c0, c1 = _halves(b1)
        p = _unhalves(
            tl.math.exp2(a),
            _unhalves(tl.math.exp2(b0), _unhalves(tl.math.exp2(c0), _exp2_poly(c1, DEG))),
        )
    return p


@triton.jit
def _softmax_tile(
    m_i,
    qk,
    offs_m,
    start_n,
    qk_scale,
    BLOCK_N: tl.constexpr,
    MASK: tl.constexpr,
    POLY: tl.constexpr,
    POLY_DEG: tl.constexpr,
):
    """The softmax half of a step: P (fp32), the factor alpha that rescales
    what was accumulated before, the row sums of P and the new m (kept in
    scaled log2 units). The caller folds the sums into l, so the tma, desc
    and fa2 kernels keep their order (l updated after the P·V is issued).
    POLY > 0 computes part of the exp2s by polynomial (_exp2_mixed)."""
    if MASK:
        offs_n = start_n + tl.arange(0, BLOCK_N)
        qk = qk * qk_scale + tl.where(offs_m[:, None] >= offs_n[None, :], 0.0, -1.0e6)
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        qk = qk - m_new[:, None]
    else:
        # max(qk)·scale == max(qk·scale) for scale > 0: scale a vector, not
        # the tile, then scale-and-subtract is one FMA per score.
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        qk = qk * qk_scale - m_new[:, None]
    p = _exp2_mixed(qk, POLY, POLY_DEG)
    alpha = tl.math.exp2(m_i - m_new)  # 0 on the first tile (m_i = -inf)
    return p, alpha, tl.sum(p, 1), m_new


@triton.jit
def _online_softmax_step(
    acc,
    l_i,
    m_i,
    qk,
    v,
    offs_m,
    start_n,
    qk_scale,
    BLOCK_N: tl.constexpr,
    MASK: tl.constexpr,
    POLY: tl.constexpr,
    POLY_DEG: tl.constexpr,
):
    """Fold one tile of scores qk (BLOCK_M x BLOCK_N, raw q·k) and its V tile
    into the running (acc, l, m)."""
    p, alpha, l_ij, m_new = _softmax_tile(
        m_i, qk, offs_m, start_n, qk_scale, BLOCK_N, MASK, POLY, POLY_DEG
    )
    acc = acc * alpha[:, None]
    acc = tl.dot(p.to(v.dtype), v, acc)
    l_i = l_i * alpha + l_ij
    return acc, l_i, m_new


@triton.jit
def _loop_ptr(
    acc,
    l_i,
    m_i,
    q,
    k_base,
    v_base,
    sks,
    skd,
    svs,
    svd,
    lo,
    hi,
    offs_m,
    qk_scale,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    MASK: tl.constexpr,
):
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    k_ptrs = k_base + (lo + offs_n)[:, None] * sks + offs_d[None, :] * skd
    v_ptrs = v_base + (lo + offs_n)[:, None] * svs + offs_d[None, :] * svd
    for start_n in tl.range(lo, hi, BLOCK_N):
        k = tl.load(k_ptrs)
        qk = tl.dot(q, tl.trans(k))
        v = tl.load(v_ptrs)
        acc, l_i, m_i = _online_softmax_step(
            acc, l_i, m_i, qk, v, offs_m, start_n, qk_scale, BLOCK_N, MASK, 0, 3
        )
        k_ptrs += BLOCK_N * sks
        v_ptrs += BLOCK_N * svs
    return acc, l_i, m_i


@triton.jit
def attn_ptr(
    Q,
    K,
    V,
    Out,
    sqb,
    sqh,
    sqs,
    sqd,
    skb,
    skh,
    sks,
    skd,
    svb,
    svh,
    svs,
    svd,
    sob,
    soh,
    sos,
    sod,
    H,
    S,
    qk_scale,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
):
    start_m = tl.program_id(0)
    if CAUSAL:  # longest query blocks first: the short ones fill the tail
        start_m = tl.num_programs(0) - 1 - start_m
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqs + offs_d[None, :] * sqd)
    k_base = K + b * skb + h * skh
    v_base = V + b * svb + h * svh
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    if CAUSAL:
        acc, l_i, m_i = _loop_ptr(
            acc,
            l_i,
            m_i,
            q,
            k_base,
            v_base,
            sks,
            skd,
            svs,
            svd,
            0,
            start_m * BLOCK_M,
            offs_m,
            qk_scale,
            HEAD_DIM,
            BLOCK_N,
            False,
        )
        acc, l_i, m_i = _loop_ptr(
            acc,
            l_i,
            m_i,
            q,
            k_base,
            v_base,
            sks,
            skd,
            svs,
            svd,
            start_m * BLOCK_M,
            (start_m + 1) * BLOCK_M,
            offs_m,
            qk_scale,
            HEAD_DIM,
            BLOCK_N,
            True,
        )
    else:
        acc, l_i, m_i = _loop_ptr(
            acc,
            l_i,
            m_i,
            q,
            k_base,
            v_base,
            sks,
            skd,
            svs,
            svd,
            0,
            S,
            offs_m,
            qk_scale,
            HEAD_DIM,
            BLOCK_N,
            False,
        )
    out = acc / l_i[:, None]
    tl.store(
        Out + b * sob + h * soh + offs_m[:, None] * sos + offs_d[None, :] * sod,
        out.to(Out.dtype.element_ty),
    )


@triton.jit
def _loop_desc(
    acc,
    l_i,
    m_i,
    q,
    desc_k,
    desc_v,
    row0,
    lo,
    hi,
    offs_m,
    qk_scale,
    BLOCK_N: tl.constexpr,
    MASK: tl.constexpr,
    WS: tl.constexpr,
    POLY: tl.constexpr,
    POLY_DEG: tl.constexpr,
):
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WS):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = desc_k.load([row0 + start_n, 0])
        qk = tl.dot(q, k.T)
        v = desc_v.load([row0 + start_n, 0])
        acc, l_i, m_i = _online_softmax_step(
            acc, l_i, m_i, qk, v, offs_m, start_n, qk_scale, BLOCK_N, MASK, POLY, POLY_DEG
        )
    return acc, l_i, m_i


@triton.jit
def _loop_pipe(
    acc,
    l_i,
    m_i,
    qk,
    p,
    alpha,
    q,
    desc_k,
    desc_v,
    row0,
    lo,
    hi,
    offs_m,
    qk_scale,
    BLOCK_N: tl.constexpr,
    MASK: tl.constexpr,
    PIPE: tl.constexpr,
    POLY: tl.constexpr,
    POLY_DEG: tl.constexpr,
):
    """The key loop pipelined by hand so that one tensor-core product runs
    while this warpgroup does a tile's softmax (FlashAttention-3's
    intra-warpgroup overlap). Tiles [lo, hi) get their softmax here; on entry
    p and alpha belong to tile lo - BLOCK_N, whose P·V is still to do.

    wgmma is asynchronous, but Triton 3.6 (asyncLaunchDots in
    WGMMAPipeline.cpp) leaves a dot in flight past its statement only if its
    result goes straight to the loop's yield and every use of the previous
    iteration's result comes after a `wait 0` earlier in the body, i.e.
    after a dot that stays synchronous. So one of the two products can
    overlap the softmax, and PIPE picks which:
      1 ("qk")  P·V of the previous tile (synchronous; its wait also retires
                this tile's Q·Kᵀ), then the next tile's Q·Kᵀ, in flight
                during this tile's softmax. Needs tile hi to exist (its
                scores are returned in qk) and a second fp32 score tile in
                registers. Triton marks the Q·Kᵀ async, but the score tile
                is carried round the loop by register copies that read the
                in-flight accumulator, and ptxas 12.8 then serialises every
                wgmma of the kernel (its C7514 note): expect no gain.
      2 ("pv")  this tile's Q·Kᵀ (synchronous; retires the last P·V), then
                the previous tile's P·V, in flight during this tile's
                softmax: FlashAttention-3's order (its Algorithm 2). Only
                the P of the tile before is extra in registers, and ptxas
                interleaves the P·V wgmmas with the MUFU work as intended.
    p is carried in fp32 and cast where it is used: AccelerateMatmul stages
    a dot operand that comes straight from a loop-carried value through
    shared memory, and then the wgmma has to be waited on at once."""
    for start_n in tl.range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        if PIPE == 1:
            v = desc_v.load([row0 + start_n - BLOCK_N, 0])
            acc = tl.dot(p.to(q.dtype), v, acc * alpha[:, None])
            qk_next = tl.dot(q, desc_k.load([row0 + start_n + BLOCK_N, 0]).T)
            p, alpha, l_ij, m_i = _softmax_tile(
                m_i, qk, offs_m, start_n, qk_scale, BLOCK_N, MASK, POLY, POLY_DEG
            )
            l_i = l_i * alpha + l_ij
            qk = qk_next
        else:
            # A new name, not qk: the scores must not become loop-carried.
            s_j = tl.dot(q, desc_k.load([row0 + start_n, 0]).T)
            v = desc_v.load([row0 + start_n - BLOCK_N, 0])
            acc = tl.dot(p.to(q.dtype), v, acc * alpha[:, None])
            p, alpha, l_ij, m_i = _softmax_tile(
                m_i, s_j, offs_m, start_n, qk_scale, BLOCK_N, MASK, POLY, POLY_DEG
            )
            l_i = l_i * alpha + l_ij
    return acc, l_i, m_i, qk, p, alpha


@triton.jit
def attn_desc(
    desc_q,
    desc_k,
    desc_v,
    desc_o,
    BH,
    S,
    qk_scale,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    DEVICE_DESC: tl.constexpr,
    WS: tl.constexpr,
    PIPE: tl.constexpr,
    POLY: tl.constexpr,
    POLY_DEG: tl.constexpr,
):
    # q, k, v, o are viewed as (B·H·S, HEAD_DIM): head bh owns rows [bh·S, bh·S + S).
    # S is a multiple of BLOCK_M, so no box crosses into the next head.
    if DEVICE_DESC:
        rows = BH * S
        desc_q = tl.make_tensor_descriptor(
            desc_q, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_M, HEAD_DIM]
        )
        desc_k = tl.make_tensor_descriptor(
            desc_k, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_N, HEAD_DIM]
        )
        desc_v = tl.make_tensor_descriptor(
            desc_v, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_N, HEAD_DIM]
        )
        desc_o = tl.make_tensor_descriptor(
            desc_o, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_M, HEAD_DIM]
        )
    start_m = tl.program_id(0)
    if CAUSAL:
        start_m = tl.num_programs(0) - 1 - start_m
    row0 = tl.program_id(1) * S
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q = desc_q.load([row0 + start_m * BLOCK_M, 0])
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    if PIPE:
        # One pipelined stream over the tiles this program visits, [0, end):
        # tile 0's softmax first (masked in a causal run: for start_m = 0 it
        # is a diagonal tile, otherwise the mask is all true), then the loop
        # over the unmasked tiles and the diagonal ones (P·V lagging a tile
        # behind the softmax), then the last tile's P·V alone. S is a
        # multiple of BLOCK_M and BLOCK_M of BLOCK_N (the launcher checks),
        # so a non-causal run has no partial tile to mask.
        end = (start_m + 1) * BLOCK_M if CAUSAL else S
        diag = start_m * BLOCK_M if CAUSAL else S  # where the masked tiles start
        qk = tl.dot(q, desc_k.load([row0, 0]).T)
        p, alpha, l_ij, m_i = _softmax_tile(
            m_i, qk, offs_m, 0, qk_scale, BLOCK_N, CAUSAL, POLY, POLY_DEG
        )
        l_i = l_i * alpha + l_ij
        # Mode 1 computes the scores a tile ahead, so its loop stops a tile
        # short and the last softmax is peeled (needs a second tile).
        loop_end = end - BLOCK_N if PIPE == 1 else end
        if PIPE == 1:
            if end > BLOCK_N:
                qk = tl.dot(q, desc_k.load([row0 + BLOCK_N, 0]).T)
        acc, l_i, m_i, qk, p, alpha = _loop_pipe(
            acc,
            l_i,
            m_i,
            qk,
            p,
            alpha,
            q,
            desc_k,
            desc_v,
            row0,
            BLOCK_N,
            tl.minimum(diag, loop_end),
            offs_m,
            qk_scale,
            BLOCK_N,
            False,
            PIPE,
            POLY,
            POLY_DEG,
        )
        if CAUSAL:
            acc, l_i, m_i, qk, p, alpha = _loop_pipe(
                acc,
                l_i,
                m_i,
                qk,
                p,
                alpha,
                q,
                desc_k,
                desc_v,
                row0,
                tl.maximum(diag, BLOCK_N),
                loop_end,
                offs_m,
                qk_scale,
                BLOCK_N,
                True,
                PIPE,
                POLY,
                POLY_DEG,
            )
        if PIPE == 1:
            if end > BLOCK_N:
                last = end - BLOCK_N
                v = desc_v.load([row0 + last - BLOCK_N, 0])
                acc = tl.dot(p.to(q.dtype), v, acc * alpha[:, None])
                p, alpha, l_ij, m_i = _softmax_tile(
                    m_i, qk, offs_m, last, qk_scale, BLOCK_N, CAUSAL, POLY, POLY_DEG
                )
                l_i = l_i * alpha + l_ij
        v = desc_v.load([row0 + end - BLOCK_N, 0])
        acc = tl.dot(p.to(q.dtype), v, acc * alpha[:, None])
    elif CAUSAL:
        acc, l_i, m_i = _loop_desc(
            acc,
            l_i,
            m_i,
            q,
            desc_k,
            desc_v,
            row0,
            0,
            start_m * BLOCK_M,
            offs_m,
            qk_scale,
            BLOCK_N,
            False,
            WS,
            POLY,
            POLY_DEG,
        )
        acc, l_i, m_i = _loop_desc(
            acc,
            l_i,
            m_i,
            q,
            desc_k,
            desc_v,
            row0,
            start_m * BLOCK_M,
            (start_m + 1) * BLOCK_M,
            offs_m,
            qk_scale,
            BLOCK_N,
            True,
            WS,
            POLY,
            POLY_DEG,
        )
    else:
        acc, l_i, m_i = _loop_desc(
            acc,
            l_i,
            m_i,
            q,
            desc_k,
            desc_v,
            row0,
            0,
            S,
            offs_m,
            qk_scale,
            BLOCK_N,
            False,
            WS,
            POLY,
            POLY_DEG,
        )
    out = acc / l_i[:, None]
    desc_o.store([row0 + start_m * BLOCK_M, 0], out.to(q.dtype))


# --------------------------------------------------------------------------
# Variants
# --------------------------------------------------------------------------


def _cfg(bm, bn, warps, stages, **extra):
    return {"BM": bm, "BN": bn, "warps": warps, "stages": stages, **extra}


# Per head dim. On sm_90 a warpgroup (4 warps) owns 64 rows per wgmma, so 8
# warps suit BLOCK_M = 128 with wide key tiles; Triton's tutorial drops
# 8-warp configs with BLOCK_M·BLOCK_N < 128·128 on Hopper. Registers bound
# the rest: the fp32 accumulator is BLOCK_M·D/threads and the score tile
# BLOCK_M·BLOCK_N/threads per thread.
CONFIGS = {
    64: [_cfg(128, 128, 8, 3), _cfg(128, 64, 4, 3), _cfg(128, 128, 4, 2)],
    128: [_cfg(128, 128, 8, 3), _cfg(128, 128, 8, 2), _cfg(128, 64, 4, 3)],
}
EXTRA = {64: {"tma": [_cfg(256, 64, 8, 3)]}, 128: {}}
# tma_poly: which share of the exp2s goes to the polynomial balances MUFU
# against the FMA pipe, and the balance differs with D (the matmul time per
# score doubles from 64 to 128), so each config runs at a half and a
# quarter, and the configs measured best for tma at an eighth too.
POLY_SHARES = {64: {(128, 64, 4, 3): (2, 4, 8)}, 128: {(128, 128, 8, 3): (2, 4, 8)}}
# tma_pipe keeps one more K tile in shared memory than tma (the wait Triton
# puts after the loop holds the prologue's K buffer), so at D=128 128x128
# with 3 stages needs 262 KB, over the H200's 227: 2 stages there, and
# 128x64 with 8 warps (160-176 registers, no spills) in its place. Mode 2
# ("pv") in every config; mode 1 ("qk"), which ptxas serialises (see
# _loop_pipe), in one config per head dim to measure what that costs.
PIPE_CONFIGS = {
    64: CONFIGS[64],
    128: [_cfg(128, 128, 8, 2), _cfg(128, 64, 4, 3), _cfg(128, 64, 8, 3)],
}
PIPE_QK = {64: (128, 128, 8, 3), 128: (128, 128, 8, 2)}
PIPE_MODES = {1: "qk", 2: "pv"}  # which product overlaps the softmax
# fa3: BLOCK_M is 64 rows per consumer warpgroup. Measured on the H200
# (raw: attention-fa3-first.json, attention-fa3-poly.json): 64-row key
# tiles lost 10-20%, 256-row ones spill; the turn-taking moved results by a
# few percent either way; a share of exp2s on the FMA pipe (p1/n) lost 0-15%
# at both head dims. So the variants now are the number of consumer
# warpgroups (FlashAttention-3 uses three at D = 64, where the softmax is as
# long as the matmuls and a third warpgroup keeps the tensor cores fed) and
# the depth of the K/V ring, with and without the turns ("free").
FA3_CONFIGS = {  # (warpgroups, key tile, stages)
    64: [(2, 128, 3), (3, 128, 2), (3, 128, 3), (3, 128, 4)],
    128: [(2, 128, 2)],
}
FAMILIES = ["tma", "tma_poly", "tma_pipe", "desc", "desc_ws", "fa2", "fa3"]


def _family_configs(fam: str, D: int, causal: bool = False) -> list[dict]:
    if fam == "fa3":
        # Three warpgroups with turns deadlocked once (a wrong barrier index,
        # since fixed and run 1560 times clean by `scripts/research/fa3_probe.py
        # --stress`). "lpt" is the launch order of the causal shapes (heads
        # in L2-sized groups, longest row blocks first; see the kernel).
        return [
            _cfg(64 * wg, bn, 4 * wg + 4, st, pingpong=pp, poly=0, lpt=lpt)
            for wg, bn, st in FA3_CONFIGS[D]
            for pp in (True, False)
            for lpt in ((False, True) if causal else (False,))
        ]
    base = CONFIGS[D] + EXTRA[D].get(fam, [])
    if fam == "tma_poly":
        return [
            dict(c, poly=share, deg=3)
            for c in base
            for share in POLY_SHARES[D].get((c["BM"], c["BN"], c["warps"], c["stages"]), (2, 4))
        ]
    if fam == "tma_pipe":
        out = [
            dict(c, pipe=mode)
            for c in PIPE_CONFIGS[D]
            for mode in (
                (2, 1) if (c["BM"], c["BN"], c["warps"], c["stages"]) == PIPE_QK[D] else (2,)
            )
        ]
        # Both tricks at once: P·V under the softmax, a quarter of its exp2s
        # on the FMA pipe.
        return out + [dict(c, pipe=2, poly=4, deg=3) for c in PIPE_CONFIGS[D]]
    return base


def variants(case: dict) -> list[Variant]:
    D = case["D"]
    out = []
    for fam in FAMILIES:
        for c in _family_configs(fam, D, case["causal"]):
            name = f"{fam} {c['BM']}x{c['BN']} w{c['warps']} s{c['stages']}"
            if fam == "fa3" and not c["pingpong"]:
                name += " free"
            if c.get("lpt"):
                name += " lpt"
            if c.get("poly"):
                name += f" p1/{c['poly']}" + (f" d{c['deg']}" if c.get("deg", 3) != 3 else "")
            if c.get("pipe"):
                name += " " + PIPE_MODES[c["pipe"]]
            out.append(Variant(name, fam, c))
    return out


def cases() -> list[dict]:
    out = []
    for S in (4096, 16384):
        for D in (64, 128):
            for causal in (False, True):
                B, H = (4 if S == 4096 else 1), 2048 // D
                flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
                out.append(
                    {
                        "label": f"B{B} H{H} S{S} D{D}" + (" causal" if causal else ""),
                        "B": B,
                        "H": H,
                        "S": S,
                        "D": D,
                        "causal": causal,
                        "dtype": "bf16",
                        "flops": flops,
                        "compile_key": (D, causal),
                        "quick": (S, D, causal) in ((4096, 128, False), (16384, 64, True)),
                    }
                )
    return out


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def _alloc(size: int, alignment: int, stream):
    return torch.empty(size, dtype=torch.int8, device="cpu" if _interpreting() else "cuda")


def setup() -> None:
    triton.set_allocator(_alloc)  # scratch for device-side TMA descriptors
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference is fp32


def _reference_heads(q, k, v, causal, scale, heads):
    """fp32 attention for the listed (b, h) heads, a block of rows at a time."""
    outs = []
    S = q.shape[2]
    for b, h in heads:
        qh, kh, vh = q[b, h].float(), k[b, h].float(), v[b, h].float()
        o = torch.empty_like(qh)
        for r0 in range(0, S, 2048):
            s = (qh[r0 : r0 + 2048] @ kh.T) * scale
            if causal:
                rows = torch.arange(r0, r0 + s.shape[0], device=q.device)[:, None]
                s = s.masked_fill(torch.arange(S, device=q.device)[None, :] > rows, float("-inf"))
            o[r0 : r0 + 2048] = torch.softmax(s, -1) @ vh
        outs.append(o)
    return torch.stack(outs)


def prepare(case: dict, device: str = "cuda", dtype=torch.bfloat16) -> dict:
    B, H, S, D, causal = case["B"], case["H"], case["S"], case["D"], case["causal"]
    g = torch.Generator(device=device).manual_seed(4321 + S + D + causal)
    q, k, v = (torch.randn(B, H, S, D, generator=g, device=device).to(dtype) for _ in range(3))
    scale = 1.0 / math.sqrt(D)
    heads = [(0, 0), (B - 1, H - 1)]
    st = {
        "case": case,
        "q": q,
        "k": k,
        "v": v,
        "o": torch.empty_like(q),
        "scale": scale,
        "causal": causal,
        "heads": heads,
    }
    st["ref"] = _reference_heads(q, k, v, causal, scale, heads)
    # A trusted bf16 implementation for the whole output (the flash backend
    # on the GPU, the math backend on the CPU), and its error on the checked
    # heads: the yardstick for the variants' error.
    if device == "cuda":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            full = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    else:
        full = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    st["trusted"] = full
    st["trusted_err"] = error(st, full)
    st["ref_max"] = float(st["ref"].abs().max())
    return st


def baselines(state: dict) -> dict:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v, causal = state["q"], state["k"], state["v"], state["causal"]

    def sdpa(backend):
        def run():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        return run

    return {"cudnn": sdpa(SDPBackend.CUDNN_ATTENTION), "flash": sdpa(SDPBackend.FLASH_ATTENTION)}


def error(state: dict, out: torch.Tensor) -> float:
    got = torch.stack([out[b, h].float() for b, h in state["heads"]])
    return float((got - state["ref"]).abs().max())


def check(state: dict, out: torch.Tensor) -> tuple[bool, dict]:
    """Within twice the trusted implementation's error on the heads checked
    in fp32 (plus 0.2% of the largest output), and close to the trusted
    output on every head (catches batch/head indexing mistakes)."""
    err = error(state, out)
    whole = float((out.float() - state["trusted"].float()).abs().max())
    floor = 2e-3 * state["ref_max"]
    ok = (
        math.isfinite(err)
        and math.isfinite(whole)
        and err <= 2 * state["trusted_err"] + floor
        and whole <= 4 * state["trusted_err"] + 2 * floor
    )
    return ok, {"max_err": err, "vs_trusted": whole, "trusted_err": state["trusted_err"]}


def launcher(v: Variant, state: dict):
    from triton.tools.tensor_descriptor import TensorDescriptor

    q, k, vv, o = state["q"], state["k"], state["v"], state["o"]
    B, H, S, D = q.shape
    c = v.cfg
    BM, BN = c["BM"], c["BN"]
    if v.family != "fa3" and (S % BM or BM % BN):  # fa3 handles a short last block
        raise ValueError(f"S={S} must be a multiple of BLOCK_M={BM}, and BLOCK_M of BLOCK_N={BN}")
    opts = {"num_warps": c["warps"], "num_stages": c["stages"]}
    grid = (S // BM, B * H)
    qk_scale = state["scale"] * LOG2E
    causal = state["causal"]
    if v.family == "fa2":

        def run():
            attn_ptr[grid](
                q,
                k,
                vv,
                o,
                *q.stride(),
                *k.stride(),
                *vv.stride(),
                *o.stride(),
                H,
                S,
                qk_scale,
                HEAD_DIM=D,
                BLOCK_M=BM,
                BLOCK_N=BN,
                CAUSAL=causal,
                **opts,
            )
            return o

        return run
    for t in (q, k, vv, o):
        assert t.is_contiguous(), "descriptor variants need contiguous (B, H, S, D) tensors"
    if v.family == "fa3":
        fa3 = common.fa3_module()

        def run():
            fa3.launch(
                q,
                k,
                vv,
                o,
                causal,
                state["scale"],
                schedule={
                    "num_wg": BM // 64,
                    "block_n": BN,
                    "stages": c["stages"],
                    "pingpong": c["pingpong"],
                    "poly": c["poly"],
                    "lpt": c.get("lpt", False),
                },
            )
            return o

        return run
    if v.family in ("tma", "tma_poly", "tma_pipe"):
        rows = B * H * S
        args = [
            TensorDescriptor(t, shape=[rows, D], strides=[D, 1], block_shape=blk)
            for t, blk in ((q, [BM, D]), (k, [BN, D]), (vv, [BN, D]), (o, [BM, D]))
        ]
        device_desc, ws = False, False
    else:
        args = [q, k, vv, o]
        device_desc, ws = True, v.family == "desc_ws"

    pipe, poly, deg = c.get("pipe", 0), c.get("poly", 0), c.get("deg", 3)

    def run():
        attn_desc[grid](
            *args,
            B * H,
            S,
            qk_scale,
            HEAD_DIM=D,
            BLOCK_M=BM,
            BLOCK_N=BN,
            CAUSAL=causal,
            DEVICE_DESC=device_desc,
            WS=ws,
            PIPE=pipe,
            POLY=poly,
            POLY_DEG=deg,
            **opts,
        )
        return o

    return run


def selftest(args) -> int:
    """Every variant, at its real block sizes, on small shapes in the Triton
    interpreter (fp16: the interpreter's bf16 arithmetic is broken)."""
    import time

    setup()
    failures = 0
    for D in (64, 128):
        for causal in (False, True):
            case = {
                "label": f"B2 H2 S256 D{D}" + (" causal" if causal else ""),
                "B": 2,
                "H": 2,
                "S": 256,
                "D": D,
                "causal": causal,
            }
            state = prepare(case, device="cpu", dtype=torch.float16)
            for v in variants(case):
                if not common.wanted(v.name, args.variants) or v.family == "fa3":
                    continue  # Gluon kernels need a GPU (no interpreter)
                t0 = time.time()
                state["o"].fill_(float("nan"))
                try:
                    ok, err = check(state, launcher(v, state)())
                    msg = f"{'ok ' if ok else 'BAD'} {err['max_err']:.4f} (sdpa {err['trusted_err']:.4f})"
                except Exception as exc:  # noqa: BLE001
                    ok, msg = False, "ERROR " + common._short(exc).splitlines()[-1][:150]
                failures += not ok
                print(
                    f"{case['label']:22} {v.name:26} {msg}  ({time.time() - t0:.1f} s)", flush=True
                )
    print(f"selftest: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(common.main(__file__, sys.modules[__name__]))
