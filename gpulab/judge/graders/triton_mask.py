"""Grader for lesson 01, puzzle 1: load and store with a mask.

Contract: `copy(x)` for a 1-D contiguous fp32/fp16 tensor of 1 to 1024
elements returns a new tensor of the same shape and dtype holding x's
values, stored by a Triton kernel (one program of BLOCK = 1024 lanes).
Correctness only.

What a wrong mask shows: a store past the end of the output (the lanes
at n and beyond, unmasked) fails the check as "wrote past the end of a
buffer" (the sandbox's canary behind every buffer); a mask that stops
short leaves the last elements unwritten (still NaN), and `diagnose` names
them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from gpulab.judge import named_mistakes as nm
from gpulab.judge.kernel_spec import Case, Expect, KernelSpec
from gpulab.judge.puzzle import (
    COPIES,
    COPIES_ATEN,
    COPIES_ATEN_GPU,
    COPIES_LABEL,
    grade_puzzle,
    randn,
)
from gpulab.measure import compile_specs as cs

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext
    from gpulab.wire.result import CaseRow

BLOCK = 1024


def correctness_cases(ctx: CaseContext) -> list[Case]:
    # First a size just short of the block: the starter's unmasked store
    # lands 24 elements past the output, inside the sandbox's 64-element
    # canary, so "wrote past the end" is the first thing it hears.
    specs = [
        (1000, "fp32", 1),
        (1023, "fp32", 2),
        (BLOCK, "fp32", 3),  # the block exactly: no lane is masked
        (1, "fp32", 4),
        (2, "fp16", 5),
        (3, "fp32", 6),
        (7, "fp16", 7),
        (513, "fp16", 8),
        (1000, "fp32", 9),  # the same shape again with fresh data
    ]
    cases = []
    for i, (n, dt, seed) in enumerate(specs):
        x = randn((n,), dt, ctx.seed(seed), ctx.device)
        label = " (second draw)" if i == len(specs) - 1 else ""
        cases.append(Case(f"n={n} {dt}{label}", (x,), x.dtype, {"N": n}, shape=f"n={n}"))
    return cases


def reference(case: Case) -> torch.Tensor:
    x: torch.Tensor = case.args[0]
    return x.double()


def expect(case: Case) -> Expect:
    x = case.args[0]
    return Expect(x.shape, x, "x", contiguous=True)


def diagnose(case: Case, out: torch.Tensor, ref: torch.Tensor) -> str:
    n = ref.numel()
    missing = nm.unwritten(out, ref)
    moved = ~nm.close(out, ref, 1e-6, 1e-6) & ~missing
    k = nm.shifted_1d(out, ref, moved)
    if k is not None and int(moved.sum()) > int(missing.sum()):
        return f"element i holds x[i {'+' if k > 0 else '-'} {abs(k)}]: the offsets are off by {k}"
    if bool(missing.any()):
        spans = nm.runs(missing)
        words = nm.unwritten_text(spans, n)
        if spans[-1][1] == n - 1 and len(spans) == 1:
            words += f": the mask stops short of n = {n}; the lanes to keep are offs < n"
        return words
    return ""


OVERRUN = (
    "The lanes at n and beyond stored past the end of out: pass the mask "
    "(offs < n, not <=) to the store, and to the load, which would read past x."
)


def kernel_spec(ctx: CaseContext) -> KernelSpec:
    return KernelSpec(
        reference=reference,
        banned=COPIES,
        banned_aten=COPIES_ATEN + (() if ctx.interpreter else COPIES_ATEN_GPU),
        banned_label=COPIES_LABEL,
        expect=expect,
        diagnose=diagnose,
        overrun=OVERRUN,
    )


def case_to_draw(cases: Sequence[Case], rows: Sequence[CaseRow]) -> Case | None:
    """The case a load map should draw (gpulab.judge.named_mistakes.case_to_draw)."""
    return nm.case_to_draw(cases, rows)


def grade(ctx: GradeContext) -> None:
    grade_puzzle(ctx, kernel_spec(ctx), "copy", lambda: correctness_cases(ctx))


# --- `gpulab dev compile` (the manifest's tools: "compile") ---------------------
# The reference's kernels as it launches them, and the starter's with the same
# signature (gpulab.measure.compile_specs).
COMPILE_SPECS = tuple(
    cs.Spec(
        "copy_kernel",
        f"{dt} BLOCK=1024 w4",
        cs.simple(dt, {"BLOCK": 1024}, 4),
        starter="copy_kernel",
    )
    for dt in ("fp16", "fp32")
)
