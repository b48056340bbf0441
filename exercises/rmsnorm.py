"""Lesson 05, step 2 of 5 — RMSNorm alone.

Write `rmsnorm(x, weight, eps=1e-6)`: RMSNorm over the last dimension of x,
computed by a Triton kernel.

    y = x * rsqrt(mean(x², over D) + eps) * weight        (in fp32)

Contract (the grader checks all of it):
  * x is (B, S, H, D) and contiguous, fp16, bf16 or fp32, on the GPU (or the
    CPU under the Triton interpreter): B·S·H rows of D elements, D apart.
    D is a power of two from 16 to 256.
  * weight is (D,), in x's dtype or fp32.
  * Return a NEW tensor y of x's shape and dtype. Don't write into any
    input. F.rms_norm, torch.rms_norm and nn.RMSNorm are off limits, and so
    is eager torch arithmetic on the graded path.

Grade: correctness only, on the CPU and on a GPU (no letter): this step
teaches a reduction across each row in fp32, with eps. Step 3
(`rope_rmsnorm_fwd`) fuses it with step 1's RoPE, on strided views, and
the lesson's exercise (`rope_rmsnorm`) adds the backward and speed.

Run `gpulab check rmsnorm` (or press `c` in the lab) to grade it, and `h`
for a hint.
"""

import torch
import triton
import triton.language as tl

BLOCK_R = 16  # rows a program


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_rows, eps,
                   D: tl.constexpr, BLOCK_R: tl.constexpr):
    # One program per BLOCK_R rows, each row a D-wide tile: a grid of
    # cdiv(n_rows, BLOCK_R). Row r starts r * D elements into x (and y).
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)  # mask rows < n_rows
    cols = tl.arange(0, D)
    # TODO: load my (BLOCK_R, D) tile of x, masked, as fp32.
    # TODO: rstd = rsqrt(mean of x² over each row + eps), one per row.
    # TODO: y = x * rstd * weight (the weight as fp32, one value a column);
    #       store it, masked, converted to y's dtype.
    pass


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    B, S, H, D = x.shape
    y = torch.empty_like(x)
    n_rows = B * S * H
    # TODO: launch rmsnorm_kernel on triton.cdiv(n_rows, BLOCK_R) programs:
    #   rmsnorm_kernel[(triton.cdiv(n_rows, BLOCK_R),)](x, weight, y, n_rows, eps,
    #                                                   D=D, BLOCK_R=BLOCK_R)
    return y
