"""Lesson 02 — your first Triton kernel: row-wise softmax.

Write `softmax(x)`: the softmax of each row of a 2-D tensor, computed by a
Triton kernel.

    y[i, j] = exp(x[i, j] - max_k x[i, k]) / sum_k exp(x[i, k] - max_k x[i, k])

Contract (the grader checks all of it):
  * x is 2-D, fp16, bf16 or fp32, on the GPU (or the CPU under the Triton
    interpreter), with x.stride(1) == 1. Rows may be padded: x.stride(0) can
    be larger than x.shape[1]. Widths go from 1 to 32768.
  * Return a NEW contiguous tensor, same shape and dtype as x. Don't write
    into x.
  * The work must happen in your Triton kernel: torch.softmax,
    Tensor.softmax and F.softmax (and their log_ twins) are off limits.

Grade (on a GPU): the fraction of your GPU's datasheet bandwidth you
reach, geometric mean over the eight timed shapes: A >= 65%, B >= 55%,
C >= 40%, D below (the same roof whether or not `gpulab probe --bench` has
run). On a CPU only correctness is graded. One row a program, as lesson 02
teaches, earns an A: on an H200 about 72% of the datasheet, about 81% of
the measured copy.

Run `gpulab check softmax` (or press `c` in the lab) to grade it, and `h`
for a hint.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(y_ptr, x_ptr, x_row_stride, y_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    # TODO: offsets of this row's columns (BLOCK of them), and a mask for the
    #       lanes past n_cols.
    # TODO: load the row (padding lanes must not win the max or add to the sum),
    #       in fp32.
    # TODO: subtract the row max, exponentiate, divide by the sum.
    # TODO: store the result into row `row` of y.
    pass


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    # TODO: choose BLOCK (a power of two that covers the row) and launch one
    #       program per row:  softmax_kernel[(n_rows,)](y, x, ..., BLOCK=BLOCK)
    return y
