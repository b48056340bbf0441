"""Lesson 01, puzzle 2 of 5 — many programs over a long vector.

Write `add(x, y)`: x + y, computed by a Triton kernel, for vectors far
longer than one block. One program covers BLOCK = 1024 elements; a long
vector needs many programs, each covering its own block.

Contract (the grader checks all of it):
  * x and y are 1-D, contiguous, of one dtype (fp32 or fp16) and one
    length n, from 1 to about 20,000 elements.
  * Return a NEW tensor of x's shape and dtype; don't write into x or y.
  * The sum is your kernel's: torch's arithmetic (+, torch.add, ...) is off
    the graded path.

The starter runs, and is right only up to 1024 elements: it launches one
program, and every program would cover elements 0 … 1023 anyway.

Grade: correctness only (no letter). Run `gpulab check triton_grid` (or
press `c` in the lab) to grade it, and `h` for a hint.
"""

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def add_kernel(out_ptr, x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # TODO: program 0 should cover elements 0 … BLOCK-1, program 1 the next
    #       BLOCK, and so on: start the offsets at this program's block
    #       (tl.program_id(0) says which program this is).
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    # TODO: launch enough programs to cover all n elements, the last block
    #       partly masked: triton.cdiv(n, BLOCK) of them.
    grid = (1,)
    add_kernel[grid](out, x, y, n, BLOCK=BLOCK)
    return out
