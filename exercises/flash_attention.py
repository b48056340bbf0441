"""Lesson 04 — FlashAttention-2 forward in Triton.

Write `attention(q, k, v, causal=False, sm_scale=None)`:

    O = softmax(Q Kᵀ · sm_scale) V        for every batch b and head h

without ever materialising the Sq × Sk score matrix: one program owns
BLOCK_M query rows, streams tiles of K and V past them, and keeps a running
max, a running denominator and a running output (the online softmax).

Contract (the grader checks all of it):
  * q is (B, H, Sq, D); k and v are (B, H, Sk, D); D is 16, 32, 64 or 128;
    fp16 or bf16 (fp32 in the CPU checks). Any strides: use all four.
  * sm_scale defaults to 1 / sqrt(D).
  * causal=True needs Sq == Sk: query i sees keys j <= i only.
  * Return a NEW (B, H, Sq, D) tensor in q's dtype. Don't write into q, k, v.
  * The work must happen in your kernel: F.scaled_dot_product_attention,
    torch's softmax and torch's matmuls are off limits.

Grade (on a GPU): your speedup over torch's SDPA flash backend timed in
the same run, geometric mean over eight bf16 shapes: A >= 1.0x, B >= 0.85x,
C >= 0.70x, D below. On a CPU only correctness is graded.

The wrapper below is complete for correctness; the kernel is yours. Its
fixed 32 x 16 tiles suit the CPU interpreter, not a GPU: for a good GPU
grade, autotune BLOCK_M, BLOCK_N and num_warps (lesson 04, "Autotuning"),
keeping one small config for the interpreter. Run
`gpulab check flash_attention` (or press `c` in the lab), and `h` for a hint.
"""

import math

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634  # exp(x) == exp2(x * LOG2E)


@triton.jit
def attention_kernel(
    Q, K, V, O,  # noqa: E741 - the paper's names
    stride_qb, stride_qh, stride_qs, stride_qd,
    stride_kb, stride_kh, stride_ks, stride_kd,
    stride_vb, stride_vh, stride_vs, stride_vd,
    stride_ob, stride_oh, stride_os, stride_od,
    H, Sq, Sk, qk_scale,  # qk_scale = sm_scale * log2(e): use tl.exp2
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    block = tl.program_id(0)  # which BLOCK_M rows of queries
    bh = tl.program_id(1)     # which (batch, head): b = bh // H, h = bh % H
    # TODO: base pointers of this (b, h) in Q, K, V and O (use the b and h strides).
    # TODO: offs_m (my query rows), offs_d = tl.arange(0, HEAD_DIM); load my
    #       q tile (BLOCK_M × HEAD_DIM), masking rows past Sq.
    # TODO: running state in fp32: m_i = -inf, l_i = 0 (BLOCK_M each),
    #       acc = 0 (BLOCK_M × HEAD_DIM).
    # TODO: loop over key tiles start_n = 0, BLOCK_N, ... (when causal, stop
    #       after the tile holding key (block + 1) * BLOCK_M - 1):
    #         load k and v tiles (BLOCK_N × HEAD_DIM), masking keys past Sk;
    #         s = tl.dot(q, tl.trans(k)) * qk_scale; set s to -inf where the
    #         key is past Sk, or (causal) where key > query;
    #         m_new = max(m_i, rowmax(s)); alpha = exp2(m_i - m_new);
    #         p = exp2(s - m_new[:, None]);
    #         l_i = l_i * alpha + rowsum(p);
    #         acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v); m_i = m_new
    # TODO: store acc / l_i[:, None] into my rows of O (masked past Sq), in O's dtype.
    pass


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              sm_scale: float | None = None) -> torch.Tensor:
    B, H, Sq, D = q.shape
    Sk = k.shape[2]
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    o = torch.empty((B, H, Sq, D), dtype=q.dtype, device=q.device)
    BLOCK_M, BLOCK_N = 32, 16  # small tiles for the CPU interpreter; see the lesson for GPUs
    grid = (triton.cdiv(Sq, BLOCK_M), B * H)
    attention_kernel[grid](
        q, k, v, o,
        *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        H, Sq, Sk, sm_scale * LOG2E,
        HEAD_DIM=D, CAUSAL=causal, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
    )
    return o
