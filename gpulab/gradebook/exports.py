"""The gradebook as the LMSs import it, and as a long table.

- Canvas's gradebook CSV: `Student, ID, SIS User ID, SIS Login ID, Section`,
  then one column per assignment (its `canvas_column`, which must be the
  header of Canvas's own column, "Softmax (4412)", for Canvas to match it),
  and optionally Canvas's "Points Possible" row under the header. A cell
  left empty (a submission not graded yet) leaves Canvas's grade as it is.
- Moodle's grade import CSV: an identity column (`Email address` or `ID
  number`, which Moodle maps to the user), `Full name`, one column per
  assignment.
- A long CSV: one row per student and exercise, with everything behind the
  number (status, lateness, override, speed, device).

A student with no submission gets 0; the grades are gpulab.gradebook.query's.
"""

from __future__ import annotations

import csv
import io
import sqlite3
from collections.abc import Sequence

from gpulab.gradebook import query
from gpulab.gradebook.config import GradeConfig

CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
MOODLE_IDENTITY = {"email": ("Email address", "email"), "idnumber": ("ID number", "sis_user_id")}
LONG_COLUMNS = (
    "student",
    "name",
    "email",
    "section",
    "exercise",
    "status",
    "final",
    "max_points",
    "score",
    "days_late",
    "late_factor",
    "extended",
    "lms_late",
    "submitted_at",
    "override",
    "override_comment",
    "speed_ratio",
    "device",
    "gpu",
    "summary",
    "run_id",
)


def number(value: float | None) -> str:
    if value is None:
        return ""
    return f"{round(value, 2):g}"


def _csv(rows: Sequence[Sequence[object]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerows(rows)
    return out.getvalue()


def canvas(conn: sqlite3.Connection, cfg: GradeConfig, *, points_row: bool = True) -> str:
    grid = query.grid(conn, cfg)
    rows: list[list[object]] = [[*CANVAS_IDENTITY, *(a.column for a in cfg.assignments)]]
    if points_row:
        # Canvas's own export writes it so, indented, in the Student column.
        rows.append(
            ["    Points Possible", "", "", "", "", *(number(a.points) for a in cfg.assignments)]
        )
    for st in query.students(conn):
        rows.append(
            [
                st["name"],
                st["lms_id"],
                st["sis_user_id"],
                st["sis_login_id"],
                st["section"],
                *(number(grid[(st["id"], a.exercise)].final) for a in cfg.assignments),
            ]
        )
    return _csv(rows)


def moodle(conn: sqlite3.Connection, cfg: GradeConfig, *, identity: str = "email") -> str:
    header, field = MOODLE_IDENTITY[identity]
    grid = query.grid(conn, cfg)
    rows: list[list[object]] = [
        [header, "Full name", *(a.title or a.exercise for a in cfg.assignments)]
    ]
    for st in query.students(conn):
        rows.append(
            [
                st[field],
                st["name"],
                *(number(grid[(st["id"], a.exercise)].final) for a in cfg.assignments),
            ]
        )
    return _csv(rows)


def missing_identity(conn: sqlite3.Connection, identity: str) -> list[str]:
    """Students Moodle could not match: no email (or ID number) in the roster."""
    field = MOODLE_IDENTITY[identity][1]
    return [st["id"] for st in query.students(conn) if not st[field]]


def long(conn: sqlite3.Connection, cfg: GradeConfig) -> str:
    grid = query.grid(conn, cfg)
    rows: list[list[object]] = [list(LONG_COLUMNS)]
    for st in query.students(conn):
        for a in cfg.assignments:
            c = grid[(st["id"], a.exercise)]
            rows.append(
                [
                    st["id"],
                    st["name"],
                    st["email"],
                    st["section"],
                    a.exercise,
                    c.status,
                    number(c.final),
                    number(c.max_score),
                    number(c.score),
                    c.days_late,
                    number(c.late_factor),
                    int(c.extended),
                    int(c.lms_late),
                    c.submitted_at,
                    number(c.override),
                    c.override_comment,
                    "" if c.speed_ratio is None else f"{c.speed_ratio:.3f}",
                    c.device,
                    c.gpu,
                    c.summary,
                    c.run_id or "",
                ]
            )
    return _csv(rows)
