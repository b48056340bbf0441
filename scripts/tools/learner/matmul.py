"""A learner's matmul as lesson 03 teaches it: the grouped-order tiled
kernel with one fixed tile, no autotuning and no TMA path. The feedback
bench (issue 32) checks it beside the reference, which autotunes six
configurations a shape on a GPU."""

import os

import torch
import triton
import triton.language as tl

# One tile for the GPU (the lesson's Hopper choice), a small one for the CPU
# interpreter.
_INTERPRETER = os.environ.get("TRITON_INTERPRET") == "1"
TILE = (32, 32, 32, 4, 1, 4) if _INTERPRETER else (128, 128, 64, 8, 3, 8)


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
    # --- Which tile of C is mine: the grouped (swizzled) order ---------------
    # Programs are numbered 0, 1, 2, ... and the GPU starts them roughly in
    # that order. Row-major would give program p the tile (p // n_tiles_n,
    # p % n_tiles_n). Instead walk down a group of GROUP_M tile-rows first:
    # consecutive programs cover a GROUP_M-tall band column by column, so
    # programs running together share A panels (same rows) and B panels
    # (same columns), and the second reader of each panel hits L2.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)  # the last group may be short
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # --- Pointers to the first K step of my A rows and B columns -------------
    # Rows past M (columns past N) wrap around to valid ones: the loads need
    # no mask and the wrapped results are never stored.
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    # Strides, not shapes: a transposed view (b.t()) or a slice works as is.
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn

    # --- March along K, accumulating in fp32 ---------------------------------
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K  # the last step may be partial: mask it, load zeros
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)  # tensor cores; fp16/bf16 in, fp32 out
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    # --- Store my tile, masked at the M and N edges --------------------------
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    bm, bn, bk, group, stages, warps = TILE
    if a.dtype == torch.float32 and not _INTERPRETER:
        bk = 32  # twice the bytes a stage: keep the shared memory in bounds
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    matmul_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group, num_stages=stages, num_warps=warps,
    )
    return c
