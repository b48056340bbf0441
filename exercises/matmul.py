"""Lesson 03 — a tiled matmul in Triton, in grouped order, autotuned.

Write `matmul(a, b)`: C = A @ B computed by your Triton kernel.

Contract (the grader checks all of it):
  * a is (M, K), b is (K, N), one dtype: fp16 or bf16 (fp32 allowed).
  * Any strides: a or b may be a transposed view (x.t()), a slice with padded
    rows, or every other column. Use the strides, never assume contiguity.
  * M, N and K need not be multiples of your block sizes.
  * Accumulate in fp32; return a NEW (M, N) tensor in a's dtype. Don't write
    into a or b.
  * The work must happen in your kernel: torch.matmul, `@`, mm, bmm, addmm,
    einsum and F.linear are off limits.

Plan: (1) one program per BLOCK_M × BLOCK_N tile of C, row-major program
order, fixed block sizes; get it correct. (2) Switch to the grouped order.
(3) On a GPU, autotune the block sizes (see the lesson). Note: the Triton
interpreter (no GPU) cannot autotune: give it a single config.

Grade (on a GPU): your speed as a fraction of cuBLAS (torch.matmul) timed
in the same run, geometric mean over the timed shapes: A >= 0.95x,
B >= 0.85x, C >= 0.70x (the book's pass line), D below. On a CPU only
correctness is graded.

Run `gpulab check matmul` (or press `c` in the lab) to grade it, and `h`
for a hint.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    # TODO: which tile of C is mine? Start row-major:
    #         pid_m = pid // tl.cdiv(N, BLOCK_N),  pid_n = pid % tl.cdiv(N, BLOCK_N)
    #       then replace it by the grouped order (GROUP_M tile-rows per group).
    # TODO: offsets of my rows (BLOCK_M), my columns (BLOCK_N) and the first
    #       BLOCK_K step of K; pointers into a and b built from the STRIDES.
    # TODO: an fp32 accumulator; loop over K in BLOCK_K steps: load a tile of
    #       a and of b (mask the K tail, load zeros there), acc = tl.dot(a, b, acc),
    #       advance the pointers by BLOCK_K along K.
    # TODO: store acc (converted to c's dtype) into my tile of c, masked at the
    #       M and N edges.
    pass


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = 32, 32, 32, 4
    # TODO: a 1-D grid with one program per tile of C, and the launch:
    #   matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), ...,
    #                       BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M)
    return c
