"""Reference for lesson 05, step 3: the fused forward.

    n = x · rsqrt(mean(x², over D) + eps) · weight        RMSNorm, in fp32
    y[..., :D/2] = n1 · cos[s] − n2 · sin[s]              RoPE, rotate-half
    y[..., D/2:] = n2 · cos[s] + n1 · sin[s]

Steps 1 and 2 in one kernel: one program per position (b, s) and block of
BLOCK_H heads (step 1's grid, step 1's strides), each head loaded once as
its two halves; the mean of squares adds both halves (step 2's reduction),
the weight is applied before the rotation, and n never leaves the
registers: x is read once and y written once, a third of the traffic of
the two kernels with n in fp32 between them (4 bytes an element against 12
in bf16). Step 4 writes the backward; the lesson's exercise (rope_rmsnorm)
joins the two through autograd.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_rope_fwd_kernel(x_ptr, w_ptr, cos_ptr, sin_ptr, y_ptr,
                            S, H, stride_xb, stride_xs, stride_xh, stride_cs, eps,
                            D: tl.constexpr, HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    pos = tl.program_id(0)               # b * S + s
    b = (pos // S).to(tl.int64)          # int64: offsets can pass 2**31 on big tensors
    s = (pos % S).to(tl.int64)
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    j = tl.arange(0, HALF)
    mask = (h < H)[:, None]              # the last block of heads may be partial

    x_row = x_ptr + b * stride_xb + s * stride_xs + h[:, None].to(tl.int64) * stride_xh
    x1 = tl.load(x_row + j[None, :], mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_row + HALF + j[None, :], mask=mask, other=0.0).to(tl.float32)

    # RMSNorm over the whole head (both halves), then the weight.
    rstd = tl.rsqrt((tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / D + eps)[:, None]
    n1 = x1 * rstd * tl.load(w_ptr + j).to(tl.float32)[None, :]
    n2 = x2 * rstd * tl.load(w_ptr + HALF + j).to(tl.float32)[None, :]

    # RoPE by the position's row of the tables, shared by every head.
    c = tl.load(cos_ptr + s * stride_cs + j)[None, :]
    sn = tl.load(sin_ptr + s * stride_cs + j)[None, :]
    y_row = y_ptr + (pos.to(tl.int64) * H + h[:, None]) * D    # y is contiguous
    tl.store(y_row + j[None, :], (n1 * c - n2 * sn).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(y_row + HALF + j[None, :], (n2 * c + n1 * sn).to(y_ptr.dtype.element_ty),
             mask=mask)


def rmsnorm_rope(x: torch.Tensor, weight: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                 eps: float = 1e-6) -> torch.Tensor:
    B, S, H, D = x.shape
    assert x.stride(3) == 1, "x must have unit stride along D"
    y = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)
    BLOCK_H = min(16, triton.next_power_of_2(H))
    rmsnorm_rope_fwd_kernel[(B * S, triton.cdiv(H, BLOCK_H))](
        x, weight, cos, sin, y, S, H, x.stride(0), x.stride(1), x.stride(2), cos.stride(0), eps,
        D=D, HALF=D // 2, BLOCK_H=BLOCK_H)
    return y
