"""A correctness case's row as a grader makes it: the keys a row may carry
(CaseFields) and `case_row`, which makes the typed row the result holds
(gpulab.wire.result.CaseRow) for `GradeContext.add_case`.

The row's JSON (`gpulab check --json`'s `cases`) keeps the keys in the
order the grader gives them, as it always did. Light: no torch here (the
judge's main imports the context before torch).
"""

from __future__ import annotations

from typing import Required, TypedDict, Unpack

from gpulab.wire.protocol import JsonObject
from gpulab.wire.result import CaseRow


class BadElementJson(TypedDict):
    """One wrong element as a row keeps it (gpulab.judge.compare.BadElement)."""

    index: list[int]
    got: float
    expected: float


class CaseFields(TypedDict, total=False):
    """The keys of a case's row. The lab reads the first eight
    (gpulab.wire.result.CaseRow); the others are a grader's own, written
    into the JSON for people and scripts."""

    name: Required[str]
    shape: str
    dtype: str
    max_abs: float
    max_rel: float
    mismatches: int
    passed: bool
    detail: str | None
    first_bad: list[BadElementJson]  # a kernel's first wrong elements
    dx_max_abs: float  # a backward's errors, gradient by gradient (rope_rmsnorm)
    dweight_max_abs: float
    graphs: int  # how many graphs Dynamo made (graph_breaks, compile_once)
    graph_breaks: int
    ops: int
    line: int | None  # the learner's line a graph break or recompile came from
    reasons: list[str]  # Dynamo's, for a graph break
    ms: float  # copy_ceiling: a copy's time at the ceiling


def case_row(**fields: Unpack[CaseFields]) -> CaseRow:
    """The typed row of a case, its JSON the fields in the order given. A
    row without `passed` failed (the key goes last, as it always did)."""
    obj: JsonObject = dict(fields)  # the row's JSON, read as the lab reads one
    obj["passed"] = bool(fields.get("passed"))
    return CaseRow.from_json(obj)
