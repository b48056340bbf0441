"""Reference for lesson 04, step 2: the online softmax across key tiles.

    O = softmax(Q Kᵀ · sm_scale) V        per batch b and head h, not causal

Keys of any length: a program owns BLOCK_M query rows of one (batch, head)
and streams the keys past in tiles of BLOCK_N, never holding more than one
BLOCK_M × BLOCK_N tile of scores. Per query row it keeps three running
values in fp32, all relative to the largest score seen so far:

    m   the running max
    l   the running denominator, sum of exp2(s - m)
    acc the running (unnormalised) output, sum of exp2(s - m) · v

When a tile raises the max from m to m', everything summed so far is
rescaled by alpha = exp2(m - m'); the division by l happens once, at the
end (lesson 04, "The online softmax, with numbers"). Every tile is masked
here, so keys past Sk in the last tile score -inf; the lesson's exercise
masks only the tile that needs it. Every row sees at least one real key in
its first tile, so m is finite from then on and m - m' never computes
-inf - (-inf).
"""

import math

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634  # exp(x) == exp2(x * LOG2E)
BLOCK_M = 32  # query rows a program
BLOCK_N = 16  # keys a tile: small for the CPU interpreter


@triton.jit
def attention_online_kernel(
    Q, K, V, O,  # noqa: E741 - the paper's names
    stride_qb, stride_qh, stride_qs, stride_qd,
    stride_kb, stride_kh, stride_ks, stride_kd,
    stride_vb, stride_vh, stride_vs, stride_vd,
    stride_ob, stride_oh, stride_os, stride_od,
    H, Sq, Sk, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    block = tl.program_id(0)
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
    q = tl.load(q_base + offs_m[:, None] * stride_qs + offs_d[None, :] * stride_qd,
                mask=row_ok[:, None], other=0.0)

    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)  # running row max (log2 units)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)                # running denominator
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)       # running numerator
    for start_n in range(0, Sk, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        key_ok = offs_n < Sk
        k = tl.load(k_base + offs_n[:, None] * stride_ks + offs_d[None, :] * stride_kd,
                    mask=key_ok[:, None], other=0.0)
        v = tl.load(v_base + offs_n[:, None] * stride_vs + offs_d[None, :] * stride_vd,
                    mask=key_ok[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        s = tl.where(key_ok[None, :], s, float("-inf"))  # exp2(-inf) = 0: no weight
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)  # rescales everything summed so far (0 on the first tile)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    out = acc / l_i[:, None]  # l_i >= 1: the row max itself contributes exp2(0)
    tl.store(o_base + offs_m[:, None] * stride_os + offs_d[None, :] * stride_od,
             out.to(O.dtype.element_ty), mask=row_ok[:, None])


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              sm_scale: float | None = None) -> torch.Tensor:
    B, H, Sq, D = q.shape
    Sk = k.shape[2]
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    o = torch.empty((B, H, Sq, D), dtype=q.dtype, device=q.device)
    grid = (triton.cdiv(Sq, BLOCK_M), B * H)
    attention_online_kernel[grid](
        q, k, v, o,
        *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        H, Sq, Sk, sm_scale * LOG2E,
        HEAD_DIM=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
    )
    return o
