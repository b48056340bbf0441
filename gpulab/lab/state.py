"""The shape of `.gpulab/state.json`, checked whole every time it is read.

state.json is plain JSON that a person, a script, a crash or another gpulab
version may have written. Parsing is not enough: `"attempts": "x"` parses and
then breaks `check` after the grading, losing the attempt. So `validate_state`
checks every field gpulab reads against the schema below and repairs what is
wrong field by field: a bad status is recomputed from the attempts, a value of
the wrong type is dropped, each with a warning that names the field
(`exercises.softmax.attempts[2].ms`). Everything else is kept as it was,
fields this version does not know included (a newer gpulab may have written
them). The caller keeps the file as it was beside the repaired one.

Pure functions, no I/O: the workspace does the reading, locking and writing,
and the fuzz test drives this directly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, cast

from gpulab.textsafe import visible
from gpulab.wire.protocol import JsonObject
from gpulab.wire.result import AttemptNumbers
from gpulab.wire.status import RECORDED, Status

if TYPE_CHECKING:
    from gpulab.course.content import Lesson

STATE_VERSION = 1
STATUSES = RECORDED  # Status.NOT_STARTED is stored as no status at all


# The state as gpulab holds it once checked. Every key of a record may be
# missing (a file written by hand, by an older gpulab, or repaired), except
# the top level's, which `validate_state` fills in. A key this version does
# not know is kept in the dict as it came (a newer gpulab may have written
# it): these are TypedDicts, not dataclasses, so the state goes back to disk
# as it was read, and the TUI and the CLI read it as plain dicts.
class Attempt(AttemptNumbers, total=False):
    """One line per check, as Workspace.record_result writes it (ATTEMPT):
    when, the verdict, and a timed check's numbers (Timing.attempt)."""

    time: str
    passed: bool
    summary: str
    device: str


class ExerciseEntry(TypedDict, total=False):
    """An exercise's progress (EXERCISE, and its attempts, oldest first)."""

    status: Status  # one of STATUSES
    hints: int  # hint levels revealed
    grade: str  # the letter of its last passing attempt
    attempts: list[Attempt]


class Settings(TypedDict, total=False):
    """The settings gpulab reads (SETTINGS); any other is kept untouched."""

    gpu: str  # the datasheet GPU rooflines use without a GPU here
    theme: str
    watch: bool


class State(TypedDict):
    """`.gpulab/state.json`."""

    version: int
    exercises: dict[str, ExerciseEntry]
    settings: Settings
    last_lesson: str | None


@dataclass(frozen=True)
class Kind:
    """One field's type: a test, and the words for it in a warning."""

    test: Callable[[Any], bool]
    words: str


def _is_number(v: Any) -> bool:
    # bool is an int to Python, not a duration; nan/inf are not measurements.
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


TEXT = Kind(lambda v: isinstance(v, str), "a string")
FLAG = Kind(lambda v: isinstance(v, bool), "true or false")
NUMBER = Kind(_is_number, "a finite number")
COUNT = Kind(
    lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a whole number, 0 or more"
)
VERSION = Kind(
    lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a whole number, 1 or more"
)
LESSON_ID = Kind(lambda v: v is None or isinstance(v, str), "a lesson id or null")
STATUS = Kind(lambda v: v in STATUSES, " or ".join(repr(s.value) for s in STATUSES))

# One line per check, as Workspace.record_result writes it.
ATTEMPT: dict[str, Kind] = {
    "time": TEXT,
    "passed": FLAG,
    "summary": TEXT,
    "device": TEXT,
    "ms": NUMBER,
    "throughput": NUMBER,
    "unit": TEXT,
    "roofline_fraction": NUMBER,
    "speedup": NUMBER,
    "grade": TEXT,
}
# An exercise's entry; "attempts" (a list of ATTEMPT objects) is checked apart.
EXERCISE: dict[str, Kind] = {"status": STATUS, "hints": COUNT, "grade": TEXT}
# The settings gpulab reads; any other setting is kept untouched.
SETTINGS: dict[str, Kind] = {"gpu": TEXT, "theme": TEXT, "watch": FLAG}
TOP: dict[str, Kind] = {"version": VERSION, "last_lesson": LESSON_ID}


def empty_state() -> State:
    return {"version": STATE_VERSION, "exercises": {}, "settings": {}, "last_lesson": None}


@dataclass
class Checked:
    """A state fit to use, and what had to change to make it so."""

    state: State
    problems: list[str] = field(default_factory=list)
    # The top level was not an object: nothing in it could be kept.
    unusable: bool = False


