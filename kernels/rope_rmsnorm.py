"""Reference solution for lesson 05: fused RMSNorm + RoPE, forward and backward.

    n = x * rsqrt(mean(x², -1) + eps) * weight            (RMSNorm, fp32 maths)
    y[..., :D/2] = n1 * cos - n2 * sin                    (RoPE, rotate-half /
    y[..., D/2:] = n2 * cos + n1 * sin                     NeoX convention)

for x of shape (B, S, H, D): the QK-norm of recent LLMs, applied per head just
before attention. Both halves of the operation are elementwise apart from one
reduction over D, so the whole thing is memory-bound: the fused kernel reads x
once and writes y once, and everything in between lives in registers.

Design:
  * One program per (b, s) position and block of BLOCK_H heads. All the heads
    of a position share one row of cos/sin, which is loaded once per program
    and broadcast; x and y rows are D contiguous elements.
  * x is loaded as its two halves, x[:, :D/2] and x[:, D/2:]. Rotate-half RoPE
    mixes element j with element j + D/2, so holding the halves in two tiles
    makes the rotation plain elementwise arithmetic, with no shuffle.
  * x may be a strided view (q or k from a fused QKV projection): the kernel
    takes the B, S and H strides and only needs unit stride along D. The
    output is a new contiguous tensor.
  * The backward recomputes rstd instead of saving it: it has to read x anyway
    (for dx and dweight), and the sum of squares over D is a few FLOPs per
    element on data already in registers, so saving rstd would only add a
    write in the forward and a read in the backward.
  * dweight is a sum over all B*S*H rows. Each program of the backward keeps
    a running partial sum in registers while it walks over its share of the
    rows (a persistent grid of a few programs per SM), writes one partial row,
    and a tiny second kernel adds the partials. Atomics would make every one
    of thousands of programs hit the same D addresses (serialised in L2) and
    the result would change from run to run with the order of the additions;
    the two-stage sum is deterministic and its second stage reads a few
    hundred KB.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_rope_fwd(x_ptr, w_ptr, cos_ptr, sin_ptr, y_ptr,
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

    # RMSNorm over the whole head (both halves), in fp32 whatever x's dtype.
    ms = (tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / D
    rstd = tl.rsqrt(ms + eps)[:, None]
    w1 = tl.load(w_ptr + j).to(tl.float32)[None, :]
    w2 = tl.load(w_ptr + HALF + j).to(tl.float32)[None, :]
    n1 = x1 * rstd * w1
    n2 = x2 * rstd * w2

    # RoPE: the position s picks the cos/sin row, shared by every head.
    c = tl.load(cos_ptr + s * stride_cs + j)[None, :]
    sn = tl.load(sin_ptr + s * stride_cs + j)[None, :]
    y1 = n1 * c - n2 * sn
    y2 = n2 * c + n1 * sn

    y_row = y_ptr + (pos.to(tl.int64) * H + h[:, None]) * D    # y is contiguous
    tl.store(y_row + j[None, :], y1.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(y_row + HALF + j[None, :], y2.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rmsnorm_rope_bwd(x_ptr, w_ptr, cos_ptr, sin_ptr, dy_ptr, dx_ptr, dw_part_ptr,
                      n_pos, S, H,
                      stride_xb, stride_xs, stride_xh, stride_db, stride_ds, stride_dh,
                      stride_cs, eps,
                      D: tl.constexpr, HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    pid = tl.program_id(0)
    j = tl.arange(0, HALF)
    w1 = tl.load(w_ptr + j).to(tl.float32)[None, :]
    w2 = tl.load(w_ptr + HALF + j).to(tl.float32)[None, :]
    dw1 = tl.zeros([HALF], dtype=tl.float32)   # this program's share of dweight
    dw2 = tl.zeros([HALF], dtype=tl.float32)

    # Persistent grid: a work item is one position and block of heads; program
    # pid takes items pid, pid + P, pid + 2P, ... (P programs in all).
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

        # Recompute rstd (cheaper than saving it: x is loaded anyway).
        ms = (tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / D
        rstd = tl.rsqrt(ms + eps)[:, None]
        xh1 = x1 * rstd                  # x-hat: the normalised x before the weight
        xh2 = x2 * rstd

        # RoPE is a rotation by angle theta in each (j, j + D/2) plane; its
        # backward is the rotation by -theta (the transpose).
        dn1 = dy1 * c + dy2 * sn
        dn2 = dy2 * c - dy1 * sn

        # dweight[j] = sum over rows of dn[j] * xhat[j]; masked rows add 0.
        dw1 += tl.sum(dn1 * xh1, axis=0)
        dw2 += tl.sum(dn2 * xh2, axis=0)

        # dx = rstd * (g - xhat * mean(g * xhat)), with g = dn * weight.
        g1 = dn1 * w1
        g2 = dn2 * w2
        m = ((tl.sum(g1 * xh1, axis=1) + tl.sum(g2 * xh2, axis=1)) / D)[:, None]
        dx1 = rstd * (g1 - xh1 * m)
        dx2 = rstd * (g2 - xh2 * m)
        dx_row = dx_ptr + (pos.to(tl.int64) * H + hh) * D           # dx is contiguous
        tl.store(dx_row + j[None, :], dx1.to(dx_ptr.dtype.element_ty), mask=mask)
        tl.store(dx_row + HALF + j[None, :], dx2.to(dx_ptr.dtype.element_ty), mask=mask)

    tl.store(dw_part_ptr + pid * D + j, dw1)
    tl.store(dw_part_ptr + pid * D + HALF + j, dw2)


@triton.jit
def _sum_rows(part_ptr, out_ptr, P, D: tl.constexpr, BLOCK_P: tl.constexpr):
    # dweight = the column sums of the (P, D) partials, in a fixed order.
    j = tl.arange(0, D)
    acc = tl.zeros([D], dtype=tl.float32)
    for p0 in range(0, P, BLOCK_P):
        p = p0 + tl.arange(0, BLOCK_P)
        tile = tl.load(part_ptr + p[:, None] * D + j[None, :], mask=(p < P)[:, None], other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(out_ptr + j, acc.to(out_ptr.dtype.element_ty))


# --- choosing the tile -------------------------------------------------------
# A program's tile is BLOCK_H heads x D. It has to put enough bytes in flight
# to cover the memory latency (an H200 needs about 4.8 TB/s x ~0.6 µs = 3 MB
# in flight, some 20 KB per SM) without spilling registers. In the
# interpreter, and for small problems, a fixed rule of thumb is used; large
# problems on a GPU are autotuned over tiles of 1K, 2K and 4K elements and 4
# or 8 warps (the configurations below), once per (H, D, dtype).
AUTOTUNE_MIN_ELEMENTS = 1 << 22


def _block_h(H: int, D: int, elements: int = 2048) -> int:
    # About `elements` elements a program (4 KB of bf16 x), never more heads than H.
    return max(1, min(triton.next_power_of_2(H), elements // D))


def _num_warps(block_h: int, D: int) -> int:
    return 4 if block_h * D >= 2048 else (2 if block_h * D >= 512 else 1)


def _configs() -> list:
    return [triton.Config({"ELEMS": e}, num_warps=w) for e in (1024, 2048, 4096) for w in (4, 8)]


def _prune(configs, named_args, **kwargs):
    # Express each config's tile as BLOCK_H for this (H, D); drop duplicates
    # (when H is small, several tile sizes collapse onto BLOCK_H = H).
    H, D = named_args["H"], kwargs["D"]
    seen, out = set(), []
    for c in configs:
        bh = _block_h(H, D, c.kwargs["ELEMS"])
        if (bh, c.num_warps) not in seen:
            seen.add((bh, c.num_warps))
            out.append(triton.Config({"BLOCK_H": bh}, num_warps=c.num_warps))
    return out


_fwd_tuned = triton.autotune(_configs(), key=["H", "D"],
                             prune_configs_by={"early_config_prune": _prune})(_rmsnorm_rope_fwd)
_bwd_tuned = triton.autotune(_configs(), key=["H", "D"],
                             prune_configs_by={"early_config_prune": _prune})(_rmsnorm_rope_bwd)


def _tuned(x: torch.Tensor) -> bool:
    return x.is_cuda and x.numel() >= AUTOTUNE_MIN_ELEMENTS


def _unit_last_stride(t: torch.Tensor) -> torch.Tensor:
    # The kernels index D with unit stride; anything else gets one copy.
    return t if t.stride(-1) == 1 else t.contiguous()


class _RMSNormRoPE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, cos, sin, eps):
        x = _unit_last_stride(x)
        B, S, H, D = x.shape
        y = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)
        args = (x, weight, cos, sin, y, S, H, x.stride(0), x.stride(1), x.stride(2),
                cos.stride(0), eps)
        if _tuned(x):
            grid = lambda meta: (B * S, triton.cdiv(H, meta["BLOCK_H"]))  # noqa: E731
            _fwd_tuned[grid](*args, D=D, HALF=D // 2)
        else:
            bh = _block_h(H, D)
            _rmsnorm_rope_fwd[(B * S, triton.cdiv(H, bh))](*args, D=D, HALF=D // 2, BLOCK_H=bh,
                                                           num_warps=_num_warps(bh, D))
        ctx.save_for_backward(x, weight, cos, sin)
        ctx.eps = eps
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, cos, sin = ctx.saved_tensors
        dy = _unit_last_stride(dy)
        B, S, H, D = x.shape
        # A persistent grid: a few programs per SM, each looping over many
        # work items, so there are few dweight partials to add up. Programs
        # left without work still write their (zero) partial row.
        if x.is_cuda:
            sms = torch.cuda.get_device_properties(x.device).multi_processor_count
            programs = min(B * S * H, 4 * sms)
        else:  # the interpreter runs programs one by one: any small number will do
            programs = min(B * S * H, 4)
        dx = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)
        dw_part = torch.empty((programs, D), dtype=torch.float32, device=x.device)
        args = (x, weight, cos, sin, dy, dx, dw_part, B * S, S, H,
                x.stride(0), x.stride(1), x.stride(2), dy.stride(0), dy.stride(1), dy.stride(2),
                cos.stride(0), ctx.eps)
        if _tuned(x):
            _bwd_tuned[(programs,)](*args, D=D, HALF=D // 2)
        else:
            bh = _block_h(H, D)
            _rmsnorm_rope_bwd[(programs,)](*args, D=D, HALF=D // 2, BLOCK_H=bh,
                                           num_warps=_num_warps(bh, D))
        dw = torch.empty_like(weight)
        _sum_rows[(1,)](dw_part, dw, programs, D=D, BLOCK_P=32)
        return dx, dw, None, None, None


def rmsnorm_rope(x: torch.Tensor, weight: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                 eps: float = 1e-6) -> torch.Tensor:
    """RoPE(RMSNorm(x) * weight) for x of shape (B, S, H, D); differentiable in x and weight."""
    return _RMSNormRoPE.apply(x, weight, cos, sin, eps)
