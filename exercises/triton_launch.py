"""Lesson 01, puzzle 5 of 5 — constexpr and the launch.

Write `row_center(x)`: each row of x less that row's mean,
out[i, j] = x[i, j] - mean_k x[i, k], computed by a Triton kernel. The
kernel below is complete: one program per row, holding the whole row in
one block of BLOCK lanes. What is left is its launch.

Contract (the grader checks all of it):
  * x is 2-D, contiguous, fp32, M × N with 1 <= M and 1 <= N <= 20000.
  * Return a NEW contiguous tensor of x's shape and dtype; don't write
    into x.
  * The maths is your kernel's: torch's arithmetic and reductions (mean,
    sum, -, ...) are off the graded path.

BLOCK is a `tl.constexpr`: its value is part of the compiled kernel (each
new value compiles a new one), and `tl.arange(0, BLOCK)` needs a power of
two. The starter launches with BLOCK = 256 whatever the width, so rows
wider than 256 are only partly covered.

`num_warps=` goes in the launch too: 32 × num_warps threads share a
program's block. On a GPU a thread should hold at most about 64 of the
row's values, or they no longer fit its registers: 4 warps up to 8192
lanes, 8 up to 16384, 16 beyond. The check shows your launches (grid,
BLOCK, num_warps); only the values are graded.

Grade: correctness only (no letter). Run `gpulab check triton_launch` (or
press `c` in the lab) to grade it, and `h` for a hint.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def center_kernel(out_ptr, x_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols  # the masked lanes add 0
    tl.store(out_ptr + row * n_cols + cols, x - mean, mask=mask)


def row_center(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    # TODO: a program's block must cover its whole row: choose BLOCK from
    #       n_cols (the smallest power of two >= n_cols), and num_warps from
    #       BLOCK, and pass both in the launch.
    center_kernel[(n_rows,)](out, x, n_cols, BLOCK=256)
    return out
