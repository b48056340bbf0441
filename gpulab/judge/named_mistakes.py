"""Where a wrong output went wrong, in a learner's words: the lesson 01
puzzles' failure messages (gpulab.judge.graders.triton_*).

A puzzle's output is compared with its reference as every kernel's is
(gpulab.judge.compare); these helpers then read the output for the pattern a
classic mistake leaves. The sandbox fills every buffer the learner allocates
with NaN, so an element the kernel never stored is still NaN: "elements
1000-1023 were not written". A wrong offset moves values: "out[2, 7] holds
x[7, 2]". Everything here reads judge-side copies on the CPU and never
raises (a diagnosis that fails says nothing, and the plain numbers stand).

`case_to_draw` is the hook for a load map (which elements each program
loaded and stored, which lanes were masked): it names the case a drawing
would show, the smallest that failed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import torch

if TYPE_CHECKING:
    from gpulab.wire.result import CaseRow


class Case(Protocol):
    """What is read of a gpulab.judge.kernel_spec.Case here (typed by what
    is read, not imported)."""

    @property
    def name(self) -> str: ...

    @property
    def args(self) -> tuple[Any, ...]: ...


C = TypeVar("C", bound=Case)
Diagnose = Callable[[Any, torch.Tensor, torch.Tensor], str]


def safely(diagnose: Diagnose, case: Case, out: torch.Tensor, ref: torch.Tensor) -> str:
    """`diagnose`'s words, or "" where it fails: a bug in a diagnosis must
    not hide the comparison's own numbers."""
    try:
        return diagnose(case, out.detach().cpu(), ref.detach().cpu())
    except Exception:  # noqa: BLE001 - any failure of a diagnosis is silence
        return ""


def runs(flags: torch.Tensor) -> list[tuple[int, int]]:
    """The runs of True in a 1-D bool tensor, as (first, last) inclusive."""
    idx = flags.nonzero().flatten().tolist()
    out: list[tuple[int, int]] = []
    for i in idx:
        if out and out[-1][1] == i - 1:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


def runs_text(spans: Sequence[tuple[int, int]], limit: int = 3) -> str:
    """'1000–1023', '3, 7–9 and 12–15', '0–511, 1024–1535 and 40 more runs'."""
    parts = [f"{a}" if a == b else f"{a}–{b}" for a, b in spans[:limit]]
    if len(spans) > limit:
        return f"{', '.join(parts)} and {len(spans) - limit} more runs"
    if len(parts) > 1:
        return f"{', '.join(parts[:-1])} and {parts[-1]}"
    return parts[0] if parts else ""


def these(noun: str, spans: Sequence[tuple[int, int]]) -> str:
    """'row 4 was' / 'rows 4–7 were': a noun, its runs and their verb."""
    one = len(spans) == 1 and spans[0][0] == spans[0][1]
    return f"{noun if one else noun + 's'} {runs_text(spans)} {'was' if one else 'were'}"


def unwritten(out: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Elements still holding the NaN the sandbox filled the output with
    (where the reference is a number)."""
    return torch.isnan(out.double()) & ~torch.isnan(ref.double())


def close(a: torch.Tensor, b: torch.Tensor, rtol: float = 2e-2, atol: float = 1e-3) -> torch.Tensor:
    """Elementwise equality as a moved value shows it: loose enough for an
    fp16 store of an fp32 result, tight enough that random values differ."""
    a, b = a.double(), b.double()
    return (a - b).abs() <= atol + rtol * b.abs()


def elements_text(spans: Sequence[tuple[int, int]], total: int) -> str:
    """'element 999 was' / 'elements 1000–1023 (24 of 1000) were'."""
    count = sum(b - a + 1 for a, b in spans)
    if count == 1:
        return f"element {spans[0][0]} was"
    return f"elements {runs_text(spans)} ({count} of {total}) were"


def unwritten_text(spans: Sequence[tuple[int, int]], total: int) -> str:
    """'elements 1000–1023 (24 of 1000) were not written (...)'."""
    count = sum(b - a + 1 for a, b in spans)
    still = "it still holds" if count == 1 else "they still hold"
    return (
        f"{elements_text(spans, total)} not written ({still} the NaN gpulab filled your "
        "output with)"
    )


def shifted_1d(out: torch.Tensor, ref: torch.Tensor, bad: torch.Tensor) -> int | None:
    """k where most written, wrong elements hold the reference's element
    i + k (an offset off by k), or None."""
    idx = bad.nonzero().flatten()
    if not idx.numel():
        return None
    i = int(idx[0])
    found = close(ref, out[i].expand_as(ref)).nonzero().flatten()
    if not found.numel():
        return None
    k = int(found[(found - i).abs().argmin()]) - i
    if k == 0:
        return None
    sample = idx[: min(64, idx.numel())]
    inside = sample[(sample + k >= 0) & (sample + k < ref.numel())]
    if not inside.numel():
        return None
    hits = close(ref[inside + k], out[inside])
    return k if float(hits.double().mean()) >= 0.8 else None


def where_from_2d(value: float, source: torch.Tensor) -> tuple[int, int] | None:
    """The (row, column) of `source` whose value `value` is (the nearest
    match), or None."""
    diff = (source.double() - value).abs()
    best = int(diff.argmin())
    cols = source.shape[1]
    r, c = divmod(best, cols)
    if not bool(close(source[r, c].reshape(1), torch.tensor([value])).all()):
        return None
    return r, c


def case_to_draw(cases: Sequence[C], rows: Sequence[CaseRow]) -> C | None:
    """The failed case a load map should draw: the smallest one (its
    programs and lanes fit a terminal), or None where every case passed.
    The hook the lab's load map connects to (issue 47): a puzzle grader's
    `case_to_draw` is this, given its cases and the rows it recorded."""
    failed = {r.name for r in rows if not r.passed}
    # A row's name starts with its case's name (", your kernels alone" may follow).
    bad = [c for c in cases if any(n == c.name or n.startswith(c.name + ",") for n in failed)]
    if not bad:
        return None
    return min(bad, key=lambda c: _numel(c.args))


def _numel(args: Sequence[Any]) -> int:
    return sum(a.numel() for a in args if isinstance(a, torch.Tensor))
