"""A course folder's settings: `gradebook.toml`, written by `gpulab grade
init` and edited by the instructor.

It names the exercises assigned (each with a due date and its points, of
which `speed_points` come from speed on a GPU), the late policy (none, zero,
or a percentage off per day late), per-student extensions, and how a check
runs (device, time limit). Every field is checked when the file is read: a
misspelt or mistyped one is an error naming the file, the table and the
field, never a silent default.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any

from gpulab.fsutil import load_toml
from gpulab.wire.protocol import JsonObject

CONFIG_NAME = "gradebook.toml"
LATE_POLICIES = ("none", "zero", "percent_per_day")
DEVICES = ("auto", "cpu", "cuda")


class GradeConfigError(Exception):
    """gradebook.toml is missing or wrong (the message names file and field)."""


@dataclass(frozen=True)
class Assignment:
    """One exercise of the course, assigned: due when, worth how much.
    `speed_points` of `points` come from the kernel's speed against the
    reference's on the same GPU; on a CPU nothing is timed and they are
    not awarded (the exports and feedback say so)."""

    exercise: str
    points: float
    speed_points: float = 0.0
    due: datetime | None = None
    title: str = ""
    canvas_column: str = ""  # the Canvas gradebook's header, e.g. "Softmax (4412)"

    @property
    def column(self) -> str:
        return self.canvas_column or self.title or self.exercise


@dataclass(frozen=True)
class LatePolicy:
    kind: str = "none"
    percent_per_day: float = 0.0
    grace_minutes: float = 0.0

    def factor(self, days_late: int) -> float:
        """What a score is multiplied by when it is `days_late` days late."""
        if days_late <= 0 or self.kind == "none":
            return 1.0
        if self.kind == "zero":
            return 0.0
        return max(0.0, 1.0 - self.percent_per_day / 100.0 * days_late)

    def describe(self) -> str:
        if self.kind == "none":
            return "no late penalty"
        if self.kind == "zero":
            return "late work scores 0"
        return f"{self.percent_per_day:g}% off per day late"


@dataclass(frozen=True)
class Extension:
    student: str
    exercise: str  # "" for every assignment
    due: datetime


@dataclass(frozen=True)
class GradeConfig:
    path: Path
    name: str
    assignments: tuple[Assignment, ...]
    late: LatePolicy = LatePolicy()
    extensions: tuple[Extension, ...] = ()
    device: str = "auto"
    timeout: float | None = None  # None: gpulab check's default for the device
    speed_full_at: float = 0.9
    speed_zero_at: float = 0.25
    tz: tzinfo = timezone.utc

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def exercises(self) -> list[str]:
        return [a.exercise for a in self.assignments]

    def assignment(self, exercise: str) -> Assignment | None:
        return next((a for a in self.assignments if a.exercise == exercise), None)

    def due_for(self, student: str, exercise: str) -> tuple[datetime | None, bool]:
        """(the due date for this student, whether an extension set it)."""
        for ext in reversed(self.extensions):  # the last one written wins
            if ext.student == student and ext.exercise in ("", exercise):
                return ext.due, True
        a = self.assignment(exercise)
        return (a.due if a else None), False

    def days_late(self, student: str, exercise: str, submitted: datetime | None) -> int:
        """Whole days (rounded up) past the due date and the grace minutes."""
        due, _ = self.due_for(student, exercise)
        if due is None or submitted is None:
            return 0
        over = submitted - due - timedelta(minutes=self.late.grace_minutes)
        if over <= timedelta(0):
            return 0
        return math.ceil(over / timedelta(days=1))


# --- reading ------------------------------------------------------------------

_COURSE_FIELDS = ("name", "device", "timeout", "timezone")
_LATE_FIELDS = ("policy", "percent_per_day", "grace_minutes")
_SPEED_FIELDS = ("full_at", "zero_at")
_ASSIGNMENT_FIELDS = ("exercise", "points", "speed_points", "due", "title", "canvas_column")
_EXTENSION_FIELDS = ("student", "exercise", "due", "days")
_TOP = ("course", "late", "speed", "assignment", "extension")


def _known(table: JsonObject, allowed: Sequence[str], where: str) -> None:
    for key in table:
        if key not in allowed:
            raise GradeConfigError(
                f"{where}: '{key}' is not a field here (known: {', '.join(allowed)})"
            )


def _table(data: JsonObject, key: str, where: str) -> JsonObject:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise GradeConfigError(f"{where}: [{key}] must be a table")
    return value


def _number(table: JsonObject, key: str, where: str, default: float, low: float = 0.0) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise GradeConfigError(f"{where}: field '{key}' must be a number, got {value!r}")
    if value < low:
        raise GradeConfigError(f"{where}: field '{key}' must be at least {low:g}, got {value!r}")
    return float(value)


def _text(table: JsonObject, key: str, where: str, default: str = "") -> str:
    value = table.get(key, default)
    if not isinstance(value, str):
        raise GradeConfigError(f"{where}: field '{key}' must be a string, got {value!r}")
    return value


def _zone(name: str, where: str) -> tzinfo:
    if name in ("", "UTC", "utc"):
        return timezone.utc
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    except (ValueError, OSError, KeyError) as exc:  # ZoneInfoNotFoundError is a KeyError
        raise GradeConfigError(f"{where}: field 'timezone': unknown time zone {name!r}") from exc


def parse_when(value: Any, tz: tzinfo, where: str, key: str = "due") -> datetime:
    """A due date: a TOML date-time (with an offset, or local to the course's
    time zone), a TOML date (the end of that day), or the same as an ISO string."""
    if isinstance(value, str):
        text = value.strip()
        try:
            # A date alone is the end of that day (fromisoformat would say midnight).
            if len(text) == 10:
                value = date.fromisoformat(text)
            else:
                value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise GradeConfigError(
                f"{where}: field '{key}' must be a date or date-time "
                f"(2026-12-20 or 2026-12-20T23:59:00+01:00), got {value!r}"
            ) from None
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=tz)
    if isinstance(value, date):
        return datetime.combine(value, time(23, 59, 59), tz)
    raise GradeConfigError(f"{where}: field '{key}' must be a date or date-time, got {value!r}")


def _assignment(entry: Any, n: int, where: str, tz: tzinfo) -> Assignment:
    at = f"{where} [[assignment]] #{n}"
    if not isinstance(entry, dict):
        raise GradeConfigError(f"{at}: expected a table")
    exercise = _text(entry, "exercise", at)
    if not exercise:
        raise GradeConfigError(f"{at}: field 'exercise' is missing")
    at = f"{where} [[assignment]] #{n} ('{exercise}')"
    _known(entry, _ASSIGNMENT_FIELDS, at)
    points = _number(entry, "points", at, 10.0)
    speed = _number(entry, "speed_points", at, 0.0)
    if speed > points:
        raise GradeConfigError(f"{at}: field 'speed_points' ({speed:g}) is more than 'points'")
    due = parse_when(entry["due"], tz, at) if "due" in entry else None
    return Assignment(
        exercise=exercise,
        points=points,
        speed_points=speed,
        due=due,
        title=_text(entry, "title", at),
        canvas_column=_text(entry, "canvas_column", at),
    )


def _extension(entry: Any, n: int, where: str, cfg: dict[str, Assignment], tz: tzinfo) -> Extension:
    at = f"{where} [[extension]] #{n}"
    if not isinstance(entry, dict):
        raise GradeConfigError(f"{at}: expected a table")
    _known(entry, _EXTENSION_FIELDS, at)
    student = _text(entry, "student", at)
    if not student:
        raise GradeConfigError(f"{at}: field 'student' is missing")
    exercise = _text(entry, "exercise", at)
    if exercise and exercise not in cfg:
        raise GradeConfigError(f"{at}: exercise '{exercise}' is not assigned")
    if ("due" in entry) == ("days" in entry):
        raise GradeConfigError(f"{at}: give either 'due' or 'days' (days added to the due date)")
    if "due" in entry:
        return Extension(student, exercise, parse_when(entry["due"], tz, at))
    days = _number(entry, "days", at, 0.0)
    base = cfg[exercise].due if exercise else None
    if base is None:
        raise GradeConfigError(
            f"{at}: 'days' needs an assignment with a due date: name its 'exercise', or give 'due'"
        )
    return Extension(student, exercise, base + timedelta(days=days))


def load_config(path: Path, known_exercises: Sequence[str] | None = None) -> GradeConfig:
    """Read and check gradebook.toml. `known_exercises`: the course's, which
    every assignment must name."""
    data = load_toml(path, GradeConfigError, "no gradebook here: `gpulab grade init` makes one")
    where = str(path)
    _known(data, _TOP, where)
    course = _table(data, "course", where)
    _known(course, _COURSE_FIELDS, f"{where} [course]")
    tz = _zone(_text(course, "timezone", f"{where} [course]", "UTC"), f"{where} [course]")
    device = _text(course, "device", f"{where} [course]", "auto")
    if device not in DEVICES:
        raise GradeConfigError(f"{where} [course]: field 'device' must be one of {DEVICES}")
    timeout = _number(course, "timeout", f"{where} [course]", 0.0)
    late = _table(data, "late", where)
    _known(late, _LATE_FIELDS, f"{where} [late]")
    kind = _text(late, "policy", f"{where} [late]", "none")
    if kind not in LATE_POLICIES:
        raise GradeConfigError(f"{where} [late]: field 'policy' must be one of {LATE_POLICIES}")
    policy = LatePolicy(
        kind=kind,
        percent_per_day=_number(late, "percent_per_day", f"{where} [late]", 0.0),
        grace_minutes=_number(late, "grace_minutes", f"{where} [late]", 0.0),
    )
    speed = _table(data, "speed", where)
    _known(speed, _SPEED_FIELDS, f"{where} [speed]")
    full = _number(speed, "full_at", f"{where} [speed]", 0.9)
    zero = _number(speed, "zero_at", f"{where} [speed]", 0.25)
    if not zero < full:
        raise GradeConfigError(f"{where} [speed]: 'zero_at' must be below 'full_at'")
    raw = data.get("assignment", [])
    if not isinstance(raw, list) or not raw:
        raise GradeConfigError(f"{where}: no [[assignment]] tables (one per exercise assigned)")
    assignments = [_assignment(e, n + 1, where, tz) for n, e in enumerate(raw)]
    seen: dict[str, Assignment] = {}
    for n, a in enumerate(assignments):
        if a.exercise in seen:
            raise GradeConfigError(
                f"{where} [[assignment]] #{n + 1}: '{a.exercise}' is assigned twice"
            )
        if known_exercises is not None and a.exercise not in known_exercises:
            import difflib

            close = difflib.get_close_matches(a.exercise, list(known_exercises), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise GradeConfigError(
                f"{where} [[assignment]] #{n + 1}: '{a.exercise}' is not an exercise of the course{hint}"
            )
        seen[a.exercise] = a
    raw_ext = data.get("extension", [])
    if not isinstance(raw_ext, list):
        raise GradeConfigError(f"{where}: 'extension' must be an array of tables ([[extension]])")
    return GradeConfig(
        path=path,
        name=_text(course, "name", f"{where} [course]", path.parent.name),
        assignments=tuple(assignments),
        late=policy,
        extensions=tuple(_extension(e, n + 1, where, seen, tz) for n, e in enumerate(raw_ext)),
        device=device,
        timeout=timeout or None,
        speed_full_at=full,
        speed_zero_at=zero,
        tz=tz,
    )


# --- writing (gpulab grade init) -----------------------------------------------


def template(
    name: str,
    assignments: Sequence[tuple[str, str, float, float]],
    late: str = "percent_per_day",
) -> str:
    """gradebook.toml for a new course: (exercise, due, points, speed points)
    per assignment, with every field commented."""
    lines = [
        "# gpulab grade: this course's settings. Edit freely; every command checks",
        "# this file and names the field it cannot use.",
        "",
        "[course]",
        f"name = {_quote(name)}",
        "# auto: a GPU when the worker sees one, else the CPU (correctness only, no speed points)",
        'device = "auto"',
        "# Seconds a check may run before it is stopped and recorded as a timeout;",
        "# 0: gpulab check's own default (60 on the CPU, 300 on a GPU).",
        "timeout = 0",
        '# Due dates without an offset are in this zone ("UTC", "Europe/Paris").',
        'timezone = "UTC"',
        "",
        "[late]",
        "# none, zero (late work scores 0) or percent_per_day (off the score per day late).",
        f'policy = "{late}"',
        "percent_per_day = 10",
        "# Minutes after the due date still counted on time.",
        "grace_minutes = 15",
        "",
        "[speed]",
        "# Speed points compare each kernel with the reference kernel timed on the",
        "# same GPU in the same job: at full_at of the reference's speed or faster,",
        "# all of them; at zero_at or slower, none; linear between.",
        "full_at = 0.9",
        "zero_at = 0.25",
    ]
    for exercise, due, points, speed in assignments:
        lines += [
            "",
            "[[assignment]]",
            f'exercise = "{exercise}"',
            f"due = {due}" if due else "# due = 2026-12-20T23:59:00Z",
            f"points = {points:g}",
            f"speed_points = {speed:g}  # of the points; awarded only when timed on a GPU",
            f'# canvas_column = "{exercise} (12345)"  # the Canvas gradebook column to fill',
        ]
    lines += [
        "",
        "# One table per extension: a student's own due date for one assignment",
        "# (or all of them when 'exercise' is left out); 'days' adds to the due date.",
        "# [[extension]]",
        '# student = "s1001"',
        f'# exercise = "{assignments[0][0] if assignments else "softmax"}"',
        "# days = 2",
        "",
    ]
    return "\n".join(lines)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
