"""Triton kernels for the microbenchmarks (imported only in the bench child).

Each is the simplest kernel that reaches its ceiling: one tile a program, no
persistence, so the hardware scheduler keeps every SM busy and many loads in
flight. The bench also times torch's own op for each and keeps the best, so a
kernel here that happens to be slower on some GPU never lowers a ceiling.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import triton
import triton.language as tl

if TYPE_CHECKING:
    from torch import Tensor


@triton.jit
def read_kernel(x_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    # Sum one tile and write one partial: BLOCK/threads loads in flight per
    # thread, and 4 bytes written per BLOCK*4 read (0.01% extra at BLOCK 8192).
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(partial_ptr + pid, tl.sum(x.to(tl.float32), axis=0))


@triton.jit
def copy_kernel(dst_ptr, src_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


@triton.jit
def fill_kernel(dst_ptr, value, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.full([BLOCK], 0.0, tl.float32) + value, mask=offs < n)


@triton.jit
def fma_kernel(x_ptr, out_ptr, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    # Four independent chains of x = x*a + b per element: the FMA latency (about
    # 4 cycles) is hidden by the chains and by the other warps, so the FP32
    # pipes stay full. Values converge to 1, so no overflow or denormals; the
    # result is stored so the compiler cannot drop the loop.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(x_ptr + offs)
    b = a + 1.0
    c = a * 0.5
    d = a - 1.0
    for _ in range(ITERS // 8):
        for _ in tl.static_range(8):
            a = a * 0.9999 + 0.0001
            b = b * 0.9999 + 0.0001
            c = c * 0.9999 + 0.0001
            d = d * 0.9999 + 0.0001
    tl.store(out_ptr + offs, a + b + c + d)


FMA_CHAINS = 4  # chains per element in fma_kernel: FLOPs = 2 * FMA_CHAINS * ITERS * n


def read(x: Tensor, partial: Tensor, block: int, num_warps: int) -> None:
    n = x.numel()
    read_kernel[(triton.cdiv(n, block),)](x, partial, n, BLOCK=block, num_warps=num_warps)


def copy(dst: Tensor, src: Tensor, block: int, num_warps: int) -> None:
    n = src.numel()
    copy_kernel[(triton.cdiv(n, block),)](dst, src, n, BLOCK=block, num_warps=num_warps)


def fill(dst: Tensor, value: float, block: int, num_warps: int) -> None:
    n = dst.numel()
    fill_kernel[(triton.cdiv(n, block),)](dst, value, n, BLOCK=block, num_warps=num_warps)


def fma(x: Tensor, out: Tensor, iters: int, block: int, num_warps: int = 4) -> None:
    fma_kernel[(x.numel() // block,)](x, out, ITERS=iters, BLOCK=block, num_warps=num_warps)
