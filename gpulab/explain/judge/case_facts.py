"""A timing case as the diagnosis reads it: the sandbox's description with
the exercise's minimal bytes, FLOPs and exponentials (the manifest's
formulas) and the measured time; and which case matters most. Used by the
judge's side of --explain and by its Nsight Compute step (one place, no
import loop).
"""

from __future__ import annotations

from gpulab.explain.facts import CaseDescription, CaseEntry, CaseFacts, TimedRow
from gpulab.wire.check_request import CheckRequest


def case_facts(
    request: CheckRequest,
    case: CaseEntry,
    timed: dict[str | None, TimedRow],
    exps: str = "",
) -> CaseFacts:
    """A case as the sandbox described it, with its minimal bytes and FLOPs
    (the manifest's formulas) and its measured time where there is one.
    `exps`: the manifest's formula for the case's exponentials ("" for none)."""
    from gpulab.course.content import eval_formula

    sizes = dict(case.get("sizes") or {})
    names = {**sizes, "elt": case.get("elt", 1)}
    nbytes = eval_formula(request.bytes, names) if request.bytes else None
    flops = eval_formula(request.flops, names) if request.flops else None
    name = case.get("name")
    row: TimedRow = timed.get(name, {}) if name is not None else {}
    facts: CaseFacts = {
        "name": case.get("name", "?"),
        "dtype": case.get("dtype", ""),
        "sizes": sizes,
        "elt": case.get("elt", 1),
        "bytes": nbytes,
        "flops": flops,
        "work": max(nbytes or 0, flops or 0),
        "exps": eval_formula(exps, names) if exps else 0.0,
        "ms": row.get("ms"),
        "fraction": row.get("roofline_fraction"),
        "launches": case.get("launches", []),
        "intermediates": case.get("intermediates", []),
    }
    if case.get("error"):
        facts["error"] = str(case["error"])[:300]
    return facts


def entry_of(case: CaseDescription) -> CaseEntry:
    """A described case read as the sandbox's entry for it before it ran:
    the keys the two share, no launches."""
    entry: CaseEntry = {}
    if "name" in case:
        entry["name"] = case["name"]
    if "sizes" in case:
        entry["sizes"] = case["sizes"]
    if "dtype" in case:
        entry["dtype"] = case["dtype"]
    if "elt" in case:
        entry["elt"] = case["elt"]
    return entry


def ordered(
    cases: list[CaseDescription], request: CheckRequest, timed: dict[str | None, TimedRow]
) -> list[CaseDescription]:
    """The case that matters most first (its kernels compile first): where
    the grade is lost (lowest fraction of the roof), else the most work."""

    def rank(c: CaseDescription) -> tuple[float, float]:
        f = case_facts(request, entry_of(c), timed)
        return (f["fraction"] if f["fraction"] is not None else 0, -f["work"])

    return sorted(cases, key=rank)


__all__ = ["case_facts", "entry_of", "ordered"]
