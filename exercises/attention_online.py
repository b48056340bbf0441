"""Lesson 04, step 2 of 3 — the online softmax across key tiles.

Write `attention(q, k, v, sm_scale=None)` again, for keys of any length:

    O = softmax(Q Kᵀ · sm_scale) V        for every batch b and head h

One program owns BLOCK_M query rows and streams the keys past in tiles of
BLOCK_N, keeping a running max, a running denominator and a running output
for each of its rows (the online softmax), and never the whole score row.

Contract (the grader checks all of it):
  * q is (B, H, Sq, D); k and v are (B, H, Sk, D), all contiguous, one
    dtype: fp32 or fp16; D is 16, 32, 64 or 128; Sq and Sk of any length,
    multiples of nothing. Not causal.
  * sm_scale defaults to 1 / sqrt(D).
  * Return a NEW (B, H, Sq, D) tensor in q's dtype. Don't write into q, k, v.
  * F.scaled_dot_product_attention, torch's softmax and torch's matmuls are
    off limits.

Grade: correctness only, on the CPU and on a GPU (no letter). The lesson's
exercise (`flash_attention`) adds causal masking (and skipping the tiles
past the diagonal), any strides, bf16 and speed.

The wrapper below is complete; the kernel is yours. Run
`gpulab check attention_online` (or press `c` in the lab), and `h` for a hint.
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
    H, Sq, Sk, qk_scale,  # qk_scale = sm_scale * log2(e): use tl.exp2
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    block = tl.program_id(0)  # which BLOCK_M rows of queries
    bh = tl.program_id(1)     # which (batch, head): b = bh // H, h = bh % H
    # TODO: base pointers of this (b, h) in Q, K, V and O, and my q tile
    #       (BLOCK_M × HEAD_DIM, rows past Sq masked), as in step 1.
    # TODO: running state in fp32: m_i = -inf, l_i = 0 (BLOCK_M each),
    #       acc = 0 (BLOCK_M × HEAD_DIM).
    # TODO: for start_n in range(0, Sk, BLOCK_N):
    #         load the k and v tiles (keys past Sk masked, zeros there);
    #         s = tl.dot(q, tl.trans(k)) * qk_scale, -inf where the key is past Sk;
    #         m_new = max(m_i, rowmax(s)); alpha = exp2(m_i - m_new);
    #         p = exp2(s - m_new[:, None]);
    #         l_i = l_i * alpha + rowsum(p);
    #         acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v); m_i = m_new
    # TODO: store acc / l_i[:, None] into my rows of O (masked past Sq), in O's dtype.
    pass


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
