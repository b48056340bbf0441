"""Lesson 05, step 3 of 5 — the fused forward.

Write `rmsnorm_rope(x, weight, cos, sin, eps=1e-6)`: RMSNorm over the last
dimension followed by rotary position embedding, steps 2 and 1 in ONE
Triton kernel, so that the normalised n never goes through memory.

    n  = x * rsqrt(mean(x², -1) + eps) * weight        (in fp32)
    n1, n2 = n[..., :D/2], n[..., D/2:]
    y[..., :D/2] = n1 * cos[s] - n2 * sin[s]           (rotate-half RoPE,
    y[..., D/2:] = n2 * cos[s] + n1 * sin[s]            the NeoX convention)

Contract (the grader checks all of it):
  * x is (B, S, H, D), fp16, bf16 or fp32, on the GPU (or the CPU under the
    Triton interpreter). D is a power of two from 16 to 256. x has unit
    stride along D but may be a VIEW with any strides on B, S and H (step 1).
  * weight is (D,), in x's dtype or fp32. cos and sin are (S, D//2) fp32;
    row s belongs to the position s of x.
  * Return a NEW tensor y of x's shape and dtype (contiguous is fine). Don't
    write into any input. F.rms_norm, torch.rms_norm and nn.RMSNorm are off
    limits, and so is eager torch arithmetic on the graded path.

Grade: correctness only, on the CPU and on a GPU (no letter). Two kernels
(step 2's, then step 1's on its output) with n kept in fp32 between them
pass this check too, which grades correctness; they move n through
memory, three times the fused kernel's traffic for 16-bit x (twice for
fp32 x), which the lesson's exercise (`rope_rmsnorm`) grades on a GPU.
(Rounded to x's dtype between them, n carries one rounding more than the
tolerances allow.) Step 4 writes the backward; the exercise joins the
two through a torch.autograd.Function.

Run `gpulab check rope_rmsnorm_fwd` (or press `c` in the lab) to grade it,
and `h` for a hint.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_rope_fwd_kernel(x_ptr, w_ptr, cos_ptr, sin_ptr, y_ptr,
                            S, H, stride_xb, stride_xs, stride_xh, stride_cs, eps,
                            D: tl.constexpr, HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    # One program per position (b, s) and block of BLOCK_H heads: a grid of
    # (B * S, cdiv(H, BLOCK_H)), as in step 1.
    pos = tl.program_id(0)          # pos = b * S + s
    b = pos // S
    s = pos % S
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)  # my heads; mask h < H
    j = tl.arange(0, HALF)          # column within a half
    # TODO: load the two halves x1 = x[b, s, h, j] and x2 = x[b, s, h, HALF + j]
    #       (masked, as fp32) using the strides, as in step 1.
    # TODO: rstd = rsqrt(mean of x² over the whole head (both halves) + eps).
    # TODO: n1, n2 = the halves times rstd times the matching halves of weight.
    # TODO: load cos[s, j] and sin[s, j]; rotate: y1 = n1*c - n2*sn, y2 = n2*c + n1*sn.
    # TODO: store y1, y2 into the contiguous output (row (pos * H + h), D apart),
    #       converted to y's dtype.
    pass


def rmsnorm_rope(x: torch.Tensor, weight: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                 eps: float = 1e-6) -> torch.Tensor:
    B, S, H, D = x.shape
    y = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)
    BLOCK_H = min(16, triton.next_power_of_2(H))
    # TODO: launch rmsnorm_rope_fwd_kernel on a grid of
    #       (B * S, triton.cdiv(H, BLOCK_H)) programs, with x's three strides,
    #       cos.stride(0), eps, D and HALF = D // 2.
    return y
