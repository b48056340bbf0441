"""Collect submissions into the gradebook, from a folder or a .zip in one of
three layouts (each entry's own name says which, or `layout` forces one):

- folder: `<student>/<exercise>.py`, the student's roster id as the folder;
- Canvas's bulk download: `<name>_<userid>_<submissionid>_<file>`, with
  `late` after the name when Canvas marked it late, and `-1`, `-2`, ... before
  the extension when a student uploaded a file of that name again (the
  highest number is the latest); `userid` is matched with the roster's LMS id,
  else the name with the roster's names;
- Moodle's: `<Full Name>_<participant>_assignsubmission_file_/<file>` (a
  folder per student) or the same flattened into one name; matched by name.

The exercise is the file's name (`softmax.py`), or `exercise` for a
download of one assignment whose students named their files freely.

Nothing is dropped silently: every entry is placed, unchanged (collected
before, the same bytes) or in the report with why not (unknown student,
unknown exercise, a duplicate, superseded by a later upload, not a Python
file, too large, unreadable). A placed file is copied into the course's
store under its sha256 and never overwritten.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sqlite3
import tempfile
import unicodedata
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone, tzinfo
from pathlib import Path
from typing import TypedDict

from gpulab.gradebook.store import now, writing

MAX_BYTES = 8 << 20  # the judge's own limit on a submission
LAYOUTS = ("auto", "folder", "canvas", "moodle")

_CANVAS = re.compile(
    r"^(?P<name>[^_/]+?)(?:_(?P<late>LATE|late))?_(?P<user>\d+)_(?P<sub>\d+)_(?P<file>.+)$"
)
_MOODLE = re.compile(
    r"^(?P<name>.+?)_(?P<pid>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<rest>.*)$", re.S
)
_RESUBMIT = re.compile(r"^(?P<stem>.+?)-(?P<n>\d+)$")


@dataclass(frozen=True)
class Entry:
    """One file of the source: its name relative to the source, bytes, time."""

    name: str
    data: bytes | None
    mtime: datetime | None
    problem: str = ""  # why it could not be read


@dataclass
class Candidate:
    entry: Entry
    student: str
    exercise: str
    rank: int  # Canvas's resubmission number: higher is later
    late: bool
    layout: str


class ProblemJson(TypedDict):
    file: str  # the source's file
    why: str


class ReportJson(TypedDict):
    """`gpulab grade collect --json`: [student, exercise, source] triples."""

    placed: list[list[str]]
    unchanged: list[list[str]]
    problems: list[ProblemJson]


@dataclass
class Report:
    placed: list[tuple[str, str, str]] = field(default_factory=list)  # student, exercise, source
    unchanged: list[tuple[str, str, str]] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # source, why

    def to_json(self) -> ReportJson:
        return {
            "placed": [list(p) for p in self.placed],
            "unchanged": [list(p) for p in self.unchanged],
            "problems": [{"file": f, "why": w} for f, w in self.problems],
        }


# --- reading the source ------------------------------------------------------


def entries(source: Path, tz: tzinfo = timezone.utc) -> Iterator[Entry]:
    """Every file under `source` (a folder or a .zip), sorted by name."""
    if source.is_file() and zipfile.is_zipfile(source):
        yield from _zip_entries(source, tz)
        return
    if not source.is_dir():
        raise FileNotFoundError(f"{source}: not a folder or a .zip file")
    for top, dirs, files in os.walk(source):
        dirs.sort()
        for name in sorted(files):
            path = Path(top) / name
            rel = path.relative_to(source).as_posix()
            try:
                if path.is_symlink() or not path.is_file():
                    yield Entry(rel, None, None, "not a plain file (a link or a device)")
                    continue
                size = path.stat().st_size
                if size > MAX_BYTES:
                    yield Entry(rel, None, None, f"larger than {MAX_BYTES >> 20} MiB")
                    continue
                mtime = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
                yield Entry(rel, path.read_bytes(), mtime)
            except OSError as exc:
                yield Entry(rel, None, None, f"cannot be read: {exc.strerror or exc}")


def _zip_entries(source: Path, tz: tzinfo) -> Iterator[Entry]:
    # Names are only read, never extracted to a path: a `../` in one is harmless.
    with zipfile.ZipFile(source) as zf:
        for info in sorted(zf.infolist(), key=lambda i: i.filename):
            if info.is_dir():
                continue
            name = f"{source.name}:{info.filename}"
            if info.file_size > MAX_BYTES:
                yield Entry(name, None, None, f"larger than {MAX_BYTES >> 20} MiB")
                continue
            try:
                data = zf.read(info)
            except (zipfile.BadZipFile, OSError, RuntimeError) as exc:
                yield Entry(name, None, None, f"cannot be read from the archive: {exc}")
                continue
            # A zip's times carry no zone: the course's.
            yield Entry(name, data, datetime(*info.date_time, tzinfo=tz))


# --- who and what --------------------------------------------------------------


def name_key(text: str) -> str:
    """A name as LMSs flatten it: accents and case gone, letters and digits only."""
    plain = unicodedata.normalize("NFKD", text)
    return "".join(c for c in plain if c.isalnum() and not unicodedata.combining(c)).casefold()


def name_keys(name: str) -> set[str]:
    """The keys a roster name can appear as: "John Smith", "Smith, John",
    "smithjohn" (Canvas: last name first), "johnsmith"."""
    if "," in name:
        last, first = (p.strip() for p in name.split(",", 1))
    else:
        parts = name.split()
        first, last = " ".join(parts[:-1]), (parts[-1] if parts else "")
    return {k for k in (name_key(name), name_key(last + first), name_key(first + last)) if k}


class Matcher:
    """Roster ids, LMS ids and names -> student id (None: unknown; a
    string starting with '?' says why it is ambiguous)."""

    def __init__(self, students: Sequence[sqlite3.Row]) -> None:
        self.ids = {s["id"] for s in students}
        self.lms = {s["lms_id"]: s["id"] for s in students if s["lms_id"]}
        self.names: dict[str, set[str]] = {}
        for s in students:
            for key in name_keys(s["name"]):
                self.names.setdefault(key, set()).add(s["id"])
            for other in (s["email"], s["sis_login_id"], s["sis_user_id"]):
                if other:
                    self.names.setdefault(name_key(other), set()).add(s["id"])

    def by_name(self, name: str) -> tuple[str | None, str]:
        found = self.names.get(name_key(name), set())
        if len(found) > 1:
            return None, f"{len(found)} students of the roster match the name {name!r}"
        if not found:
            return None, f"unknown student {name!r} (not in the roster)"
        return next(iter(found)), ""


def exercise_of(filename: str, assigned: Sequence[str], forced: str) -> tuple[str, int, str]:
    """(exercise, resubmission number, problem) from a submitted file's name."""
    base = filename.rsplit("/", 1)[-1]
    if not base.endswith(".py"):
        return "", 0, "not a Python file (.py)"
    stem, rank = base[:-3], 0
    m = _RESUBMIT.match(stem)
    if m and m["stem"] in assigned:
        stem, rank = m["stem"], int(m["n"])
    if forced:
        return forced, rank, ""
    if stem not in assigned:
        return "", rank, f"unknown exercise {stem!r} (assigned: {', '.join(assigned)})"
    return stem, rank, ""


