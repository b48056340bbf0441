"""Reference solution for lesson 01: the STREAM triad, out = alpha * x + y.

The triad does 2 FLOPs (a multiply and an add, one FMA) per element and moves
3 elements (read x, read y, write out): 1/6 FLOP per byte in fp32, a
thousand times left of any GPU's ridge point. Nothing about the arithmetic
matters; the kernel's one job is to keep enough loads in flight to saturate
HBM.

Design:
  * One program per BLOCK of elements, a 1-D grid of cdiv(N, BLOCK)
    programs. With BLOCK = 1024 and 4 warps each thread owns 8 elements of
    each tensor: in fp16/bf16 8 consecutive ones, one 128-bit load; in fp32
    two runs of 4, 2 KB apart, two 128-bit loads (Triton 3.9 for sm_90, when
    n divides by 16; lesson 01's deep dive). Tens of thousands of programs
    queue up, so every SM always has several resident and the memory system
    stays busy.
  * The mask `offs < n` handles any length: the last program's extra lanes
    neither load nor store.
  * The arithmetic is done in fp32 whatever the storage dtype, then rounded
    once on the store: fp16 math would round alpha*x before adding y.
  * Offsets are int64: past 2**31 elements an int32 pid * BLOCK would wrap.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def triad_kernel(out_ptr, x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    out = alpha * x + y  # one fused multiply-add per element
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


BLOCK = 1024


def triad(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    assert x.shape == y.shape and x.ndim == 1, "expects two 1-D tensors of one length"
    assert x.is_contiguous() and y.is_contiguous(), "expects contiguous tensors"
    n = x.numel()
    out = torch.empty_like(x)
    grid = (triton.cdiv(n, BLOCK),)
    triad_kernel[grid](out, x, y, alpha, n, BLOCK=BLOCK, num_warps=4)
    return out
