"""A check's result as the lab holds it: what gpulab.check.runner.run_check
returns, the CLI prints, the workspace records and the Results pane shows.

Its JSON (`to_json`) is `gpulab check --json`, a documented interface, and
what `.gpulab/results/<exercise>.json` holds: same keys, same value types as
ever (tests/check/test_check_events.py pins them). `from_json` reads one back,
from the judge's result frame or from a results file that a person, a
script or another gpulab version may have written: every field is checked,
and one of the wrong type is dropped, never trusted.

Typed here: the top level, and the parts of `timing` the lab reads. Passed
through as the judge made them, checked only to be JSON objects or lists:
each case's row (`cases`), the timing's rows and lesson 07's profile
(gpulab.check.report draws them), and every other key of the judge's (`mode`,
`verdict`, `isolation`, `slowest`, `compiled_ahead`, --explain's `explain`
and `diagnosis`, which gpulab.diagnosis.render reads), kept in `rest`.

This module imports nothing heavy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gpulab.check.protocol import text
from gpulab.check.status import Status

# Output and messages carry the learner's printing and tracebacks; the
# sandbox already keeps at most 8 KB of output, so only hostile files reach this.
LONG_TEXT = 200_000

# The keys the lab itself sets on every result, first in its JSON, as
# gpulab.check.runner always wrote them.
_HEAD = ("exercise", "lesson", "file", "passed", "cases", "timing", "output", "stages")
_TYPED = {*_HEAD, "status", "summary", "message", "device", "skipped", "notes"}
_TAIL = ("duration_s", "warm")


def finite(value: Any) -> int | float | None:
    """A finite number as it was written (an int stays an int), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def _texts(value: Any) -> list[str] | None:
    return [text(v) for v in value if isinstance(v, str)] if isinstance(value, list) else None


def _objects(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


@dataclass(frozen=True, slots=True)
class Timing:
    """What the lab reads of a result's `timing` (a GPU's measurements):
    the attempt's numbers (recorded in the state) and where it was timed.
    `json` is the whole object as it came, written back unchanged."""

    json: dict[str, Any]
    grade: str | None = None
    ms: int | float | None = None
    throughput: int | float | None = None
    unit: str | None = None
    roofline_fraction: int | float | None = None
    speedup: int | float | None = None
    device: str | None = None
    summary: str | None = None
    cases: list[dict[str, Any]] = field(default_factory=list)  # rows: plain JSON
    profile: dict[str, Any] | None = None  # lesson 07's: plain JSON

    @classmethod
    def from_json(cls, obj: Any) -> Timing | None:
        if not isinstance(obj, dict):
            return None

        def words(key: str) -> str | None:
            value = obj.get(key)
            return text(value) if isinstance(value, str) else None

        profile = obj.get("profile")
        return cls(
            json=obj,
            grade=words("grade"),
            ms=finite(obj.get("ms")),
            throughput=finite(obj.get("throughput")),
            unit=words("unit"),
            roofline_fraction=finite(obj.get("roofline_fraction")),
            speedup=finite(obj.get("speedup")),
            device=words("device"),
            summary=words("summary"),
            cases=_objects(obj.get("cases")),
            profile=profile if isinstance(profile, dict) else None,
        )

    def attempt(self) -> dict[str, Any]:
        """The numbers an attempt records (gpulab.course.state's ATTEMPT), those present."""
        fields = {
            "ms": self.ms,
            "throughput": self.throughput,
            "unit": self.unit,
            "roofline_fraction": self.roofline_fraction,
            "speedup": self.speedup,
            "grade": self.grade,
        }
        return {k: v for k, v in fields.items() if v is not None}


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check's outcome. A field that is None is a key the JSON leaves
    out (a passed check has no `message`; one that never started has no
    `stages`), as it always did."""

    status: Status
    summary: str = ""
    exercise: str = ""
    lesson: str = ""
    file: str = ""
    message: str | None = None
    device: str | None = None
    output: str = ""
    cases: list[dict[str, Any]] = field(default_factory=list)  # rows: plain JSON
    timing: Timing | None = None
    skipped: list[str] | None = None
    notes: list[str] | None = None
    stages: dict[str, float] | None = None  # seconds per kind of stage
    duration_s: float | None = None
    warm: bool | None = None  # a spare judge graded it (gpulab.check.runner.Spares)
    # The judge's other keys, passed through (the module's docstring lists them).
    rest: dict[str, Any] = field(default_factory=dict)
    # The order the judge's keys came in, which the JSON keeps.
    order: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> CheckResult:
        """A result from JSON, checked field by field. A status that is not
        one of gpulab.check.status's is recomputed from `passed`, as the state's
        schema does (gpulab.course.state)."""
        status = Status.of(obj.get("status"))
        if status is None:
            status = Status.PASSED if obj.get("passed") is True else Status.FAILED

        def words(key: str, limit: int = 20000) -> str | None:
            value = obj.get(key)
            return text(value, limit) if isinstance(value, str) else None

        stages = obj.get("stages")
        warm = obj.get("warm")
        duration = finite(obj.get("duration_s"))
        return cls(
            status=status,
            summary=words("summary") or "",
            exercise=words("exercise") or "",
            lesson=words("lesson") or "",
            file=words("file") or "",
            message=words("message", LONG_TEXT),
            device=words("device"),
            output=words("output", LONG_TEXT) or "",
            cases=_objects(obj.get("cases")),
            timing=Timing.from_json(obj.get("timing")),
            skipped=_texts(obj.get("skipped")),
            notes=_texts(obj.get("notes")),
            stages=(
                {k: float(v) for k, v in stages.items() if finite(v) is not None}
                if isinstance(stages, dict)
                else None
            ),
            duration_s=None if duration is None else float(duration),
            warm=warm if isinstance(warm, bool) else None,
            rest={k: v for k, v in obj.items() if k not in _TYPED and k not in _TAIL},
            order=tuple(k for k in obj if k not in _HEAD and k not in _TAIL),
        )

    def to_json(self) -> dict[str, Any]:
        """`gpulab check --json`'s object: the lab's keys first, then the
        judge's in the order they came, then how long it took."""
        typed: dict[str, Any] = {
            "exercise": self.exercise,
            "lesson": self.lesson,
            "file": self.file,
            "passed": self.passed,
            "cases": self.cases,
            "timing": None if self.timing is None else self.timing.json,
            "output": self.output,
            "stages": self.stages,
            "status": self.status.value,
            "summary": self.summary,
            "message": self.message,
            "device": self.device,
            "skipped": self.skipped,
            "notes": self.notes,
            "duration_s": self.duration_s,
            "warm": self.warm,
        }
        # A typed field that is None is a key left out; `timing` is always
        # there (null when the check was not timed); the judge's own keys
        # are kept as they came, null or not.
        values = {k: v for k, v in typed.items() if v is not None or k == "timing"}
        values.update(self.rest)
        keys = [*_HEAD, *self.order, *typed, *self.rest]
        keys = [k for k in dict.fromkeys(keys) if k not in _TAIL] + list(_TAIL)
        return {k: values[k] for k in keys if k in values}
