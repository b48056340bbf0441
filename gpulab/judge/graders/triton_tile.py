"""Grader for lesson 01, puzzle 3: a 2-D tile, a transpose.

Contract: `transpose(x)` for a contiguous 2-D fp32/fp16 tensor of M × N
(1 to 64 each) returns a new contiguous (N, M) tensor, out[j, i] = x[i, j],
moved by a Triton kernel. Correctness only.

What a wrong tile shows, named by `diagnose`: only the diagonal written
(1-D offsets pair lane k of the rows with lane k of the columns), x's
elements in x's own order (stored through the load's offsets), whole rows
or columns left out (a mask or a tile too small), and where any element
landed ("out[2, 7] holds x[4, 1]; it should hold x[7, 2]").
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


def correctness_cases(ctx: CaseContext) -> list[Case]:
    specs = [
        (5, 9, "fp32", 1),  # wider than tall: rows and columns cannot be mixed up
        (9, 5, "fp32", 2),
        (1, 1, "fp32", 3),
        (1, 40, "fp16", 4),
        (64, 64, "fp32", 5),  # the tile exactly
        (64, 17, "fp16", 6),
        (17, 64, "fp32", 7),
        (33, 47, "fp32", 8),
        (5, 9, "fp32", 9),  # the same shape again with fresh data
    ]
    cases = []
    for i, (m, n, dt, seed) in enumerate(specs):
        x = randn((m, n), dt, ctx.seed(seed), ctx.device)
        label = " (second draw)" if i == len(specs) - 1 else ""
        shape = f"{m}×{n}"
        cases.append(Case(f"{shape} {dt}{label}", (x,), x.dtype, {"M": m, "N": n}, shape=shape))
    return cases


def reference(case: Case) -> torch.Tensor:
    x: torch.Tensor = case.args[0]
    return x.double().t().contiguous()


def expect(case: Case) -> Expect:
    x = case.args[0]
    return Expect((x.shape[1], x.shape[0]), x, "x", contiguous=True)


def diagnose(case: Case, out: torch.Tensor, ref: torch.Tensor) -> str:
    x = case.args[0].detach().cpu()
    m, n = x.shape
    missing = nm.unwritten(out, ref)
    written = ~missing
    if bool(written.any()):
        diagonal = torch.eye(n, m, dtype=torch.bool)
        if bool((written == diagonal).all()) and min(m, n) > 1:
            return (
                f"only the diagonal out[k, k] (k < {min(m, n)}) was written: the offsets are 1-D, "
                "so lane k pairs row k with column k; a tile pairs every row with every "
                "column (rm[:, None] and rn[None, :])"
            )
        flat_out, flat_x = out.flatten(), x.flatten()
        wrong = written.flatten() & ~nm.close(flat_out, ref.flatten())
        if bool(wrong.any()) and bool(nm.close(flat_out[wrong], flat_x[wrong]).all()):
            return (
                "out holds x's elements in x's own order (a reshape, not a transpose): the "
                "load and the store walk x and out in the same order; x[i, j] goes to "
                f"out[j, i], at j * {m} + i"
            )
    rows = missing.all(dim=1)  # out's rows: x's columns
    cols = missing.all(dim=0)  # out's columns: x's rows
    if bool(rows.any()) and bool(missing[~rows].logical_not().all()):
        return (
            f"out's {nm.these('row', nm.runs(rows))} not written (x's columns): the "
            "tile or its mask leaves those columns of x out"
        )
    if bool(cols.any()) and bool(missing[:, ~cols].logical_not().all()):
        return (
            f"out's {nm.these('column', nm.runs(cols))} not written (x's rows): the "
            "tile or its mask leaves those rows of x out"
        )
    bad = (written & ~nm.close(out, ref)).nonzero()
    if bad.numel():
        a, b = (int(v) for v in bad[0])
        found = nm.where_from_2d(float(out[a, b]), x)
        if found is not None:
            i, j = found
            return f"out[{a}, {b}] holds x[{i}, {j}]; it should hold x[{b}, {a}]"
    if bool(missing.any()):
        return f"{int(missing.sum())} of {out.numel()} elements were not written (still NaN)"
    return ""


OVERRUN = (
    "The tile stored past the end of out: look at the store's offsets first, then "
    "its mask. out is N × M, so x[i, j] goes to out_ptr + j * M + i: "
    "rn[None, :] * M + rm[:, None]; a row length that is x's, or rows and "
    "columns swapped, puts elements elsewhere and can run past out's end when "
    "M ≠ N. A 2-D mask needs both conditions, one per "
    "dimension, joined with & ((rm[:, None] < M) & (rn[None, :] < N)); `and` "
    "between two blocks keeps only one of them in the interpreter, and the GPU "
    "compiler refuses it."
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
    grade_puzzle(ctx, kernel_spec(ctx), "transpose", lambda: correctness_cases(ctx))


# --- `gpulab dev compile` (the manifest's tools: "compile") ---------------------
# The reference's kernels as it launches them, and the starter's with the same
# signature (gpulab.measure.compile_specs).
COMPILE_SPECS = tuple(
    cs.Spec(
        "transpose_kernel",
        f"{dt} 64x64 w4",
        cs.simple(dt, {"BLOCK_M": 64, "BLOCK_N": 64}, 4),
        starter="transpose_kernel",
    )
    for dt in ("fp16", "fp32")
)
