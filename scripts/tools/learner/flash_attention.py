"""A learner's FlashAttention-2 forward as lesson 04 teaches it: one
pointer kernel with one fixed tile a head dim, no autotuning, no TMA and no
FA3 path. The feedback bench (issue 32) checks it beside the reference."""

import math
import os

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634  # log2(e): exp(x) == exp2(x * LOG2E)
_INTERPRETER = os.environ.get("TRITON_INTERPRET") == "1"


def _tile(D: int, Sq: int, Sk: int) -> tuple[int, int, int, int]:
    """BLOCK_M, BLOCK_N, warps, stages (BLOCK_M a multiple of BLOCK_N)."""
    if _INTERPRETER:
        return 64, 32, 4, 1
    if Sq * Sk * D <= 512 * 512 * 64:
        return 64, 64, 4, 2
    return (128, 128, 8, 3) if D <= 64 else (128, 64, 8, 3)


@triton.jit
def _attend_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                  offs_m, offs_d, lo, hi, Sk, qk_scale,
                  BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    """Fold the key tiles [lo, hi) into the running (acc, l, m) of one query block."""
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k_ptrs = k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd
        v_ptrs = v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd
        if MASKED:
            in_bounds = offs_n < Sk
            k = tl.load(k_ptrs, mask=in_bounds[:, None], other=0.0)
            v = tl.load(v_ptrs, mask=in_bounds[:, None], other=0.0)
        else:
            k = tl.load(k_ptrs)
            v = tl.load(v_ptrs)

        # Scores in log2 units: s = q·kᵀ · sm_scale · log2(e).
        s = tl.dot(q, tl.trans(k)) * qk_scale
        if MASKED:
            keep = in_bounds[None, :]
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= offs_n[None, :])
            s = tl.where(keep, s, float("-inf"))  # exp2(-inf) = 0: masked keys vanish

        # The online softmax. Every row has seen at least one visible key by
        # now (key 0 is in the first tile every row processes), so m_new is
        # finite and m_i - m_new never computes -inf - (-inf).
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)          # rescales everything summed so far
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)   # P in the input dtype: tensor cores again
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def attention_kernel(
    Q, K, V, O,  # noqa: E741 - the paper's names
    stride_qb, stride_qh, stride_qs, stride_qd,
    stride_kb, stride_kh, stride_ks, stride_kd,
    stride_vb, stride_vh, stride_vs, stride_vd,
    stride_ob, stride_oh, stride_os, stride_od,
    H, Sq, Sk, qk_scale,
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    block = tl.program_id(0)
    if CAUSAL:
        # Longest first: query block i attends to i + 1 key blocks.
        block = tl.num_programs(0) - 1 - block
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)  # int64: b · stride can pass 2**31 on big batches
    h = (bh % H).to(tl.int64)
    q_base = Q + b * stride_qb + h * stride_qh
    k_base = K + b * stride_kb + h * stride_kh
    v_base = V + b * stride_vb + h * stride_vh
    o_base = O + b * stride_ob + h * stride_oh

    offs_m = block * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < Sq
    # Loaded once, reused against every key tile. Rows past Sq load zeros and
    # are never stored.
    q = tl.load(q_base + offs_m[:, None] * stride_qs + offs_d[None, :] * stride_qd,
                mask=row_ok[:, None], other=0.0)

    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)  # running row max (log2 units)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)                # running denominator
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)       # running numerator

    if CAUSAL:
        diag = block * BLOCK_M
        # Tiles wholly below the diagonal: every key is visible to every row.
        acc, l_i, m_i = _attend_tiles(acc, l_i, m_i, q, k_base, v_base,
                                      stride_ks, stride_kd, stride_vs, stride_vd,
                                      offs_m, offs_d, 0, diag, Sk, qk_scale,
                                      BLOCK_N, False, CAUSAL)
        # Tiles on the diagonal: mask j > i. Tiles past it are skipped.
        acc, l_i, m_i = _attend_tiles(acc, l_i, m_i, q, k_base, v_base,
                                      stride_ks, stride_kd, stride_vs, stride_vd,
                                      offs_m, offs_d, diag, tl.minimum(diag + BLOCK_M, Sk),
                                      Sk, qk_scale, BLOCK_N, True, CAUSAL)
    else:
        full = (Sk // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _attend_tiles(acc, l_i, m_i, q, k_base, v_base,
                                      stride_ks, stride_kd, stride_vs, stride_vd,
                                      offs_m, offs_d, 0, full, Sk, qk_scale,
                                      BLOCK_N, False, CAUSAL)
        # The partial last tile, if any (an empty range otherwise).
        acc, l_i, m_i = _attend_tiles(acc, l_i, m_i, q, k_base, v_base,
                                      stride_ks, stride_kd, stride_vs, stride_vd,
                                      offs_m, offs_d, full, Sk, Sk, qk_scale,
                                      BLOCK_N, True, CAUSAL)

    out = acc / l_i[:, None]  # l_i >= 1: the row max itself contributes exp2(0)
    o_ptrs = o_base + offs_m[:, None] * stride_os + offs_d[None, :] * stride_od
    tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=row_ok[:, None])


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              sm_scale: float | None = None) -> torch.Tensor:
    B, H, Sq, D = q.shape
    Sk = k.shape[2]
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    o = torch.empty((B, H, Sq, D), dtype=q.dtype, device=q.device)
    bm, bn, warps, stages = _tile(D, Sq, Sk)
    attention_kernel[(triton.cdiv(Sq, bm), B * H)](
        q, k, v, o,
        *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        H, Sq, Sk, sm_scale * LOG2E,
        HEAD_DIM=D, CAUSAL=bool(causal), BLOCK_M=bm, BLOCK_N=bn,
        num_warps=warps, num_stages=stages,
    )
    return o