def classify(
    entry: Entry, match: Matcher, assigned: Sequence[str], layout: str, forced: str
) -> Candidate | str:
    """Where `entry` goes, or why it cannot go anywhere."""
    rel = entry.name.split(":", 1)[-1]  # inside an archive: its own name
    parts = rel.split("/")
    if any(p.startswith(".") or p == "__MACOSX" for p in parts):
        return "a hidden or system file, not a submission"
    m = _MOODLE.match(rel.replace("/", "", 1) if len(parts) == 2 else rel)
    if layout in ("auto", "moodle") and m and len(parts) <= 2:
        student, why = match.by_name(m["name"])
        file = parts[-1] if len(parts) == 2 else m["rest"]
        kind = "moodle"
        rank, late = 0, False
    elif layout in ("auto", "canvas") and len(parts) == 1 and (c := _CANVAS.match(rel)):
        student = match.lms.get(c["user"])
        why = ""
        if student is None:
            student, why = match.by_name(c["name"])
            if student is None:
                why = (
                    f"unknown student {c['name']!r} (Canvas user {c['user']} is not in the roster)"
                )
        file, kind, rank, late = c["file"], "canvas", 0, c["late"] is not None
    elif layout in ("auto", "folder") and len(parts) == 2:
        student = parts[0] if parts[0] in match.ids else None
        why = "" if student else f"unknown student {parts[0]!r} (not in the roster)"
        file, kind, rank, late = parts[1], "folder", 0, False
    else:
        return f"not in the {layout} layout" if layout != "auto" else "in no layout gpulab knows"
    exercise, resubmitted, problem = exercise_of(file, assigned, forced)
    if problem:
        return problem
    if student is None:
        return why
    return Candidate(entry, student, exercise, max(rank, resubmitted), late, kind)


