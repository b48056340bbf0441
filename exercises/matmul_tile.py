"""Lesson 03, step 1 of 3 — one tile.

Write `matmul(a, b)`: C = A @ B for matrices small enough that all of C is
one tile and all of K one step, computed by a single Triton program.

Contract (the grader checks all of it):
  * a is (M, K) and b is (K, N), contiguous, one dtype: fp32 or fp16, with
    M, N and K from 1 to 64 (the block sizes below), on the GPU (or the CPU
    under the Triton interpreter). They need not be multiples of anything.
  * Accumulate in fp32; return a NEW (M, N) tensor in a's dtype. Don't write
    into a or b. torch.matmul, `@`, mm, einsum, F.linear are off limits.

Grade: correctness only, on the CPU and on a GPU (no letter): this step
teaches tile pointers from strides, masked loads that fill with zeros and
tl.dot. Step 2 (`matmul_kloop`) adds many tiles and the K loop, and the
lesson's exercise (`matmul`) any strides, the grouped order and speed.

Run `gpulab check matmul_tile` (or press `c` in the lab) to grade it, and
`h` for a hint.
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
    # TODO: the offsets of C's rows (BLOCK_M), its columns (BLOCK_N) and of K
    #       (BLOCK_K), and the pointers of the A tile (rows × k) and of the
    #       B tile (k × columns), built from the strides.
    # TODO: load both tiles masked to the real M, N and K, with zeros in the
    #       lanes past them (a zero adds nothing to a dot product).
    # TODO: acc = tl.dot(a, b) (fp32), then store it in c's dtype, masked to
    #       rows below M and columns below N.
    pass


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    _, N = b.shape
    assert max(M, N, K) <= BLOCK, "this step's matrices are one tile"
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    # TODO: launch ONE program:
    #   matmul_tile_kernel[(1,)](a, b, c, M, N, K, a.stride(0), a.stride(1), ...,
    #                            BLOCK_M=BLOCK, BLOCK_N=BLOCK, BLOCK_K=BLOCK)
    return c
