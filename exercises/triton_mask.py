"""Lesson 01, puzzle 1 of 5 — load and store with a mask.

Write `copy(x)`: a new tensor holding x's values, copied by a Triton kernel.
x is short: one program with one block of BLOCK = 1024 lanes covers it.

Contract (the grader checks all of it):
  * x is 1-D and contiguous, fp32 or fp16, with 1 to 1024 elements.
  * Return a NEW tensor, same shape and dtype; don't write into x.
  * The copy is your kernel's: torch's copies (clone, copy_, contiguous, to)
    are off the graded path.

The starter runs, and is right only when x has exactly 1024 elements: its
load and its store touch all BLOCK lanes whatever n is, so for a shorter x
they read and write past the end. Lanes n and beyond must be masked off.

Grade: correctness only (no letter). Run `gpulab check triton_mask` (or
press `c` in the lab) to grade it, and `h` for a hint.
"""

import torch
import triton
import triton.language as tl

BLOCK = 1024  # every x of this puzzle fits one block: n <= BLOCK


@triton.jit
def copy_kernel(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)  # the lanes 0, 1, ..., BLOCK - 1: element indices
    # TODO: lanes n and beyond lie past the end of x and of out. Make a mask
    #       that is True for the lanes below n, and pass it to the load and
    #       to the store (mask=...).
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x)


def copy(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    copy_kernel[(1,)](out, x, x.numel(), BLOCK=BLOCK)  # one program
    return out
