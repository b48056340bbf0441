"""Lesson 01 — the GPU architecture tour: how fast can you move bytes?

Write `triad(x, y, alpha)`: the STREAM triad, computed by a Triton kernel.

    out[i] = alpha * x[i] + y[i]

Contract (the grader checks all of it):
  * x and y are 1-D, contiguous, of the same length N >= 1 (any N: 1, 2, 3,
    1023, 10 million ...) and the same dtype: fp32, fp16 or bf16. They may
    be views that start inside a larger buffer.
  * alpha is a Python float (0 and negative values included).
  * Return a NEW tensor, same length and dtype as x. Don't write into x or y.
  * Do the arithmetic in fp32 inside the kernel, then store in the output's
    dtype.
  * The work must happen in your Triton kernel: your Python wrapper may
    allocate the output (torch.empty_like) and launch the kernel, nothing
    else. torch.add, torch.mul, `+`, `*` and friends on tensors are off
    limits.

On a GPU the grader times your kernel on 200-270 MB vectors, counts
3 * N * elt bytes (read x, read y, write out) and reports the fraction of
your GPU's datasheet HBM bandwidth you reach, beside torch.add(y, x,
alpha=alpha).

Grade (on a GPU): that fraction, geometric mean over the timed shapes
(the same roof whether or not `gpulab probe --bench` has run): A >= 80%,
B >= 65%, C >= 45%, D below. A plain masked kernel gets an A.
On a CPU only correctness is graded.

Run `gpulab check bandwidth` (or press `c` in the lab) to grade it, and `h`
for a hint.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def triad_kernel(out_ptr, x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    # TODO: the offsets of this program's BLOCK elements, and a mask for the
    #       lanes past n (the last block is usually partial).
    # TODO: load x and y (masked), convert to fp32.
    # TODO: compute alpha * x + y and store it (masked) into out.
    pass


def triad(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    n = x.numel()
    out = torch.empty_like(x)
    # TODO: pick a BLOCK (a power of two, e.g. 1024) and launch enough
    #       programs to cover all n elements:
    #       triad_kernel[grid](out, x, y, alpha, n, BLOCK=BLOCK)
    return out
