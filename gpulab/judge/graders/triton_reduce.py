"""Grader for lesson 01, puzzle 4: a reduction, the max of each row.

Contract: `row_max(x)` for a contiguous 2-D fp32/fp16 tensor of M × N
(M >= 1, 1 <= N <= 64) returns a new 1-D tensor of M elements, the max of
each row, computed by a Triton kernel. Correctness only. A third of the
rows of every input are negative throughout, so a masked lane that loads
0 wins their max.

What a wrong reduction shows, named by `diagnose`: the max of a column
instead of a row (axis=0 where axis=1 was meant; the starter's tile is 64
× 64, so both run), 0 for a row whose values are all negative (`other=0.0`
on the masked lanes), rows with no result (a grid short of ⌈M / ROWS⌉).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from gpulab.judge import named_mistakes as nm
from gpulab.judge.kernel_spec import Case, Expect, KernelSpec
from gpulab.judge.puzzle import DTYPES, grade_puzzle
from gpulab.measure import compile_specs as cs

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext
    from gpulab.wire.result import CaseRow

ROWS = 64  # the starter's rows a program: where a column's max would come from
_T = torch.Tensor
BANNED = (
    torch.max,
    torch.amax,
    torch.maximum,
    torch.sort,
    torch.topk,
    torch.cummax,
    torch.logsumexp,
    _T.max,
    _T.amax,
    _T.maximum,
    _T.sort,
    _T.topk,
    _T.cummax,
)
BANNED_ATEN = ("max", "amax", "maximum", "sort", "topk", "cummax", "aminmax", "kthvalue", "median")


def make_input(m: int, n: int, dtype: str, seed: int, device: str) -> torch.Tensor:
    """Noise, with every third row shifted to be negative throughout."""
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(m, n, generator=g, dtype=torch.float32, device=device)
    x[::3] = -x[::3].abs() - 0.5
    return x.to(DTYPES[dtype])


def correctness_cases(ctx: CaseContext) -> list[Case]:
    specs = [
        (100, 37, "fp32", 1),  # two programs, columns 37-63 masked
        (1, 1, "fp32", 2),
        (3, 5, "fp16", 3),
        (64, 64, "fp32", 4),  # the tile exactly
        (130, 64, "fp16", 5),
        (200, 20, "fp32", 6),
        (7, 1, "fp32", 7),
        (100, 37, "fp32", 8),  # the same shape again with fresh data
    ]
    cases = []
    for i, (m, n, dt, seed) in enumerate(specs):
        x = make_input(m, n, dt, ctx.seed(seed), ctx.device)
        label = " (second draw)" if i == len(specs) - 1 else ""
        shape = f"{m}×{n}"
        cases.append(Case(f"{shape} {dt}{label}", (x,), x.dtype, {"M": m, "N": n}, shape=shape))
    return cases


def reference(case: Case) -> torch.Tensor:
    x: torch.Tensor = case.args[0]
    return x.double().amax(dim=1)


def expect(case: Case) -> Expect:
    x = case.args[0]
    return Expect((x.shape[0],), x, "x", contiguous=True)


def diagnose(case: Case, out: torch.Tensor, ref: torch.Tensor) -> str:
    x = case.args[0].detach().cpu().double()
    m, n = x.shape
    missing = nm.unwritten(out, ref)
    wrong = ~missing & ~nm.close(out, ref, 1e-3, 1e-6)
    idx = wrong.nonzero().flatten().tolist()
    if idx:
        column = [
            r
            for r in idx
            if r % ROWS < n
            and bool(
                nm.close(out[r : r + 1], x[r - r % ROWS : r - r % ROWS + ROWS, r % ROWS].max())
            )
        ]
        if len(column) * 2 > len(idx):
            r = column[0]
            first = r - r % ROWS
            return (
                f"out[{r}] holds the max of column {r % ROWS} (rows {first}–"
                f"{min(first + ROWS, m) - 1}), not of row {r}: axis=0 reduces down each "
                "column; a row's max runs along axis=1"
            )
        zero = [r for r in idx if float(out[r]) == 0.0 and bool((x[r] < 0).all())]
        if zero:
            r = zero[0]
            return (
                f"row {r}'s max came out 0, though every value in it is negative: the masked "
                f"lanes past column {n - 1} loaded 0.0 (`other`), and 0.0 won; fill them with a "
                "value no row can lose to: -inf"
            )
    if bool(missing.any()):
        return (
            f"{nm.these('row', nm.runs(missing))} given no result (still NaN): is there a "
            "program for "
            "every ROWS rows (triton.cdiv(M, ROWS) programs), each storing its rows?"
        )
    if idx:
        r = idx[0]
        return f"row {r}: got {float(out[r]):.6g}, its max is {float(ref[r]):.6g}"
    return ""


OVERRUN = (
    "A store landed past the end of out: store one value a row, masked with rows < M "
    "(the last program's rows run past M)."
)


def kernel_spec(ctx: CaseContext) -> KernelSpec:
    return KernelSpec(
        reference=reference,
        banned=BANNED,
        banned_aten=BANNED_ATEN,
        banned_label="A torch reduction (max, amax, sort, topk, ...)",
        expect=expect,
        diagnose=diagnose,
        overrun=OVERRUN,
    )


def case_to_draw(cases: Sequence[Case], rows: Sequence[CaseRow]) -> Case | None:
    """The case a load map should draw (gpulab.judge.named_mistakes.case_to_draw)."""
    return nm.case_to_draw(cases, rows)


def grade(ctx: GradeContext) -> None:
    grade_puzzle(ctx, kernel_spec(ctx), "row_max", lambda: correctness_cases(ctx))


# --- `gpulab dev compile` (the manifest's tools: "compile") ---------------------
# The reference's kernels as it launches them, and the starter's with the same
# signature (gpulab.measure.compile_specs).
COMPILE_SPECS = tuple(
    cs.Spec(
        "row_max_kernel",
        f"{dt} 64x64 w4",
        cs.simple(dt, {"ROWS": 64, "COLS": 64}, 4),
        starter="row_max_kernel",
    )
    for dt in ("fp16", "fp32")
)
