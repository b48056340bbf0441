"""Lesson 04, step 1 of 3 — one query block against every key at once.

Write `attention(q, k, v, sm_scale=None)`:

    O = softmax(Q Kᵀ · sm_scale) V        for every batch b and head h

for sequences of keys short enough that all of them fit one tile: one
program owns BLOCK_M query rows of one (batch, head), loads the whole of K
and V once and computes its rows' softmax in registers, as lesson 02 did.

Contract (the grader checks all of it):
  * q is (B, H, Sq, D); k and v are (B, H, Sk, D), all contiguous, one
    dtype: fp32 or fp16; D is 16, 32, 64 or 128; Sk from 1 to 64 (BLOCK_N
    below), Sq of any length. Not causal.
  * sm_scale defaults to 1 / sqrt(D).
  * Return a NEW (B, H, Sq, D) tensor in q's dtype. Don't write into q, k, v.
  * F.scaled_dot_product_attention, torch's softmax and torch's matmuls are
    off limits.

Grade: correctness only, on the CPU and on a GPU (no letter): this step
teaches the two matmuls around a softmax in one kernel. Step 2
(`attention_online`) streams keys of any length past in tiles with the
online softmax, and the lesson's exercise (`flash_attention`) adds causal
masking, any strides, bf16 and speed.

The wrapper below is complete; the kernel is yours. Run
`gpulab check attention_tile` (or press `c` in the lab), and `h` for a hint.
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
    H, Sq, Sk, qk_scale,  # qk_scale = sm_scale * log2(e): use tl.exp2
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    block = tl.program_id(0)  # which BLOCK_M rows of queries
    bh = tl.program_id(1)     # which (batch, head): b = bh // H, h = bh % H
    # TODO: base pointers of this (b, h) in Q, K, V and O (the b and h strides).
    # TODO: offs_m (my query rows), offs_n = tl.arange(0, BLOCK_N) (every
    #       key), offs_d = tl.arange(0, HEAD_DIM); load my q tile
    #       (BLOCK_M × HEAD_DIM, rows past Sq masked) and the k and v tiles
    #       (BLOCK_N × HEAD_DIM, keys past Sk masked), zeros in the masked lanes.
    # TODO: s = tl.dot(q, tl.trans(k)) * qk_scale; -inf where the key is past Sk.
    # TODO: the softmax of each row of s: subtract the row max, tl.exp2, and
    #       divide by the row sum (or divide the output once, after the matmul).
    # TODO: out = tl.dot(p.to(v.dtype), v) (divided by the row sum); store it
    #       into my rows of O (masked past Sq), in O's dtype.
    pass


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