def what(value: Any) -> str:
    """A JSON value described for a warning: its type, and the value when short."""
    names = {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        type(None): "null",
        int: "a number",
        float: "a number",
    }
    kind = names.get(type(value), type(value).__name__)
    if isinstance(value, (dict, list)) or value is None:
        return kind
    shown = repr(value)
    return f"{kind} ({visible(shown if len(shown) <= 40 else shown[:39] + '…')})"


def _name(key: str) -> str:
    return visible(key if len(key) <= 60 else key[:59] + "…")


def _fields(
    obj: JsonObject, schema: dict[str, Kind], where: str, problems: list[str]
) -> JsonObject:
    """`obj` (JSON as read, not yet checked) without the fields of `schema`
    that have the wrong type: what is left fits the record `schema` describes."""
    out = {}
    for key, value in obj.items():
        kind = schema.get(key)
        if kind is not None and not kind.test(value):
            name = f"{where}.{_name(key)}" if where else _name(key)
            problems.append(f"{name} is {what(value)}, expected {kind.words}; dropped")
            continue
        out[key] = value
    return out


def clean_attempt(attempt: Attempt) -> Attempt:
    """An attempt as it may be stored: fields of the wrong type left out silently
    (used when writing one; reading reports them)."""
    return cast(Attempt, _fields(dict(attempt), ATTEMPT, "attempt", []))


def _exercise(entry: Any, where: str, problems: list[str]) -> ExerciseEntry | None:
    if not isinstance(entry, dict):
        problems.append(f"{where} is {what(entry)}, expected an object; set aside")
        return None
    status = entry.get("status")
    out = _fields(
        {k: v for k, v in entry.items() if k not in ("status", "attempts")},
        EXERCISE,
        where,
        problems,
    )
    if "attempts" in entry:
        attempts = entry["attempts"]
        if isinstance(attempts, list):
            kept: list[Attempt] = []
            for i, a in enumerate(attempts):
                if isinstance(a, dict):
                    fit = _fields(a, ATTEMPT, f"{where}.attempts[{i}]", problems)
                    kept.append(cast(Attempt, fit))
                else:
                    problems.append(
                        f"{where}.attempts[{i}] is {what(a)}, expected an object; set aside"
                    )
            out["attempts"] = kept
        else:
            problems.append(f"{where}.attempts is {what(attempts)}, expected a list; set aside")
    if "status" in entry:
        if STATUS.test(status):
            out["status"] = Status(status)
        else:
            # What record_result would have written: passing once is progress.
            tried = out.get("attempts", [])
            redone = (
                Status.PASSED
                if any(a.get("passed") is True for a in tried)
                else Status.FAILED
                if tried
                else None
            )
            problems.append(
                f"{where}.status is {what(status)}, expected {STATUS.words}; "
                + (
                    f"recomputed from its attempts as {redone.value!r}"
                    if redone
                    else "dropped (no attempts to recompute it from)"
                )
            )
            if redone:
                out["status"] = redone
    # Keep the order of the keys as they came, for a diff-friendly file.
    # Each field of EXERCISE (and the attempts) now has its record's type.
    return cast(ExerciseEntry, {k: out[k] for k in entry if k in out})


def lesson_status(lesson: Lesson, entry: ExerciseEntry | None) -> Status:
    """What the course's list shows for `lesson` (one of gpulab.wire.status's
    LESSON), from its entry in the state's `exercises`: BROKEN where its
    content could not be loaded, COMING where it is not gradable yet, else
    what its checks left (NOT_STARTED: none)."""
    if lesson.error:
        return Status.BROKEN
    if not lesson.ready:
        return Status.COMING
    status = entry.get("status") if isinstance(entry, dict) else None
    return Status(status) if status in STATUSES else Status.NOT_STARTED


def validate_state(raw: Any) -> Checked:
    """Check a parsed state.json against the schema; never raises."""
    if not isinstance(raw, dict):
        return Checked(
            empty_state(), [f"the file holds {what(raw)}, expected an object"], unusable=True
        )
    problems: list[str] = []
    # JSON as read until every field below is checked; then it is a State.
    state = _fields(raw, TOP, "", problems)
    for key, value in empty_state().items():
        state.setdefault(key, value)

    exercises = state["exercises"]
    if not isinstance(exercises, dict):
        problems.append(f"exercises is {what(exercises)}, expected an object; set aside")
        exercises = {}
    kept: dict[str, ExerciseEntry] = {}
    for name, entry in exercises.items():
        checked = _exercise(entry, f"exercises.{_name(name)}", problems)
        if checked is not None:
            kept[name] = checked
    state["exercises"] = kept

    settings = state["settings"]
    if isinstance(settings, dict):
        state["settings"] = _fields(settings, SETTINGS, "settings", problems)
    else:
        problems.append(f"settings is {what(settings)}, expected an object; set aside")
        state["settings"] = {}
    return Checked(cast(State, state), problems)
