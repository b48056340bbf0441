"""Reference for lesson 03, step 1: one tile.

All of C is one BLOCK × BLOCK tile and all of K one step, so a single
program loads the A tile (rows × k) and the B tile (k × columns) once,
multiplies them with tl.dot into an fp32 accumulator and stores the tile.
The pointers come from the strides; the loads are masked to the real M, N
and K and fill the lanes past them with zeros, which add nothing to the dot
product; the store is masked to the real rows and columns.
"""

import torch
import triton
import triton.language as tl

BLOCK = 64  # the largest M, N and K of this step: one tile, one K step


@triton.jit
def matmul_tile_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
    b = tl.load(b_ptrs, mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
    acc = tl.dot(a, b)  # fp32 accumulation
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    _, N = b.shape
    assert max(M, N, K) <= BLOCK, "this step's matrices are one tile"
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    matmul_tile_kernel[(1,)](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=BLOCK, BLOCK_N=BLOCK, BLOCK_K=BLOCK,
    )
    return c
