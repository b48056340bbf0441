"""A generated class for the gradebook's tests (the fixture `klass` in
conftest.py), graded by the real worker (gpulab.gradebook.worker) with the
judge replaced by recorded results (tests/fixtures/gradebook/): many
students cost no judge time. The few tests that keep the real judge in the
loop say so."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from tests.conftest import REPO

RECORDED = REPO / "tests" / "fixtures" / "gradebook" / "cpu"
CHEAT = REPO / "tests" / "fixtures" / "cheats" / "cached.py"
EXERCISES = ("copy_ceiling", "softmax", "comm_cost")
DUE = "2026-12-10T23:59:00Z"
ON_TIME = datetime(2026, 12, 9, 12, 0, tzinfo=timezone.utc)
TWO_DAYS_LATE = datetime(2026, 12, 12, 10, 0, tzinfo=timezone.utc)  # 1 d 10 h: 2 days

# student -> {exercise: kind}; s08 is on the roster with nothing handed in,
# s99 hands in without being on the roster.
CLASS: dict[str, dict[str, str]] = {
    "s01": {"copy_ceiling": "honest", "softmax": "honest", "comm_cost": "honest"},
    "s02": {"copy_ceiling": "honest", "softmax": "wrong", "comm_cost": "honest"},
    "s03": {"copy_ceiling": "wrong", "softmax": "cheat", "comm_cost": "wrong"},
    "s04": {"copy_ceiling": "wrong", "softmax": "crash"},
    "s05": {"softmax": "hang", "comm_cost": "honest"},
    "s06": {"softmax": "honest"},  # two days late
    "s07": {"softmax": "honest"},  # as late, with a three-day extension
    "s99": {"softmax": "honest"},
}
LATE = {("s06", "softmax"), ("s07", "softmax")}
ROSTER = """\ufeffStudent ID,Full Name,Email,SIS User ID,Canvas ID,Section
s01,Ada Lovelace,ada@uni.edu,1001,9001,A
s02,Alan Turing,alan@uni.edu,1002,9002,A
s03,Grace Hopper,grace@uni.edu,1003,9003,B
s04,Edsger Dijkstra,edsger@uni.edu,1004,9004,B
s05,Barbara Liskov,barbara@uni.edu,1005,9005,A
s06,Donald Knuth,donald@uni.edu,1006,9006,B
s07,Frances Allen,frances@uni.edu,1007,9007,A
s08,John Backus,john@uni.edu,1008,9008,B
"""


def submission_text(exercise: str, kind: str) -> str:
    """The file a student of this kind hands in, with its kind in a last line
    (the replay's key; the real judge ignores a comment)."""
    if kind == "honest":
        text = (REPO / "kernels" / f"{exercise}.py").read_text()
    elif kind == "wrong":
        text = (REPO / "exercises" / f"{exercise}.py").read_text()
    elif kind == "cheat":
        text = (REPO / "kernels" / f"{exercise}.py").read_text() + "\n" + CHEAT.read_text()
    elif kind == "crash":
        text = "import os\n\nos.kill(os.getpid(), 9)\n"
    elif kind == "hang":
        text = "def softmax(x):\n    while True:\n        pass\n"
    else:
        raise ValueError(kind)
    return text + f"\n# test kind: {kind}\n"


def recorded(exercise: str, kind: str) -> dict:
    name = {
        "honest": f"{exercise}_ref",
        "wrong": f"{exercise}_starter",
        "cheat": "softmax_cheat",
        "crash": "softmax_crash",
        "hang": "softmax_hang",
    }[kind]
    data = json.loads((RECORDED / f"{name}.json").read_text())
    data["exercise"] = exercise
    return data


@dataclass
class Replay:
    """A worker's `check`: the recorded result of the file's kind.
    `changed` maps a student (the store's folder) to another kind, for a
    second round whose grader judges that student's file otherwise."""

    calls: list[tuple[str, str]] = field(default_factory=list)
    changed: dict[str, str] = field(default_factory=dict)
    stop_after: int | None = None  # raise KeyboardInterrupt after this many calls

    def __call__(self, lesson, file: Path, timeout: float, timing: bool, device: str) -> dict:
        if self.stop_after is not None and len(self.calls) >= self.stop_after:
            raise KeyboardInterrupt
        kind = file.read_text().rsplit("# test kind: ", 1)[-1].strip()
        kind = self.changed.get(file.parent.name, kind)
        self.calls.append((file.name, kind))
        data = recorded(lesson.exercise, kind)
        data["file"] = str(file)
        return data


def copy_content(dest: Path) -> Path:
    """The course's content (lessons, starters, references) in a folder of
    the test's own, so a test may change a reference."""
    for part in ("lessons", "kernels", "exercises"):
        shutil.copytree(REPO / part, dest / part)
    return dest


@dataclass
class Class:
    root: Path
    content: Path
    subs: Path

    def folder(self):
        from gpulab.course.content import load_course
        from gpulab.gradebook.folder import CourseFolder

        return CourseFolder.open(self.root, load_course(self.content))

    def grade(self, replay: Replay, **stale_kw) -> tuple[Path, list]:
        """Plan, write the batch, run the real worker on every student with
        `replay` as its judge. Returns (batch, tasks)."""
        from gpulab.gradebook.plan import stale, write_batch
        from gpulab.gradebook.worker import Worker

        f = self.folder()
        tasks = stale(f.conn, f.cfg, f.course, **stale_kw)
        batch = write_batch(f.root, tasks, device="cpu", timeout=None, content_root=self.content)
        worker = Worker(batch, check=replay)
        for i in range(len(worker.batch["students"])):
            worker.grade_student(i)
        f.close()
        return batch, tasks


def write_gradebook_toml(root: Path, extra: str = "") -> None:
    (root / "gradebook.toml").write_text(
        f"""
[course]
name = "GPU 101"
device = "cpu"

[late]
policy = "percent_per_day"
percent_per_day = 10

[[assignment]]
exercise = "copy_ceiling"
due = {DUE}
points = 5

[[assignment]]
exercise = "softmax"
due = {DUE}
points = 10
speed_points = 3
canvas_column = "Softmax (4412)"

[[assignment]]
exercise = "comm_cost"
due = {DUE}
points = 5

[[extension]]
student = "s07"
exercise = "softmax"
days = 3
{extra}""",
        encoding="utf-8",
    )


def make_class(tmp_path: Path) -> Class:
    """The class, collected: gradebook.toml, the roster, every file placed."""
    from gpulab.gradebook.collect import collect
    from gpulab.gradebook.folder import import_roster
    from gpulab.gradebook.roster import parse_roster

    content = copy_content(tmp_path / "content")
    root = tmp_path / "course"
    root.mkdir()
    write_gradebook_toml(root)
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    subs = tmp_path / "subs"
    for student, work in CLASS.items():
        for ex, kind in work.items():
            path = subs / student / f"{ex}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(submission_text(ex, kind))
            when = TWO_DAYS_LATE if (student, ex) in LATE else ON_TIME
            os.utime(path, (when.timestamp(), when.timestamp()))
    k = Class(root, content, subs)
    f = k.folder()
    import_roster(f.conn, parse_roster(tmp_path / "roster.csv"))
    k.report = collect(f.conn, root, subs, f.cfg.exercises)
    f.close()
    return k
