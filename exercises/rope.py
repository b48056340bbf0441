"""Lesson 05, step 1 of 5 — RoPE alone.

Write `rope(x, cos, sin)`: the rotary position embedding of every head of
x, in the rotate-half (NeoX) convention, computed by a Triton kernel.

    x1, x2 = x[..., :D/2], x[..., D/2:]
    y[..., :D/2] = x1 * cos[s] - x2 * sin[s]
    y[..., D/2:] = x2 * cos[s] + x1 * sin[s]

Contract (the grader checks all of it):
  * x is (B, S, H, D), fp16, bf16 or fp32, on the GPU (or the CPU under the
    Triton interpreter). D is a power of two from 16 to 256. x has unit
    stride along D but may be a VIEW with any strides on B, S and H: k
    sliced out of a fused QKV projection, or a (B, H, S, D) tensor
    transposed. Use x.stride(0), x.stride(1), x.stride(2).
  * cos and sin are (S, D//2) fp32; row s belongs to the position s of x
    (the same rows for every b and every head).
  * Return a NEW tensor y of x's shape and dtype (contiguous is fine). Don't
    write into any input. The maths must happen in your Triton kernel: eager
    torch arithmetic on the graded path is refused.

Grade: correctness only, on the CPU and on a GPU (no letter): this step
teaches the two halves, the position's row of the tables and the strides.
Step 2 (`rmsnorm`) is the other half of the lesson, step 3
(`rope_rmsnorm_fwd`) fuses the two, and the lesson's exercise
(`rope_rmsnorm`) adds the backward and speed.

Run `gpulab check rope` (or press `c` in the lab) to grade it, and `h` for
a hint.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def rope_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr,
                S, H, stride_xb, stride_xs, stride_xh, stride_cs,
                HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    # One program per position (b, s) and block of BLOCK_H heads: a grid of
    # (B * S, cdiv(H, BLOCK_H)). The block's heads share one row of cos/sin.
    pos = tl.program_id(0)          # pos = b * S + s
    b = pos // S
    s = pos % S
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)  # my heads; mask h < H
    j = tl.arange(0, HALF)          # column within a half
    # TODO: load the two halves x1 = x[b, s, h, j] and x2 = x[b, s, h, HALF + j]
    #       (masked, as fp32) using the strides.
    # TODO: load cos[s, j] and sin[s, j] (row s of the tables, stride_cs apart).
    # TODO: rotate: y1 = x1*c - x2*sn, y2 = x2*c + x1*sn.
    # TODO: store y1, y2 into the contiguous output (row (pos * H + h), 2 * HALF
    #       apart), converted to y's dtype.
    pass


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    B, S, H, D = x.shape
    y = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)
    BLOCK_H = min(16, triton.next_power_of_2(H))
    # TODO: launch rope_kernel on a grid of (B * S, triton.cdiv(H, BLOCK_H))
    #       programs, with x's three strides, cos.stride(0) and HALF = D // 2.
    return y
