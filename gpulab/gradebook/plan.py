"""What to grade: the latest submission of each student's assigned
exercise that has no current run, and the batch file the workers read.

A run is current when it was made by this grader (`grader_version`: gpulab's
version and the sha256 of the exercise's grader module and of the judge's
and sandbox's machinery) against this reference (the sha256 of
`kernels/<exercise>.py`, which on a GPU is timed beside the submission), and
ended in a verdict: a run that could not happen (`error`) or was stopped
(`cancelled`) is graded again. A new file (another sha256) is a new
submission with no run. Old runs are kept; `everything` grades all again.

The batch (`work/batches/<id>.json`) holds one entry per student, each with
that student's tasks: a Slurm array task grades one student, not one file.
"""

from __future__ import annotations

import functools
import hashlib
import json
import secrets
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import cast

import gpulab
from gpulab.course.content import Course
from gpulab.fsutil import atomic_write_json
from gpulab.gradebook.config import GradeConfig
from gpulab.gradebook.records import BatchFile, TaskJson
from gpulab.wire.protocol import JsonObject

# The judge's verdicts; anything else is graded again.
VERDICTS = ("passed", "failed", "refused", "timeout", "crashed")


def _digest(paths: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(path.name.encode() + b"\0")
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(b"<missing>")
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def machinery_sha() -> str:
    """The judge's and the sandbox's code, graders apart: what every check runs
    (with the messages they exchange and the timing harness they share)."""
    pkg = Path(gpulab.__file__).resolve().parent
    files = [*(pkg / "judge").glob("*.py"), *(pkg / "sandbox").glob("*.py")]
    files += [*sorted((pkg / "wire").glob("*.py")), *sorted((pkg / "measure").glob("*.py"))]
    return _digest(files)[:12]


def grader_version(exercise: str) -> str:
    """`gpulab <version>+<grader sha>.<machinery sha>`, read from the files
    (the lab's process never imports the judge)."""
    pkg = Path(gpulab.__file__).resolve().parent
    grader = _digest([pkg / "judge" / "graders" / f"{exercise}.py"])[:12]
    return f"{gpulab.__version__}+{grader}.{machinery_sha()}"


def reference_sha(course: Course, exercise: str) -> str:
    lesson = course.find(exercise)
    if lesson is None:
        return "none"
    # A folder exercise's grader is its spec.py (and its formulas, exercise.toml):
    # a change to either grades its submissions again.
    extra = [lesson.folder / "spec.py", lesson.folder / "exercise.toml"] if lesson.folder else []
    return _digest([lesson.reference_path, *extra])[:16]


@dataclass(frozen=True)
class Task:
    student: str
    exercise: str
    submission: int
    sha256: str
    file: str
    grader_version: str
    reference_sha: str
    timing: bool
    why: str  # "new", "grader changed", "reference changed", "again after error", ...

    def to_json(self) -> TaskJson:
        return {
            "student": self.student,
            "exercise": self.exercise,
            "submission": self.submission,
            "sha256": self.sha256,
            "file": self.file,
            "grader_version": self.grader_version,
            "reference_sha": self.reference_sha,
            "timing": self.timing,
            "why": self.why,
        }


def stale(
    conn: sqlite3.Connection,
    cfg: GradeConfig,
    course: Course,
    *,
    everything: bool = False,
    exercises: Sequence[str] = (),
    students: Sequence[str] = (),
) -> list[Task]:
    """The tasks to grade, by student then exercise."""
    tasks: list[Task] = []
    versions = {ex: (grader_version(ex), reference_sha(course, ex)) for ex in cfg.exercises}
    rows = conn.execute(
        """
        SELECT s.* FROM submissions s JOIN students st ON st.id = s.student
        WHERE st.active = 1 AND s.id = (
          SELECT s2.id FROM submissions s2 WHERE s2.student = s.student AND s2.exercise = s.exercise
          ORDER BY s2.submitted_at DESC, s2.id DESC LIMIT 1)
        ORDER BY s.student, s.exercise
        """
    ).fetchall()
    for sub in rows:
        ex = sub["exercise"]
        a = cfg.assignment(ex)
        if (
            a is None
            or (exercises and ex not in exercises)
            or (students and sub["student"] not in students)
        ):
            continue
        grader, ref = versions[ex]
        last = conn.execute(
            "SELECT status, grader_version, reference_sha FROM runs WHERE submission_id = ?"
            " ORDER BY id DESC LIMIT 1",
            (sub["id"],),
        ).fetchone()
        if last is None:
            why = "new"
        elif everything:
            why = "asked for (--all)"
        elif last["status"] not in VERDICTS:
            why = f"again after {last['status']}"
        elif last["grader_version"] != grader:
            why = "grader changed"
        elif last["reference_sha"] != ref:
            why = "reference changed"
        else:
            continue
        tasks.append(
            Task(
                student=sub["student"],
                exercise=ex,
                submission=sub["id"],
                sha256=sub["sha256"],
                file=str((cfg.root / sub["path"]).resolve()),
                grader_version=grader,
                reference_sha=ref,
                timing=a.speed_points > 0,
                why=why,
            )
        )
    return tasks


def new_batch_id() -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(2)}"


def write_batch(
    root: Path,
    tasks: Sequence[Task],
    *,
    device: str,
    timeout: float | None,
    content_root: Path,
    batch: str | None = None,
) -> Path:
    """work/batches/<id>.json: a list of students, each with its tasks."""
    batch = batch or new_batch_id()
    by_student: dict[str, list[TaskJson]] = {}
    for t in tasks:
        by_student.setdefault(t.student, []).append(t.to_json())
    path = root / "work" / "batches" / f"{batch}.json"
    data: BatchFile = {
        "batch": batch,
        "course": str(root.resolve()),
        "content_root": str(content_root),
        "device": device,
        "timeout": timeout,
        "results": str((root / "work" / "results" / batch).resolve()),
        "students": [{"student": s, "tasks": ts} for s, ts in by_student.items()],
    }
    atomic_write_json(path, data)
    return path


# What a worker reads of a batch, by type: a batch file without one of these
# is refused naming the field, before any task of it is graded.
_BATCH_FIELDS: dict[str, type] = {"batch": str, "content_root": str, "results": str}
_TASK_FIELDS: dict[str, type] = {
    "student": str,
    "exercise": str,
    "submission": int,
    "sha256": str,
    "file": str,
    "grader_version": str,
    "reference_sha": str,
}


def read_batch(path: Path) -> BatchFile:
    """A batch file as write_batch wrote it, checked where the workers read
    it; a ValueError names the file and the field."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("students"), list):
        raise ValueError(f"{path}: not a gpulab batch file")
    _fields(data, _BATCH_FIELDS, f"{path}: not a gpulab batch file")
    for n, entry in enumerate(data["students"]):
        where = f"{path}: not a gpulab batch file: student #{n + 1}"
        if not isinstance(entry, dict) or not isinstance(entry.get("tasks"), list):
            raise ValueError(f"{where}: no list of tasks")
        for i, task in enumerate(entry["tasks"]):
            if not isinstance(task, dict):
                raise ValueError(f"{where}, task #{i + 1}: not a JSON object")
            _fields(task, _TASK_FIELDS, f"{where}, task #{i + 1}")
    # Checked above as far as the workers index it.
    return cast("BatchFile", data)


def _fields(data: JsonObject, types: dict[str, type], where: str) -> None:
    for key, kind in types.items():
        value = data.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):  # True is no submission id
            raise ValueError(f"{where}: field '{key}' is missing or not a {kind.__name__}")
