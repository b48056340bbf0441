"""Reference for lesson 02, step 1: one row in one block.

One program per row, the whole row in one block of BLOCK lanes: one load,
the max, the exponentials and their sum from registers, one store. Lanes
past n_cols load as -inf, so they never win the max and exp(-inf) adds 0 to
the sum; subtracting the row max first keeps exp from overflowing. The maths
is in fp32 whatever the storage dtype; the store rounds once.
"""

import torch
import triton
import triton.language as tl

BLOCK = 1024  # every row of this step fits one block: n_cols <= BLOCK


@triton.jit
def softmax_row_kernel(y_ptr, x_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # int64: row * n_cols can pass 2**31 on a GPU
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * n_cols + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    assert n_cols <= BLOCK, "this step's rows fit one block"
    y = torch.empty_like(x)
    softmax_row_kernel[(n_rows,)](y, x, n_cols, BLOCK=BLOCK)
    return y
