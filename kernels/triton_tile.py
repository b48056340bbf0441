"""Reference for lesson 01, puzzle 3: a 2-D tile, a transpose.

`rm[:, None]` is a BLOCK_M × 1 column of row indices and `rn[None, :]` a
1 × BLOCK_N row of column indices; arithmetic between them broadcasts to the
whole BLOCK_M × BLOCK_N tile, one (row, column) pair a lane. The same pairs
address x (row-major, rows N apart) for the load and out (rows M apart) for
the store, with the roles of rows and columns swapped.
"""

import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N = 64, 64  # x is at most 64 x 64


@triton.jit
def transpose_kernel(out_ptr, x_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rm = tl.arange(0, BLOCK_M)[:, None]  # a column: x's row index i
    rn = tl.arange(0, BLOCK_N)[None, :]  # a row: x's column index j
    mask = (rm < M) & (rn < N)
    tile = tl.load(x_ptr + rm * N + rn, mask=mask)
    tl.store(out_ptr + rn * M + rm, tile, mask=mask)


def transpose(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    out = torch.empty((N, M), dtype=x.dtype, device=x.device)
    transpose_kernel[(1,)](out, x, M, N, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return out
