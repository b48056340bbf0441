"""A check's result as the lab holds it: what gpulab.lab.runner.run_check
returns, the CLI prints, the workspace records and the Results pane shows.

Its JSON (`to_json`) is `gpulab check --json`, a documented interface, and
what `.gpulab/results/<exercise>.json` holds: same keys, same value types as
ever (tests/check/test_check_events.py pins them). `from_json` reads one back,
from the judge's result frame or from a results file that a person, a
script or another gpulab version may have written: every field is checked,
and one of the wrong type is dropped, never trusted.

Typed here, each declared once with gpulab.wire.codec and read as a reply
(`Tolerant`): the top level (`CheckResult`), each correctness case's row
(`CaseRow`), the timing and each of its rows (`Timing`, `TimingRow`). The
top level's only code of its own is its keys' order. A row keeps the object
it came as (`json`), written back unchanged, so a key the lab does not read
(a case's `sizes`, a grader's own extras) is kept too. Passed through as the
judge made them, checked only to be JSON objects: lesson 07's profile
(gpulab.lab.report draws it), and every other key of the judge's (`mode`,
`verdict`, `isolation`, `slowest`, `compiled_ahead`, --explain's `explain`
and `diagnosis`, which gpulab.explain.render reads), kept in `rest`.

This module imports nothing heavy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, TypedDict

from gpulab.wire.codec import ABSENT, Tolerant, decode, encode, wire
from gpulab.wire.codec import keys as codec_keys
from gpulab.wire.protocol import JsonObject, text
from gpulab.wire.status import Status

# Output and messages carry the learner's printing and tracebacks; the
# sandbox already keeps at most 8 KB of output, so only hostile files reach this.
LONG_TEXT = 200_000
NAME_LIMIT = 1000  # a case's name, shape or dtype (a progress line shows the name)

# The keys the lab itself sets on every result, first in its JSON, as
# gpulab.lab.runner always wrote them.
_HEAD = ("exercise", "lesson", "file", "passed", "cases", "timing", "output", "stages")
_TAIL = ("duration_s", "warm")

# The judge's own keys in the order it always wrote them (its result's
# `order`; `gpulab check --json` keeps it, and tests pin it).
JUDGE_ORDER = (
    "status",
    "summary",
    "message",
    "device",
    "mode",
    "skipped",
    "notes",
    "compiled_ahead",
    "verdict",
    "explain",
    "diagnosis",
    "isolation",
    "slowest",
)


def finite(value: Any) -> int | float | None:
    """A finite number as it was written (an int stays an int), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return value if math.isfinite(value) else None
    except OverflowError:  # an int past a float's range (JSON has no limit): not finite
        return None


def _objects(value: Any) -> list[JsonObject]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if value >= 0 else None


def _error(value: Any) -> int | float | None:
    """A case's error as written: NaN and inf are errors too (a NaN output
    is not "0 error")."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def _sizes(value: Any) -> dict[str, int | float] | None:
    if not isinstance(value, dict):
        return None
    return {k: v for k, v in value.items() if isinstance(k, str) and finite(v) is not None}


def _graded_on(value: Any) -> str | None:
    basis = value.get("text") if isinstance(value, dict) else None
    return text(basis) if isinstance(basis, str) and basis else None


def _as_it_came(value: Any) -> Any:
    """A row's `json`: the whole object, set by its `from_json`, not a key of it."""
    return ABSENT


# A row's typed fields are declared with gpulab.wire.codec and read as a
# reply (`Tolerant`): a value of the wrong type reads as absent, words are
# cut at their limit. The row keeps the object it came as (`json`), and
# writes it back unchanged (`to_json`).
def _row_json() -> Any:
    return wire(factory=dict, read=_as_it_came)


def _number() -> Any:
    """A finite number as written (an int stays an int), else None."""
    return wire(None, read=finite)


@dataclass(frozen=True, slots=True)
class CaseRow(Tolerant):
    """One correctness case as the judge graded it: its name (or shape),
    dtype, errors against the reference, how many elements were wrong, and
    why it failed (`detail`). An exercise graded on numbers (copy_ceiling's)
    fills only the name, `passed` and `detail`."""

    json: JsonObject = _row_json()
    name: str = wire("", limit=NAME_LIMIT)
    shape: str | None = wire(None, limit=NAME_LIMIT)
    dtype: str | None = wire(None, limit=NAME_LIMIT)
    max_abs: int | float | None = wire(None, read=_error)
    max_rel: int | float | None = wire(None, read=_error)
    mismatches: int | None = wire(None, read=_count)
    passed: bool = False  # only `true` passes
    detail: str | None = wire(None, limit=LONG_TEXT)

    @classmethod
    def from_json(cls, obj: JsonObject) -> CaseRow:
        return replace(decode(cls, obj), json=obj)

    def to_json(self) -> JsonObject:
        """The row as it came (a case frame carries it back to the lab)."""
        return self.json

    @property
    def label(self) -> str:
        return self.name or self.shape or ""


def case_rows(value: Any) -> list[CaseRow]:
    return [CaseRow.from_json(v) for v in _objects(value)]


