"""Lesson 05 — fused RMSNorm + RoPE, forward and backward, in Triton.

Write `rmsnorm_rope(x, weight, cos, sin, eps=1e-6)`: RMSNorm over the last
dimension followed by rotary position embedding, in ONE forward kernel, and
its gradients in ONE backward kernel, joined by a torch.autograd.Function so
that `y.backward(dy)` works.

    n  = x * rsqrt(mean(x², -1) + eps) * weight        (in fp32)
    n1, n2 = n[..., :D/2], n[..., D/2:]
    y[..., :D/2] = n1 * cos[s] - n2 * sin[s]           (rotate-half RoPE,
    y[..., D/2:] = n2 * cos[s] + n1 * sin[s]            the NeoX convention)

Contract (the grader checks all of it):
  * x is (B, S, H, D), fp16, bf16 or fp32, on the GPU (or the CPU under the
    Triton interpreter). D is a power of two from 16 to 256. x has unit
    stride along D but may be a VIEW with any strides on B, S and H: q or k
    sliced out of a fused QKV projection, or a (B, H, S, D) tensor
    transposed. Use x.stride(0), x.stride(1), x.stride(2).
  * weight is (D,), in x's dtype or fp32. cos and sin are (S, D//2) fp32;
    row s belongs to the position s of x.
  * Return a NEW tensor y of x's shape and dtype (contiguous is fine). Don't
    write into any input.
  * Gradients: for x (in x's dtype) and weight (in weight's dtype); none for
    cos, sin or eps. dy may be non-contiguous.
  * The maths must happen in your Triton kernels. F.rms_norm, torch.rms_norm
    and nn.RMSNorm are off limits, and so is eager torch arithmetic on the
    graded path: the wrapper may only allocate, view, copy, and add up
    per-program dweight partials of shape (P, D) with one `.sum(0)`.

Run `gpulab check rope_rmsnorm` (or press `c` in the lab) to grade it, and
`h` for a hint.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_rope_fwd_kernel(x_ptr, w_ptr, cos_ptr, sin_ptr, y_ptr,
                            S, H, stride_xb, stride_xs, stride_xh, stride_cs, eps,
                            D: tl.constexpr, HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    # One program per position (b, s); it handles all H heads of that
    # position as a (BLOCK_H, HALF) tile for each half of D.
    pos = tl.program_id(0)          # pos = b * S + s
    b = pos // S
    s = pos % S
    h = tl.arange(0, BLOCK_H)       # head index; BLOCK_H >= H, so mask h < H
    j = tl.arange(0, HALF)          # column within a half
    # TODO: load the two halves x1 = x[b, s, h, j] and x2 = x[b, s, h, HALF + j]
    #       (masked, as fp32) using the strides.
    # TODO: rstd = rsqrt(mean of x² over the whole head (both halves) + eps).
    # TODO: n1, n2 = the halves times rstd times the matching halves of weight.
    # TODO: load cos[s, j] and sin[s, j]; rotate: y1 = n1*c - n2*sn, y2 = n2*c + n1*sn.
    # TODO: store y1, y2 into the contiguous output (row (pos * H + h), D apart),
    #       converted to y's dtype.
    pass


@triton.jit
def rmsnorm_rope_bwd_kernel(x_ptr, w_ptr, cos_ptr, sin_ptr, dy_ptr, dx_ptr, dw_part_ptr,
                            S, H, stride_xb, stride_xs, stride_xh,
                            stride_db, stride_ds, stride_dh, stride_cs, eps,
                            D: tl.constexpr, HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    pos = tl.program_id(0)
    b = pos // S
    s = pos % S
    h = tl.arange(0, BLOCK_H)
    j = tl.arange(0, HALF)
    # TODO: load x1, x2 and dy1, dy2 (fp32), cos and sin; recompute rstd and
    #       xhat = x * rstd.
    # TODO: undo the rotation: dn1 = dy1*c + dy2*sn, dn2 = dy2*c - dy1*sn.
    # TODO: this program's share of dweight: sum over its heads of dn * xhat,
    #       stored as row `pos` of dw_part (D fp32 values).
    # TODO: g = dn * weight;  dx = rstd * (g - xhat * mean(g * xhat) over D);
    #       store dx (contiguous, x's dtype).
    pass


class RMSNormRoPE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, cos, sin, eps):
        B, S, H, D = x.shape
        y = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)
        # TODO: launch rmsnorm_rope_fwd_kernel on a grid of (B * S,) programs,
        #       with BLOCK_H = triton.next_power_of_2(H), HALF = D // 2.
        ctx.save_for_backward(x, weight, cos, sin)
        ctx.eps = eps
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, cos, sin = ctx.saved_tensors
        B, S, H, D = x.shape
        dx = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)
        dw_part = torch.empty((B * S, D), dtype=torch.float32, device=x.device)
        # TODO: launch rmsnorm_rope_bwd_kernel on (B * S,) programs (dy's
        #       strides too), then reduce the partials:
        #       dw = dw_part.sum(0).to(weight.dtype)
        dw = torch.empty_like(weight)
        return dx, dw, None, None, None


def rmsnorm_rope(x: torch.Tensor, weight: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                 eps: float = 1e-6) -> torch.Tensor:
    return RMSNormRoPE.apply(x, weight, cos, sin, eps)
