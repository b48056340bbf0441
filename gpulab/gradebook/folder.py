"""A course folder: gradebook.toml, the gradebook beside it, the store of
collected files, the workers' batches and results, and the exports.

    COURSE/
      gradebook.toml        the settings (gpulab.gradebook.config)
      gradebook.sqlite      the gradebook (gpulab.gradebook.store)
      store/<student>/      every file collected, by sha256, never overwritten
      work/batches/         one file per batch: its students and their tasks
      work/results/<batch>/ the workers' result files, one per task
      exports/              what `gpulab grade export` and `similar` write
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from gpulab.course.content import Course
from gpulab.gradebook.config import CONFIG_NAME, GradeConfig, GradeConfigError, load_config
from gpulab.gradebook.roster import Roster
from gpulab.gradebook.store import DB_NAME, connect, now, writing


def find_root(start: Path) -> Path:
    """The folder holding gradebook.toml: `start` or the nearest above it."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / CONFIG_NAME).is_file():
            return folder
    raise GradeConfigError(
        f"no {CONFIG_NAME} in {start} or above it: `gpulab grade init DIR` makes a course "
        "folder, or name one with --course DIR"
    )


@dataclass
class CourseFolder:
    root: Path
    cfg: GradeConfig
    course: Course
    conn: sqlite3.Connection

    @classmethod
    def open(cls, root: Path, course: Course) -> CourseFolder:
        cfg = load_config(root / CONFIG_NAME, course.exercise_ids)
        conn = connect(root / DB_NAME, create=True)
        folder = cls(root, cfg, course, conn)
        folder.sync_exercises()
        return folder

    def sync_exercises(self) -> None:
        """The exercises table as gradebook.toml has them now (for readers
        of the file who do not read the TOML: the view, a SQL query)."""
        with writing(self.conn):
            self.conn.execute("DELETE FROM exercises")
            for i, a in enumerate(self.cfg.assignments):
                lesson = self.course.find(a.exercise)
                self.conn.execute(
                    "INSERT INTO exercises (id, title, points, speed_points, due, position)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        a.exercise,
                        a.title or (lesson.exercise_title if lesson else a.exercise),
                        a.points,
                        a.speed_points,
                        a.due.isoformat() if a.due else None,
                        i,
                    ),
                )

    def close(self) -> None:
        self.conn.close()


@dataclass(frozen=True)
class RosterChange:
    added: list[str]
    updated: list[str]
    dropped: list[str]  # in the gradebook, not in this roster: kept, marked inactive


def import_roster(conn: sqlite3.Connection, roster: Roster) -> RosterChange:
    """Add or update every student of `roster`; a student of the gradebook
    missing from it is kept (with their runs) but no longer active."""
    old = {r["id"]: r for r in conn.execute("SELECT * FROM students")}
    added, updated = [], []
    fields = ("name", "email", "lms_id", "sis_user_id", "sis_login_id", "section")
    with writing(conn):
        for s in roster.students:
            values = [getattr(s, f) for f in fields]
            if s.id not in old:
                added.append(s.id)
                conn.execute(
                    "INSERT INTO students (id, name, email, lms_id, sis_user_id, sis_login_id,"
                    " section, active, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?)",
                    (s.id, *values, now()),
                )
            elif [old[s.id][f] for f in fields] != values or not old[s.id]["active"]:
                updated.append(s.id)
                conn.execute(
                    "UPDATE students SET name = ?, email = ?, lms_id = ?, sis_user_id = ?,"
                    " sis_login_id = ?, section = ?, active = 1, updated_at = ? WHERE id = ?",
                    (*values, now(), s.id),
                )
        ids = {s.id for s in roster.students}
        dropped = [sid for sid, r in old.items() if sid not in ids and r["active"]]
        for sid in dropped:
            conn.execute(
                "UPDATE students SET active = 0, updated_at = ? WHERE id = ?", (now(), sid)
            )
    return RosterChange(added, updated, dropped)
