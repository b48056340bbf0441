"""Reference for lesson 01, puzzle 2: many programs over a long vector.

Program p covers elements p·BLOCK … p·BLOCK + BLOCK − 1, and the grid has
⌈n / BLOCK⌉ programs, so together they cover every element; the last block
is masked where it runs past n.
"""

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def add_kernel(out_ptr, x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    grid = (triton.cdiv(n, BLOCK),)
    add_kernel[grid](out, x, y, n, BLOCK=BLOCK)
    return out