# --- placing ---------------------------------------------------------------------


def collect(
    conn: sqlite3.Connection,
    root: Path,
    source: Path,
    assigned: Sequence[str],
    *,
    layout: str = "auto",
    exercise: str = "",
    submitted_at: datetime | None = None,
    tz: tzinfo = timezone.utc,
) -> Report:
    """Place every file of `source` it can; the report lists the rest."""
    students = conn.execute("SELECT * FROM students").fetchall()
    match = Matcher(students)
    report = Report()
    chosen: dict[tuple[str, str], list[Candidate]] = {}
    for entry in entries(source, tz):
        if entry.problem:
            report.problems.append((entry.name, entry.problem))
            continue
        got = classify(entry, match, assigned, layout, exercise)
        if isinstance(got, str):
            report.problems.append((entry.name, got))
        else:
            chosen.setdefault((got.student, got.exercise), []).append(got)
    store = root / "store"
    with writing(conn):
        for (student, ex), cands in sorted(chosen.items()):
            cand = _one(cands, report)
            if cand is None:
                continue
            assert cand.entry.data is not None
            sha = hashlib.sha256(cand.entry.data).hexdigest()
            when = submitted_at or cand.entry.mtime or datetime.now(timezone.utc)
            known = conn.execute(
                "SELECT id FROM submissions WHERE student = ? AND exercise = ? AND sha256 = ?",
                (student, ex, sha),
            ).fetchone()
            if known is not None:
                report.unchanged.append((student, ex, cand.entry.name))
                continue
            path = store / student / f"{ex}.{sha[:12]}.py"
            if not path.is_file():
                _write_bytes(path, cand.entry.data)  # as handed in, whatever its encoding
            conn.execute(
                "INSERT INTO submissions (student, exercise, sha256, path, source, submitted_at,"
                " collected_at, lms_late, size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    student,
                    ex,
                    sha,
                    str(path.relative_to(root)),
                    f"{cand.layout}:{cand.entry.name}",
                    when.isoformat(timespec="seconds"),
                    now(),
                    int(cand.late),
                    len(cand.entry.data),
                ),
            )
            report.placed.append((student, ex, cand.entry.name))
    return report


def _write_bytes(path: Path, data: bytes) -> None:
    """`data` at `path`, through a temporary file and a rename: whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _one(cands: list[Candidate], report: Report) -> Candidate | None:
    """The one file of a student's exercise: the latest upload; two of the
    same rank with different bytes are a duplicate, and neither is placed."""
    cands.sort(key=lambda c: c.rank, reverse=True)
    top = [c for c in cands if c.rank == cands[0].rank]
    for c in cands[len(top) :]:
        report.problems.append(
            (c.entry.name, f"superseded by {top[0].entry.name} (a later upload)")
        )
    distinct = {c.entry.data for c in top}
    if len(distinct) > 1:
        names = ", ".join(c.entry.name for c in top)
        for c in top:
            report.problems.append(
                (
                    c.entry.name,
                    f"duplicate: {len(top)} different files for {c.student}'s {c.exercise} ({names}); none placed",
                )
            )
        return None
    for c in top[1:]:
        report.problems.append(
            (c.entry.name, f"duplicate of {top[0].entry.name} (the same bytes, placed once)")
        )
    return top[0]
