"""Lesson 05, step 4 of 5 — the backward.

Write `rmsnorm_rope_backward(x, weight, cos, sin, dy, eps=1e-6)`: the
gradients of step 3's forward for an upstream gradient dy, returned as
`(dx, dweight)`. No autograd yet: this step is the backward's maths and
the sum of dweight over every row; the lesson's exercise wires the two
kernels to autograd.

    dn1 = dy1 * cos + dy2 * sin          (RoPE's backward: rotate by -angle)
    dn2 = dy2 * cos - dy1 * sin
    xhat = x * rstd,  g = dn * weight    (rstd recomputed from x)
    dx = rstd * (g - xhat * mean(g * xhat, over D))
    dweight[j] = sum over all B*S*H rows of dn[j] * xhat[j]

Contract (the grader checks all of it):
  * x is (B, S, H, D) as in step 3 (fp16, bf16 or fp32, unit stride along D,
    any strides on B, S, H); weight (D,) in x's dtype or fp32; cos and sin
    (S, D//2) fp32. dy has x's shape and dtype and may be a non-contiguous
    view (use its strides too).
  * Return (dx, dweight): dx a NEW tensor of x's shape and dtype (contiguous
    is fine), dweight of shape (D,) in weight's dtype. Don't write into any
    input.
  * The maths happens in your Triton kernel. The wrapper may only allocate,
    view, copy, and add up the (P, D) dweight partials with one `.sum(0)`.

Grade: correctness only, on the CPU and on a GPU (no letter), against
float64 autograd of the unfused forward.

Run `gpulab check rope_rmsnorm_bwd` (or press `c` in the lab) to grade it,
and `h` for a hint.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_rope_bwd_kernel(x_ptr, w_ptr, cos_ptr, sin_ptr, dy_ptr, dx_ptr, dw_part_ptr,
                            n_pos, S, H, stride_xb, stride_xs, stride_xh,
                            stride_db, stride_ds, stride_dh, stride_cs, eps,
                            D: tl.constexpr, HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    # A persistent grid of P programs (a few per SM). A work item is one
    # position and block of heads; program pid takes items pid, pid + P,
    # pid + 2P, ..., keeps its share of dweight in registers across them, and
    # writes it once, as row pid of the (P, D) fp32 buffer dw_part.
    pid = tl.program_id(0)
    j = tl.arange(0, HALF)
    n_hblk = tl.cdiv(H, BLOCK_H)
    # TODO: dw1, dw2 = fp32 zeros of HALF each: this program's running dweight.
    for work in range(pid, n_pos * n_hblk, tl.num_programs(0)):
        pos = work // n_hblk
        b = pos // S
        s = pos % S
        h = (work % n_hblk) * BLOCK_H + tl.arange(0, BLOCK_H)
        # TODO: load x1, x2 and dy1, dy2 (fp32, masked h < H, each with its own
        #       strides), cos and sin; recompute rstd and xhat = x * rstd.
        # TODO: undo the rotation: dn1 = dy1*c + dy2*sn, dn2 = dy2*c - dy1*sn.
        # TODO: add this item's sum over its heads of dn * xhat to dw1, dw2.
        # TODO: g = dn * weight;  dx = rstd * (g - xhat * mean(g * xhat) over D);
        #       store dx (contiguous, x's dtype).
        pass
    # TODO: store dw1, dw2 as row pid of dw_part (D fp32 values).
    pass


def _programs(x: torch.Tensor) -> int:
    """How many programs the persistent backward runs: 4 an SM on a GPU (528
    on an H200); the interpreter runs programs one by one, so a few do."""
    if x.is_cuda:
        return 4 * torch.cuda.get_device_properties(x.device).multi_processor_count
    return 4


def rmsnorm_rope_backward(x, weight, cos, sin, dy, eps=1e-6):
    B, S, H, D = x.shape
    BLOCK_H = min(16, triton.next_power_of_2(H))
    P = _programs(x)
    dx = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)
    dw_part = torch.empty((P, D), dtype=torch.float32, device=x.device)
    # TODO: launch rmsnorm_rope_bwd_kernel on (P,) programs with n_pos = B * S
    #       (dy's strides too), then add up the partials:
    #       dweight = dw_part.sum(0).to(weight.dtype)
    dweight = torch.empty_like(weight)
    return dx, dweight
