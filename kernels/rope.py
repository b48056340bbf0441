"""Reference for lesson 05, step 1: RoPE alone.

    y[..., :D/2] = x1 · cos[s] − x2 · sin[s]        rotate-half RoPE
    y[..., D/2:] = x2 · cos[s] + x1 · sin[s]        (the NeoX form)

for x of shape (B, S, H, D), x1 and x2 its two halves along D. One program
per position (b, s) and block of BLOCK_H heads: the heads of a position
share its row of cos and sin, loaded once. x is loaded as its two halves,
so the rotation that pairs element j with j + D/2 is elementwise
arithmetic on two (BLOCK_H, D/2) tiles. x may be a view with any strides
on B, S and H (k sliced out of a fused QKV projection): each head's row
starts at b·stride_b + s·stride_s + h·stride_h and only D is contiguous.
The output is a new contiguous tensor. The maths is in fp32.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def rope_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr,
                S, H, stride_xb, stride_xs, stride_xh, stride_cs,
                HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    pos = tl.program_id(0)               # b * S + s
    b = (pos // S).to(tl.int64)          # int64: offsets can pass 2**31 on big tensors
    s = (pos % S).to(tl.int64)
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    j = tl.arange(0, HALF)
    mask = (h < H)[:, None]              # the last block of heads may be partial

    x_row = x_ptr + b * stride_xb + s * stride_xs + h[:, None].to(tl.int64) * stride_xh
    x1 = tl.load(x_row + j[None, :], mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_row + HALF + j[None, :], mask=mask, other=0.0).to(tl.float32)
    c = tl.load(cos_ptr + s * stride_cs + j)[None, :]   # the position's row: s, not b·S + s
    sn = tl.load(sin_ptr + s * stride_cs + j)[None, :]

    y_row = y_ptr + (pos.to(tl.int64) * H + h[:, None]) * (2 * HALF)  # y is contiguous
    tl.store(y_row + j[None, :], (x1 * c - x2 * sn).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(y_row + HALF + j[None, :], (x2 * c + x1 * sn).to(y_ptr.dtype.element_ty),
             mask=mask)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    B, S, H, D = x.shape
    assert x.stride(3) == 1, "x must have unit stride along D"
    y = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)
    BLOCK_H = min(16, triton.next_power_of_2(H))
    grid = (B * S, triton.cdiv(H, BLOCK_H))
    rope_kernel[grid](x, cos, sin, y, S, H, x.stride(0), x.stride(1), x.stride(2),
                      cos.stride(0), HALF=D // 2, BLOCK_H=BLOCK_H)
    return y