@dataclass(frozen=True, slots=True)
class TimingRow(Tolerant):
    """One timed case: its median and spread, the work it did (FLOPs and
    bytes as the grader counted them, or its `sizes` for the manifest's
    formulas), and where that puts it against the roofline and the
    baseline."""

    json: JsonObject = _row_json()
    name: str = ""
    shape: str | None = None
    dtype: str | None = None
    ms: int | float | None = _number()
    p20_ms: int | float | None = _number()
    p80_ms: int | float | None = _number()
    flops: int | float | None = _number()
    bytes: int | float | None = _number()
    intensity: int | float | None = _number()
    sizes: dict[str, int | float] | None = wire(None, read=_sizes)
    throughput: int | float | None = _number()
    roofline_fraction: int | float | None = _number()
    speedup: int | float | None = _number()

    @classmethod
    def from_json(cls, obj: JsonObject) -> TimingRow:
        return replace(decode(cls, obj), json=obj)

    def to_json(self) -> JsonObject:
        return self.json

    @property
    def label(self) -> str:
        return self.name or self.shape or ""


@dataclass(frozen=True, slots=True)
class Timing(Tolerant):
    """What the lab reads of a result's `timing` (a GPU's measurements):
    the attempt's numbers (recorded in the state) and where it was timed.
    `json` is the whole object as it came, written back unchanged."""

    json: JsonObject = _row_json()
    grade: str | None = None
    ms: int | float | None = _number()
    throughput: int | float | None = _number()
    unit: str | None = None
    roofline_fraction: int | float | None = _number()
    speedup: int | float | None = _number()
    device: str | None = None
    summary: str | None = None
    cases: list[TimingRow] = wire(
        factory=list, read=lambda v: [TimingRow.from_json(r) for r in _objects(v)]
    )
    # lesson 07's: plain JSON
    profile: JsonObject | None = wire(None, read=lambda v: v if isinstance(v, dict) else None)
    # What the letter was measured against and its bands, in words
    # ("graded on the fraction of the H200 datasheet's 4.8 TB/s: A from 65%, ...").
    graded_on: str | None = wire(None, read=_graded_on)

    @classmethod
    def from_json(cls, obj: Any) -> Timing | None:
        if not isinstance(obj, dict):
            return None
        return replace(decode(cls, obj), json=obj)

    def to_json(self) -> JsonObject:
        return self.json

    def attempt(self) -> AttemptNumbers:
        """The numbers an attempt records (gpulab.lab.state's ATTEMPT), those present."""
        out: AttemptNumbers = {}
        if self.ms is not None:
            out["ms"] = self.ms
        if self.throughput is not None:
            out["throughput"] = self.throughput
        if self.unit is not None:
            out["unit"] = self.unit
        if self.roofline_fraction is not None:
            out["roofline_fraction"] = self.roofline_fraction
        if self.speedup is not None:
            out["speedup"] = self.speedup
        if self.grade is not None:
            out["grade"] = self.grade
        return out


class AttemptNumbers(TypedDict, total=False):
    """A timed attempt's numbers, those measured, in this order (the state's
    attempt line: gpulab.lab.workspace.record_result)."""

    ms: int | float
    throughput: int | float
    unit: str
    roofline_fraction: int | float
    speedup: int | float
    grade: str


def _status(value: Any, passed: Any) -> Status:
    """A check's end (gpulab.wire.status.ENDS); another word, or none, is
    recomputed from `passed`, as the state's schema does (gpulab.lab.state)."""
    status = Status.ended(value)
    if status is None:
        status = Status.PASSED if passed is True else Status.FAILED
    return status


def _judge_keys(obj: JsonObject) -> tuple[str, ...]:
    """The order of the judge's keys: every key but the lab's own."""
    return tuple(k for k in obj if k not in _HEAD and k not in _TAIL)


@dataclass(frozen=True, slots=True)
class CheckResult(Tolerant):
    """One check's outcome. A field that is None is a key the JSON leaves
    out (a passed check has no `message`; one that never started has no
    `stages`), as it always did; `timing` is always there (null when the
    check was not timed), and the judge's own keys (`rest`) are kept as
    they came, null or not."""

    # A word that is not a check's end is recomputed from `passed` (the JSON's, written from it).
    status: Status = wire(read=_status, also=("passed",), write=lambda r: r.status.value)
    summary: str = ""
    exercise: str = ""
    lesson: str = ""
    file: str = ""
    message: str | None = wire(None, limit=LONG_TEXT, omit=True)
    device: str | None = wire(None, omit=True)
    output: str = wire("", limit=LONG_TEXT)
    cases: list[CaseRow] = wire(factory=list, read=case_rows)
    timing: Timing | None = wire(None, read=Timing.from_json)
    skipped: list[str] | None = wire(None, omit=True)
    notes: list[str] | None = wire(None, omit=True)
    stages: dict[str, float] | None = wire(None, omit=True)  # seconds per kind of stage
    duration_s: float | None = wire(None, omit=True)
    # a spare judge graded it (gpulab.lab.runner.Spares)
    warm: bool | None = wire(None, omit=True)
    # The judge's other keys, passed through (the module's docstring lists them).
    rest: JsonObject = wire(factory=dict, extra=True)
    # The order the judge's keys came in, which the JSON keeps.
    order: tuple[str, ...] = wire((), whole=True, read=_judge_keys)

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    @classmethod
    def from_json(cls, obj: JsonObject) -> CheckResult:
        """A result from JSON, checked field by field."""
        return decode(cls, obj)

    def to_json(self) -> JsonObject:
        """`gpulab check --json`'s object: the lab's keys first, then the
        judge's in the order they came, then how long it took. A key of the
        judge's not in `order` (a result built, not read) follows in the
        fields' order, then the others'."""
        values = {"passed": self.passed, **encode(self)}
        keys = [*_HEAD, *self.order, *codec_keys(CheckResult), *values]
        keys = [k for k in dict.fromkeys(keys) if k not in _TAIL] + list(_TAIL)
        return {k: values[k] for k in keys if k in values}
