"""Reference for lesson 05, step 4: the backward, as a plain function.

Given the forward's inputs and the upstream gradient dy:

    dn1 = dy1 · cos + dy2 · sin           RoPE's backward: the rotation by −sθ
    dn2 = dy2 · cos − dy1 · sin
    x̂ = x · rstd,  g = dn · weight        RMSNorm's, rstd recomputed from x
    dx = rstd · (g − x̂ · mean(g · x̂, over D))
    dweight[j] = Σ over every row of dn[j] · x̂[j]

One persistent kernel: P programs (4 an SM on a GPU, a few in the
interpreter), each walking its share of the (position, block of heads)
work items with a running D-vector of dweight in registers, writing dx as
it goes and its dweight partial once, as row pid of a (P, D) fp32 buffer.
The wrapper adds the P rows with one `.sum(0)`. No atomics: the result is
the same every run, and no two programs write one address.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_rope_bwd_kernel(x_ptr, w_ptr, cos_ptr, sin_ptr, dy_ptr, dx_ptr, dw_part_ptr,
                            n_pos, S, H, stride_xb, stride_xs, stride_xh,
                            stride_db, stride_ds, stride_dh, stride_cs, eps,
                            D: tl.constexpr, HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    pid = tl.program_id(0)
    j = tl.arange(0, HALF)
    w1 = tl.load(w_ptr + j).to(tl.float32)[None, :]
    w2 = tl.load(w_ptr + HALF + j).to(tl.float32)[None, :]
    dw1 = tl.zeros([HALF], dtype=tl.float32)   # this program's share of dweight
    dw2 = tl.zeros([HALF], dtype=tl.float32)
    n_hblk = tl.cdiv(H, BLOCK_H)
    for work in range(pid, n_pos * n_hblk, tl.num_programs(0)):
        pos = work // n_hblk
        b = (pos // S).to(tl.int64)
        s = (pos % S).to(tl.int64)
        h = (work % n_hblk) * BLOCK_H + tl.arange(0, BLOCK_H)
        mask = (h < H)[:, None]
        hh = h[:, None].to(tl.int64)

        x_row = x_ptr + b * stride_xb + s * stride_xs + hh * stride_xh
        dy_row = dy_ptr + b * stride_db + s * stride_ds + hh * stride_dh
        x1 = tl.load(x_row + j[None, :], mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(x_row + HALF + j[None, :], mask=mask, other=0.0).to(tl.float32)
        dy1 = tl.load(dy_row + j[None, :], mask=mask, other=0.0).to(tl.float32)
        dy2 = tl.load(dy_row + HALF + j[None, :], mask=mask, other=0.0).to(tl.float32)
        c = tl.load(cos_ptr + s * stride_cs + j)[None, :]
        sn = tl.load(sin_ptr + s * stride_cs + j)[None, :]

        # rstd again from x: x is loaded anyway, so recomputing costs no bytes.
        ms = (tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / D
        rstd = tl.rsqrt(ms + eps)[:, None]
        xh1 = x1 * rstd
        xh2 = x2 * rstd

        dn1 = dy1 * c + dy2 * sn
        dn2 = dy2 * c - dy1 * sn

        # Masked heads loaded as 0: they add 0 to dweight.
        dw1 += tl.sum(dn1 * xh1, axis=0)
        dw2 += tl.sum(dn2 * xh2, axis=0)

        g1 = dn1 * w1
        g2 = dn2 * w2
        m = ((tl.sum(g1 * xh1, axis=1) + tl.sum(g2 * xh2, axis=1)) / D)[:, None]
        dx_row = dx_ptr + (pos.to(tl.int64) * H + hh) * D           # dx is contiguous
        tl.store(dx_row + j[None, :], (rstd * (g1 - xh1 * m)).to(dx_ptr.dtype.element_ty),
                 mask=mask)
        tl.store(dx_row + HALF + j[None, :], (rstd * (g2 - xh2 * m)).to(dx_ptr.dtype.element_ty),
                 mask=mask)

    # Every program writes its row, work or none (a row of zeros then).
    tl.store(dw_part_ptr + pid * D + j, dw1)
    tl.store(dw_part_ptr + pid * D + HALF + j, dw2)


def _programs(x: torch.Tensor) -> int:
    """4 an SM on a GPU (528 on an H200); the interpreter runs programs one
    by one, so a few do."""
    if x.is_cuda:
        return 4 * torch.cuda.get_device_properties(x.device).multi_processor_count
    return 4


def rmsnorm_rope_backward(x: torch.Tensor, weight: torch.Tensor, cos: torch.Tensor,
                          sin: torch.Tensor, dy: torch.Tensor,
                          eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """(dx, dweight) of RoPE(RMSNorm(x) * weight) for the upstream gradient dy."""
    if dy.stride(-1) != 1:  # the kernel indexes D with unit stride
        dy = dy.contiguous()
    B, S, H, D = x.shape
    block_h = min(16, triton.next_power_of_2(H))
    P = min(_programs(x), B * S * triton.cdiv(H, block_h))
    dx = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)
    dw_part = torch.empty((P, D), dtype=torch.float32, device=x.device)
    rmsnorm_rope_bwd_kernel[(P,)](x, weight, cos, sin, dy, dx, dw_part, B * S, S, H,
                                  x.stride(0), x.stride(1), x.stride(2),
                                  dy.stride(0), dy.stride(1), dy.stride(2), cos.stride(0), eps,
                                  D=D, HALF=D // 2, BLOCK_H=block_h)
    return dx, dw_part.sum(0).to(weight.dtype)
