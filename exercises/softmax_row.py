"""Lesson 02, step 1 of 3 — one row in one block.

Write `softmax(x)`: the softmax of each row of a 2-D tensor whose rows are
short enough to fit one Triton block, computed by a Triton kernel.

    y[i, j] = exp(x[i, j] - max_k x[i, k]) / sum_k exp(x[i, k] - max_k x[i, k])

Contract (the grader checks all of it):
  * x is 2-D and contiguous, fp32 or fp16, 1 to 1024 columns (BLOCK below),
    on the GPU (or the CPU under the Triton interpreter).
  * Return a NEW contiguous tensor, same shape and dtype as x; don't write
    into x. torch's softmax (and log_softmax) is off limits.

Grade: correctness only, on the CPU and on a GPU (no letter): this step
teaches the shape of a Triton program (one program per row, offsets, a mask,
the stable max subtraction). Step 2 (`softmax_wide`) takes rows longer than
a block, and the lesson's exercise (`softmax`) padded rows, every dtype and
speed.

Run `gpulab check softmax_row` (or press `c` in the lab) to grade it, and
`h` for a hint.
"""

import torch
import triton
import triton.language as tl

BLOCK = 1024  # every row of this step fits one block: n_cols <= BLOCK


@triton.jit
def softmax_row_kernel(y_ptr, x_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    # TODO: the offsets of this row's BLOCK lanes (rows are n_cols elements
    #       apart: x is contiguous), and a mask for the lanes past n_cols.
    # TODO: load the row in fp32; lanes past n_cols must neither win the max
    #       nor add to the sum.
    # TODO: subtract the row max, exponentiate, divide by the sum, and store
    #       the row into y with the same mask.
    pass


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    assert n_cols <= BLOCK, "this step's rows fit one block"
    y = torch.empty_like(x)
    # TODO: launch one program per row:
    #       softmax_row_kernel[(n_rows,)](y, x, n_cols, BLOCK=BLOCK)
    return y
