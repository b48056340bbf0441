"""Reference for lesson 02, step 2: rows longer than a block.

A row that does not fit one block is walked BLOCK columns at a time, twice:

  1. An online pass keeps the running max m and the running sum s of
     exp(x - m). When a block raises the max to m', everything summed so far
     was measured against the old m, so s is rescaled by exp(m - m') before
     the block's own exp(x - m') is added. Until the first finite value the
     max is -inf and there is nothing to rescale: exp(-inf - -inf) would be
     NaN, so the max used is 0 then (any finite number would do: s is 0).
  2. A second pass writes exp(x - m) / s.

That reads the row twice and writes it once (1.5x the bytes of the one-block
kernel of step 1), the price of rows of any length.
"""

import torch
import triton
import triton.language as tl

BLOCK = 4096  # columns a program handles at a time; rows may be far longer


@triton.jit
def softmax_wide_kernel(y_ptr, x_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # int64: row * n_cols can pass 2**31
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    m = tl.full((), -float("inf"), tl.float32)
    s = tl.zeros((), tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # all -inf so far
        s = s * tl.exp(m - m_safe) + tl.sum(tl.exp(x - m_safe), axis=0)
        m = m_new
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(y_row + offs, (tl.exp(x - m) / s).to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    softmax_wide_kernel[(n_rows,)](y, x, n_cols, BLOCK=BLOCK, num_warps=8)
    return y
