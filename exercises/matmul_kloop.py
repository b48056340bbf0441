"""Lesson 03, step 2 of 3 — every tile, and the K loop.

Write `matmul(a, b)` for matrices of any size: one program per
BLOCK_M × BLOCK_N tile of C, each walking K in steps of BLOCK_K.

Contract (the grader checks all of it):
  * a is (M, K) and b is (K, N), contiguous, one dtype: fp32 or fp16; M, N
    and K of any size, multiples of nothing, on the GPU (or the CPU under
    the Triton interpreter).
  * Accumulate in fp32; return a NEW (M, N) tensor in a's dtype. Don't write
    into a or b. torch.matmul, `@`, mm, einsum, F.linear are off limits.

Grade: correctness only, on the CPU and on a GPU (no letter). The lesson's
exercise (`matmul`) adds any strides (transposed views, padded rows), bf16,
the grouped program order and speed.

Run `gpulab check matmul_kloop` (or press `c` in the lab) to grade it, and
`h` for a hint.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kloop_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(0)
    # TODO: my tile, in row-major order:
    #         pid_m = pid // tl.cdiv(N, BLOCK_N),  pid_n = pid % tl.cdiv(N, BLOCK_N)
    # TODO: the offsets of my rows and columns and of the first K step, and the
    #       pointers of the first A and B tiles, from the strides.
    # TODO: an fp32 accumulator; for each K step: load both tiles (mask the K
    #       tail and the M and N edges, zeros there), acc = tl.dot(a, b, acc),
    #       move both pointers BLOCK_K along K.
    # TODO: store acc in c's dtype, masked to rows below M and columns below N.
    pass


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32
    # TODO: one program per tile of C, and the launch:
    #   grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    #   matmul_kloop_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), ...,
    #                             BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return c
