"""What the learner's GPU can run, so a check asks only for that.

bf16 needs compute capability 8.0 (Ampere): a T4 (7.5, the book's Colab
GPU) has no bf16 tensor cores, and Triton's `tl.dot` refuses bf16 there (and
for 7.5 compiles even fp16 to fp32 multiply-adds: docs/hardware.md). On
such a GPU the bf16 correctness cases are skipped and the bf16 timing sets
are timed in fp16, each said in the result. (The Hopper-only paths of the
reference kernels choose themselves by capability: softmax_smem, FA3.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext

BF16_CC = (8, 0)


def capability(ctx: CaseContext) -> tuple[int, int] | None:
    if ctx.device != "cuda":
        return None
    import torch

    major, minor = torch.cuda.get_device_capability()
    return major, minor


def lacks_bf16(ctx: CaseContext) -> bool:
    cc = capability(ctx)
    return cc is not None and cc < BF16_CC


def skip_for_device(ctx: GradeContext) -> set[str]:
    """Dtypes whose cases this GPU cannot run; each recorded in ctx.skipped."""
    if not lacks_bf16(ctx):
        return set()
    cc = capability(ctx)
    assert cc is not None  # lacks_bf16 saw one
    line = (
        f"bf16 cases: this GPU (compute capability {cc[0]}.{cc[1]}) has no bf16 tensor "
        "cores; bf16 needs 8.0 (Ampere) or newer"
    )
    if line not in ctx.skipped:  # graders may ask more than once
        ctx.skipped.append(line)
    return {"bf16"}


def timed_dtype(ctx: CaseContext, name: str) -> str:
    """The dtype a timing set uses here: bf16 becomes fp16 where bf16 is missing."""
    if name != "bf16" or not lacks_bf16(ctx):
        return name
    note = (
        "Timed in fp16 where the course times bf16: this GPU has no bf16 tensor cores "
        "(compute capability 8.0 needed). fp16 moves the same bytes; Triton 3.9 compiles "
        "tl.dot for compute capability 7.5 to fp32 multiply-adds, not tensor-core "
        "instructions (docs/hardware.md), so a Triton matmul here runs at the FP32 rate."
    )
    notes = getattr(ctx, "notes", None)  # the bench's and --explain's contexts too
    if notes is not None and note not in notes:
        notes.append(note)
    return "fp16"
