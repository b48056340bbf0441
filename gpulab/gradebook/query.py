"""The grade of each student for each assignment, read from the gradebook:
what `status`, the exports, the feedback and the view all show.

A student's grade for an exercise comes from the latest submission's latest
run, its points recomputed from the run's facts (passed, speed ratio) with
the assignment as gradebook.toml has it now, times the late factor; a
manual override, when there is one, replaces it (and no late penalty
applies to it: it is the instructor's word). A student with no submission
is `missing` (0 points); one submitted but not graded yet is `pending`
(no points: an export leaves the cell empty).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime

from gpulab.gradebook.config import GradeConfig
from gpulab.gradebook.score import points


@dataclass(frozen=True)
class Cell:
    student: str
    exercise: str
    status: str  # a run's status, or "missing", "pending"
    final: float | None  # the points the LMS gets
    max_score: float
    score: float | None = None  # the run's points before the late factor
    days_late: int = 0
    late_factor: float = 1.0
    extended: bool = False
    lms_late: bool = False
    submitted_at: str = ""
    submission_id: int | None = None
    run_id: int | None = None
    summary: str = ""
    speed_ratio: float | None = None
    device: str = ""
    gpu: str = ""
    override: float | None = None
    override_comment: str = ""

    @property
    def late(self) -> bool:
        return self.days_late > 0


def students(conn: sqlite3.Connection, *, active_only: bool = True) -> list[sqlite3.Row]:
    where = "WHERE active = 1" if active_only else ""
    return conn.execute(f"SELECT * FROM students {where} ORDER BY id").fetchall()


def _latest_submissions(conn: sqlite3.Connection) -> dict[tuple[str, str], sqlite3.Row]:
    rows = conn.execute(
        "SELECT * FROM submissions ORDER BY student, exercise, submitted_at, id"
    ).fetchall()
    return {(r["student"], r["exercise"]): r for r in rows}  # the last one wins


def _latest_runs(conn: sqlite3.Connection) -> dict[int, sqlite3.Row]:
    rows = conn.execute(
        "SELECT id, submission_id, status, passed, speed_ratio, summary, device, gpu, score"
        " FROM runs ORDER BY submission_id, id"
    ).fetchall()
    return {r["submission_id"]: r for r in rows}


def overrides(conn: sqlite3.Connection) -> dict[tuple[str, str], sqlite3.Row]:
    rows = conn.execute("SELECT * FROM overrides WHERE cleared_at IS NULL ORDER BY id").fetchall()
    return {(r["student"], r["exercise"]): r for r in rows}


def grid(conn: sqlite3.Connection, cfg: GradeConfig) -> dict[tuple[str, str], Cell]:
    """Every active student x every assignment."""
    subs, runs, over = _latest_submissions(conn), _latest_runs(conn), overrides(conn)
    out: dict[tuple[str, str], Cell] = {}
    for st in students(conn):
        for a in cfg.assignments:
            out[(st["id"], a.exercise)] = cell(cfg, st["id"], a.exercise, subs, runs, over)
    return out


def one(conn: sqlite3.Connection, cfg: GradeConfig, student: str, exercise: str) -> Cell:
    return cells(conn, cfg, [(student, exercise)])[(student, exercise)]


def cells(
    conn: sqlite3.Connection, cfg: GradeConfig, pairs: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], Cell]:
    """The cells of (student, exercise) `pairs`, the gradebook read once."""
    subs, runs, over = _latest_submissions(conn), _latest_runs(conn), overrides(conn)
    return {(s, e): cell(cfg, s, e, subs, runs, over) for s, e in pairs}


def cell(
    cfg: GradeConfig,
    student: str,
    exercise: str,
    subs: dict[tuple[str, str], sqlite3.Row],
    runs: dict[int, sqlite3.Row],
    over: dict[tuple[str, str], sqlite3.Row],
) -> Cell:
    a = cfg.assignment(exercise)
    max_score = a.points if a else 0.0
    o = over.get((student, exercise))
    # The override's points replace the grade: Cell's defaults where there is none.
    override = o["points"] if o is not None else None
    comment = o["comment"] if o is not None else ""
    sub = subs.get((student, exercise))
    if sub is None or a is None:
        final = o["points"] if o is not None else 0.0
        return Cell(
            student,
            exercise,
            "missing",
            final,
            max_score,
            override=override,
            override_comment=comment,
        )
    submitted = datetime.fromisoformat(sub["submitted_at"])
    days = cfg.days_late(student, exercise, submitted)
    _, extended = cfg.due_for(student, exercise)
    if sub["lms_late"] and not extended and days == 0:
        days = 1  # the LMS said late and gpulab has no later time to go by
    factor = cfg.late.factor(days)
    pending = Cell(
        student,
        exercise,
        "pending",
        o["points"] if o is not None else None,
        max_score,
        days_late=days,
        late_factor=factor,
        extended=extended,
        lms_late=bool(sub["lms_late"]),
        submitted_at=sub["submitted_at"],
        submission_id=sub["id"],
        override=override,
        override_comment=comment,
    )
    run = runs.get(sub["id"])
    if run is None:
        return pending
    score = points(bool(run["passed"]), run["speed_ratio"], a, cfg)
    return replace(
        pending,
        status=run["status"],
        final=o["points"] if o is not None else round(score * factor, 4),
        score=score,
        run_id=run["id"],
        summary=run["summary"],
        speed_ratio=run["speed_ratio"],
        device=run["device"],
        gpu=run["gpu"],
    )


def history(conn: sqlite3.Connection, student: str) -> list[sqlite3.Row]:
    """A student's submissions and every run of each, newest first."""
    return conn.execute(
        """
        SELECT s.exercise, s.submitted_at, s.sha256, s.source, s.lms_late, r.id AS run_id,
               r.status, r.score, r.max_score, r.summary, r.device, r.gpu, r.batch,
               r.grader_version, r.finished_at, r.speed_ratio
        FROM submissions s LEFT JOIN runs r ON r.submission_id = s.id
        WHERE s.student = ?
        ORDER BY s.exercise, s.submitted_at DESC, r.id DESC
        """,
        (student,),
    ).fetchall()
