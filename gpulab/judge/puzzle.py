"""What lesson 01's Triton puzzles share (gpulab.judge.graders.triton_*):
their inputs, the torch ops none of them may use, and the words added to an
error the interpreter raises for a classic mistake.

Each puzzle is one idea of the Triton model (a mask, a grid, a 2-D tile, a
reduction, the launch), graded like any step: correctness only, every case
under the sandbox's guards, the output filled with NaN before the call. A
wrong output is named by the puzzle's own `diagnose`
(gpulab.judge.named_mistakes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from gpulab.judge.kernel_spec import Case, KernelSpec
from gpulab.judge.standard import grade_kernel
from gpulab.sandbox.learner import LearnerError

if TYPE_CHECKING:
    from gpulab.judge.context import GradeContext
    from gpulab.judge.remote import Remote

DTYPES = {"fp32": torch.float32, "fp16": torch.float16}

# A copy is a puzzle's whole answer (triton_mask, triton_tile): torch's
# copies would be the answer too. Tensor.copy_ is banned as a callable (the
# function guard): the interpreter copies every argument back after a
# launch through its storages, which that guard never sees, while aten's
# copy_ (the dispatch guard) would see them, so it is banned on a GPU only.
COPIES = (
    torch.clone,
    torch.Tensor.clone,
    torch.Tensor.contiguous,
    torch.Tensor.to,
    torch.Tensor.copy_,
)
COPIES_ATEN = ("clone", "_to_copy", "t_copy", "transpose_copy", "permute_copy")
COPIES_ATEN_GPU = ("copy_", "_copy_from")
COPIES_LABEL = "A torch copy (clone, contiguous, copy_, to)"

# Errors the interpreter raises for a classic mistake of these puzzles:
# (words in the error, what to do).
ERROR_HINTS = (
    (
        "must be a power of 2",
        "tl.arange(0, BLOCK) needs BLOCK to be a power of two (a tl.constexpr): for a "
        "block that covers n elements use triton.next_power_of_2(n), never n itself.",
    ),
    (
        "make_shape_compatible",
        "Two blocks of different shapes met (a 2-D tile and a 1-D block?). tl.max(tile, "
        "axis=1) leaves one value a row, axis=0 one a column; `r[:, None]` and `c[None, :]` "
        "make a column and a row that broadcast to a tile.",
    ),
    (
        "ambiguous",
        "A block was used where Python wants one True or False (`if`, `and`, `or`, `not`): "
        "join masks with `&` and `|`, and choose per lane with tl.where.",
    ),
    (
        "must be of type `tl.constexpr`",
        "A block size must be known when the kernel is compiled: annotate it "
        "`BLOCK: tl.constexpr` and pass it by name (BLOCK=...).",
    ),
)


def hint_for(text: str) -> str:
    """The hint for an interpreter error's text, or ""."""
    return next((hint for words, hint in ERROR_HINTS if words in text), "")


def randn(shape: tuple[int, ...], dtype: str, seed: int, device: str) -> torch.Tensor:
    """Fresh noise drawn where the case runs, stored in `dtype`."""
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float32, device=device).to(DTYPES[dtype])


def grade_puzzle(
    ctx: GradeContext,
    spec: KernelSpec,
    function: str,
    cases: Callable[[], list[Case]],
    check: Callable[[GradeContext, KernelSpec, Remote, list[Case]], None] | None = None,
) -> None:
    """A puzzle's check: its cases graded as a step's (correctness only, by
    `check`, default gpulab.judge.kernel.check_cases), with a hint added to
    an interpreter error a classic mistake raises."""
    try:
        grade_kernel(ctx, spec, function, cases, None, check=check)
    except LearnerError as exc:
        hint = hint_for(f"{exc.summary}\n{exc.message}")
        if hint:
            raise LearnerError(exc.summary, f"{hint}\n\n{exc.message}") from None
        raise
