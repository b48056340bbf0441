"""Grader for lesson 01, puzzle 5: constexpr and the launch.

Contract: `row_center(x)` for a contiguous 2-D fp32 tensor of M × N
(1 <= N <= 20000) returns a new tensor, each row less its mean, computed by
a Triton kernel. Correctness only; the kernel is given, the launch is the
puzzle.

What a wrong launch shows, named by `diagnose`: the columns past a block
too small for the row left unwritten (a fixed BLOCK), rows with no program
(a grid short of M). After the cases the check shows the learner's own
launches (grid, scalar and constexpr arguments, num_warps), read from the
sandbox's record of one call, with what a GPU would make of their warps:
how many of the row's values each thread holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from gpulab.judge import named_mistakes as nm
from gpulab.judge.graders.bandwidth import BANNED, BANNED_ATEN
from gpulab.judge.kernel import Kept, check_cases, guarded_call
from gpulab.judge.kernel_spec import Case, Expect, KernelSpec
from gpulab.judge.puzzle import grade_puzzle, randn
from gpulab.measure import compile_specs as cs
from gpulab.wire.launch_record import RecordedLaunch

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext
    from gpulab.judge.remote import Remote
    from gpulab.wire.result import CaseRow

PER_THREAD = 64  # a thread's share of a row that still fits its registers


def correctness_cases(ctx: CaseContext) -> list[Case]:
    specs = [
        (5, 1000, 1),  # wider than the starter's 256 lanes
        (1, 1, 2),
        (4, 7, 3),
        (3, 256, 4),
        (2, 4097, 5),  # one past a power of two: the block doubles
        (2, 20000, 6),  # the widest: 32768 lanes
        (9, 333, 7),
        (5, 1000, 8),  # the same shape again with fresh data
    ]
    cases = []
    for i, (m, n, seed) in enumerate(specs):
        x = randn((m, n), "fp32", ctx.seed(seed), ctx.device) + 3.0  # a mean far from 0
        label = " (second draw)" if i == len(specs) - 1 else ""
        shape = f"{m}×{n}"
        cases.append(Case(f"{shape} fp32{label}", (x,), x.dtype, {"M": m, "N": n}, shape=shape))
    return cases


def reference(case: Case) -> torch.Tensor:
    x: torch.Tensor = case.args[0].double()
    return x - x.mean(dim=1, keepdim=True)


def expect(case: Case) -> Expect:
    x = case.args[0]
    return Expect(x.shape, x, "x", contiguous=True)


def diagnose(case: Case, out: torch.Tensor, ref: torch.Tensor) -> str:
    m, n = ref.shape
    missing = nm.unwritten(out, ref)
    cols = missing.all(dim=0)
    rows = missing.all(dim=1)
    if bool(cols.any()) and not bool(rows.all()):
        first = int(cols.nonzero()[0])
        if bool(cols[first:].all()):
            return (
                f"columns {first}–{n - 1} of every row were not written, and the mean is of the "
                f"first {first} only: a program's block of {first} lanes covers only part of a "
                f"{n}-column row. BLOCK must cover the row: triton.next_power_of_2(n_cols) = "
                f"{1 << (n - 1).bit_length()}"
            )
    if bool(rows.any()):
        return (
            f"{nm.these('row', nm.runs(rows))} not written: launch one program per row, "
            f"a grid of ({m},)"
        )
    return ""


def kernel_spec(ctx: CaseContext) -> KernelSpec:
    return KernelSpec(
        reference=reference,
        banned=BANNED + (torch.mean, torch.sum, torch.Tensor.mean, torch.Tensor.sum),
        banned_aten=BANNED_ATEN + ("mean", "sum"),
        banned_label="torch's arithmetic and reductions (mean, sum, -, ...)",
        expect=expect,
        diagnose=diagnose,
    )


def launch_text(launch: RecordedLaunch) -> str:
    """`center_kernel[(2,)](n_cols=20000, BLOCK=32768, num_warps=16)`, and
    what a GPU makes of the warps where a thread would hold too much."""
    args = launch.args or {}
    scalars = {
        k: v for k, v in args.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    options = dict(launch.options or {})
    warps = options.get("num_warps")
    shown = [f"{k}={v}" for k, v in scalars.items()]
    shown.append(f"num_warps={warps}" if warps is not None else "num_warps not given (4)")
    grid = launch.grid if isinstance(launch.grid, tuple) else "?"
    text = f"{launch.kernel}[{grid}]({', '.join(shown)})"
    threads = 32 * (warps if isinstance(warps, int) and warps > 0 else 4)
    blocks = [v for v in scalars.values() if isinstance(v, int) and v >= 2 and v & (v - 1) == 0]
    if blocks:
        lanes = max(blocks)
        each = lanes // threads
        if each > PER_THREAD:
            text += (
                f": {lanes} lanes on {threads} threads is {each} values a thread, more than a "
                f"GPU's registers hold (they would spill to memory); num_warps="
                f"{min(lanes // (32 * PER_THREAD), 32)} keeps it to {PER_THREAD}"
            )
    return text


def _show_launches(ctx: GradeContext, spec: KernelSpec, fn: Remote, cases: list[Case]) -> None:
    """The learner's launches for the first failed case and the widest one,
    called once more with the sandbox recording them."""
    failed = nm.case_to_draw(cases, ctx.cases)
    widest = max(cases, key=lambda c: c.args[0].shape[1])
    shown = []
    for case in [widest] if failed is None or failed is widest else [failed, widest]:
        keep = Kept()
        guarded_call(ctx, spec, fn, case, None, keep, None, False)
        recorded = keep.record.launches if keep.record is not None else None
        launches = [la for la in recorded or () if isinstance(la, RecordedLaunch)]
        if launches:
            shown.append(f"{case.shape}: " + "; ".join(launch_text(la) for la in launches[:3]))
    if shown:
        ctx.notes.append("Your launches, " + " | ".join(shown))


def _check(ctx: GradeContext, spec: KernelSpec, fn: Remote, cases: list[Case]) -> None:
    check_cases(ctx, spec, fn, cases)
    # Called once more, the cases' verdicts already in: a call that fails
    # now failed in its case first (the same guards), so nothing new decides.
    _show_launches(ctx, spec, fn, cases)


def case_to_draw(cases: Sequence[Case], rows: Sequence[CaseRow]) -> Case | None:
    """The case a load map should draw (gpulab.judge.named_mistakes.case_to_draw)."""
    return nm.case_to_draw(cases, rows)


def grade(ctx: GradeContext) -> None:
    grade_puzzle(ctx, kernel_spec(ctx), "row_center", lambda: correctness_cases(ctx), _check)


# --- `gpulab dev compile` (the manifest's tools: "compile") ---------------------
# The reference's kernels as it launches them, and the starter's with the same
# signature (gpulab.measure.compile_specs).
# At its widest: 32768 lanes on 16 warps.
COMPILE_SPECS = (
    cs.Spec(
        "center_kernel",
        "fp32 BLOCK=32768 w16",
        cs.simple("fp32", {"BLOCK": 32768}, 16),
        starter="center_kernel",
    ),
)
