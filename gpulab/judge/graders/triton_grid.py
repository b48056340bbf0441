"""Grader for lesson 01, puzzle 2: many programs over a long vector.

Contract: `add(x, y)` for 1-D contiguous fp32/fp16 tensors of one length
(1 to about 20,000) returns a new tensor, x + y, computed by a Triton
kernel. Correctness only.

What a wrong grid or offset shows, named by `diagnose`: only the first
block written (one program, or every program on the same block), the last
partial block left out (n // BLOCK programs), gaps between the blocks
(programs further apart than the block each covers), every value taken
from a neighbour (an offset off by k).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from gpulab.judge import named_mistakes as nm
from gpulab.judge.graders.bandwidth import BANNED, BANNED_ATEN
from gpulab.judge.kernel_spec import Case, Expect, KernelSpec
from gpulab.judge.puzzle import grade_puzzle, randn
from gpulab.measure import compile_specs as cs

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext
    from gpulab.wire.result import CaseRow


def correctness_cases(ctx: CaseContext) -> list[Case]:
    specs = [
        (5000, "fp32", 1),  # five programs, the last one partly masked
        (1, "fp32", 2),
        (1024, "fp16", 3),
        (1025, "fp32", 4),  # one element into a second block
        (3 * 1024, "fp32", 5),
        (20_001, "fp32", 6),  # twenty programs, the last with one element
        (9_999, "fp16", 7),
        (5000, "fp32", 8),  # the same shape again with fresh data
    ]
    cases = []
    for i, (n, dt, seed) in enumerate(specs):
        x = randn((n,), dt, ctx.seed(seed), ctx.device)
        y = randn((n,), dt, ctx.seed(100 + seed), ctx.device)
        label = " (second draw)" if i == len(specs) - 1 else ""
        cases.append(Case(f"n={n} {dt}{label}", (x, y), x.dtype, {"N": n}, shape=f"n={n}"))
    return cases


def reference(case: Case) -> torch.Tensor:
    x, y = case.args
    out: torch.Tensor = x.double() + y.double()
    return out


def expect(case: Case) -> Expect:
    x = case.args[0]
    return Expect(x.shape, x, "x", contiguous=True)


def diagnose(case: Case, out: torch.Tensor, ref: torch.Tensor) -> str:
    n = ref.numel()
    missing = nm.unwritten(out, ref)
    moved = ~nm.close(out, ref) & ~missing
    k = nm.shifted_1d(out, ref, moved)
    if k is not None and int(moved.sum()) > int(missing.sum()):
        return (
            f"element i holds x[i {'+' if k > 0 else '-'} {abs(k)}] + y[i {'+' if k > 0 else '-'} "
            f"{abs(k)}]: the offsets are off by {k}"
        )
    if not bool(missing.any()):
        return ""
    spans = nm.runs(missing)
    words = nm.unwritten_text(spans, n)
    if len(spans) == 1 and spans[0] == (0, n - 1):
        return (
            f"{words}: nothing was written. Did any program run? A grid of n // BLOCK "
            "programs is 0 programs when n < BLOCK; triton.cdiv(n, BLOCK) rounds up"
        )
    if len(spans) == 1 and spans[0][1] == n - 1:  # a tail left out
        done = spans[0][0]
        if n - done < done:
            return (
                f"{words}: the grid stops short of the last, partial block (n // BLOCK "
                "rounds down; triton.cdiv(n, BLOCK) rounds up)"
            )
        return (
            f"{words}: only the first {done} were, one block's worth: either one program "
            "ran (launch triton.cdiv(n, BLOCK) programs) or every program covered the same "
            "block (start each program's offsets at tl.program_id(0) * BLOCK)"
        )
    if len(spans) == 1 and spans[0][0] == 0:  # a head left out, the rest right
        k = spans[0][1] + 1
        return f"{words}: the offsets start {k} element{'s' if k > 1 else ''} in, not at 0"
    if len(spans) > 1:
        return (
            f"{words}: gaps between blocks, so programs start further apart than the "
            "block each covers (the step between programs must be the block's size)"
        )
    return words


OVERRUN = (
    "The last block stored past the end of out: its lanes at n and beyond need "
    "the mask (offs < n) on the store, and on the loads."
)


def kernel_spec(ctx: CaseContext) -> KernelSpec:
    return KernelSpec(
        reference=reference,
        banned=BANNED,
        banned_aten=BANNED_ATEN,
        banned_label="torch's arithmetic (+, torch.add, ...)",
        expect=expect,
        diagnose=diagnose,
        overrun=OVERRUN,
    )


def case_to_draw(cases: Sequence[Case], rows: Sequence[CaseRow]) -> Case | None:
    """The case a load map should draw (gpulab.judge.named_mistakes.case_to_draw)."""
    return nm.case_to_draw(cases, rows)


def grade(ctx: GradeContext) -> None:
    grade_puzzle(ctx, kernel_spec(ctx), "add", lambda: correctness_cases(ctx))


# --- `gpulab dev compile` (the manifest's tools: "compile") ---------------------
# The reference's kernels as it launches them, and the starter's with the same
# signature (gpulab.measure.compile_specs).
COMPILE_SPECS = tuple(
    cs.Spec(
        "add_kernel", f"{dt} BLOCK=1024 w4", cs.simple(dt, {"BLOCK": 1024}, 4), starter="add_kernel"
    )
    for dt in ("fp16", "fp32")
)
