"""Reference for lesson 04, step 1: one query block against every key at once.

    O = softmax(Q Kᵀ · sm_scale) V        per batch b and head h

Every key of this step fits one tile (Sk <= BLOCK_N = 64), so a program
owning BLOCK_M query rows of one (batch, head) loads its q tile, the whole
of K and the whole of V once, and computes its rows of the softmax the way
lesson 02 does, from registers: the scores, their row max, exp of the
difference, the row sum, then one more matmul with V and one division.
Keys past Sk load as zeros and their scores are set to -inf, so they win
no max and add exp(-inf) = 0 to the sum. exp2 with log2(e) folded into
the scale (qk_scale) is exp by another name: the base cancels in p / l.

No online softmax yet: with all the scores of a row in one tile, the row
max is known before any exponential. Step 2 (attention_online) streams
the keys past in tiles and rescales.
"""

import math

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634  # exp(x) == exp2(x * LOG2E)
BLOCK_M = 32  # query rows a program
BLOCK_N = 64  # every key of this step: Sk <= BLOCK_N


@triton.jit
def attention_tile_kernel(
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
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < Sq
    key_ok = offs_n < Sk
    q = tl.load(q_base + offs_m[:, None] * stride_qs + offs_d[None, :] * stride_qd,
                mask=row_ok[:, None], other=0.0)
    k = tl.load(k_base + offs_n[:, None] * stride_ks + offs_d[None, :] * stride_kd,
                mask=key_ok[:, None], other=0.0)
    v = tl.load(v_base + offs_n[:, None] * stride_vs + offs_d[None, :] * stride_vd,
                mask=key_ok[:, None], other=0.0)

    s = tl.dot(q, tl.trans(k)) * qk_scale              # BLOCK_M × BLOCK_N, log2 units
    s = tl.where(key_ok[None, :], s, float("-inf"))    # keys past Sk: weight 0
    m = tl.max(s, 1)                                   # the row max, over every key
    p = tl.exp2(s - m[:, None])
    l = tl.sum(p, 1)  # noqa: E741 - the paper's name; >= 1, the max gives exp2(0)
    out = tl.dot(p.to(v.dtype), v) / l[:, None]
    tl.store(o_base + offs_m[:, None] * stride_os + offs_d[None, :] * stride_od,
             out.to(O.dtype.element_ty), mask=row_ok[:, None])


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              sm_scale: float | None = None) -> torch.Tensor:
    B, H, Sq, D = q.shape
    Sk = k.shape[2]
    assert Sk <= BLOCK_N, "this step's keys fit one tile"
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    o = torch.empty((B, H, Sq, D), dtype=q.dtype, device=q.device)
    grid = (triton.cdiv(Sq, BLOCK_M), B * H)
    attention_tile_kernel[grid](
        q, k, v, o,
        *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        H, Sq, Sk, sm_scale * LOG2E,
        HEAD_DIM=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
    )
    return o
