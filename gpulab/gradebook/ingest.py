"""Read the workers' result files into the gradebook: the one step that
writes runs (gpulab.gradebook.store).

Every `work/results/<batch>/<student>/<exercise>.json` not read before (its
`key` is not a run yet) becomes a run with its cases, scored
(gpulab.gradebook.score). A file that is not a result, or names a
submission the gradebook does not have, is reported and left alone; one
ingested before is skipped, so ingest can run any number of times, and
while workers still write (a file appears whole, by a rename).

It returns every grade that moved: before and after, for the regrade's
table. A manual override is never changed by a run; the table says it was kept.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulab.gradebook import query
from gpulab.gradebook.config import GradeConfig
from gpulab.gradebook.records import CheckJson, ReferenceRecord, TimedCaseJson
from gpulab.gradebook.score import score_run
from gpulab.gradebook.store import now, writing
from gpulab.wire.protocol import JsonObject

_TEXT = ("key", "batch", "student", "exercise", "sha256", "grader_version", "reference_sha")


@dataclass(frozen=True, slots=True)
class Arrived:
    """A worker's result file (gpulab.gradebook.records.ResultRecord), checked:
    what a run is made of. The check's `result` is kept as it came (the
    gradebook stores it whole); the worker's own words read as "" where the
    file has none."""

    key: str
    batch: str
    student: str
    exercise: str
    sha256: str
    grader_version: str
    reference_sha: str
    submission: int
    result: CheckJson
    reference: ReferenceRecord | None
    device: str
    gpu: str
    stack: str
    host: str
    started_at: str
    finished_at: str

    @classmethod
    def read(cls, data: JsonObject) -> Arrived | str:
        """The file's JSON checked, or what makes it no result file."""
        for key in _TEXT:
            if not isinstance(data.get(key), str):
                return f"not a result file: field '{key}' is missing or not a string"
        if not isinstance(data.get("submission"), int) or not isinstance(data.get("result"), dict):
            return "not a result file: 'submission' or 'result' is missing"

        def words(key: str) -> str:
            return str(data.get(key) or "")

        return cls(
            key=data["key"],
            batch=data["batch"],
            student=data["student"],
            exercise=data["exercise"],
            sha256=data["sha256"],
            grader_version=data["grader_version"],
            reference_sha=data["reference_sha"],
            submission=data["submission"],
            result=data["result"],
            reference=data["reference"] if isinstance(data.get("reference"), dict) else None,
            device=words("device"),
            gpu=words("gpu"),
            stack=words("stack"),
            host=words("host"),
            started_at=words("started_at"),
            finished_at=words("finished_at"),
        )


@dataclass(frozen=True)
class Moved:
    student: str
    exercise: str
    before: float | None
    after: float | None
    status_before: str
    status_after: str
    override: float | None


@dataclass
class IngestReport:
    added: int = 0
    known: int = 0
    problems: list[tuple[str, str]] = field(default_factory=list)
    moved: list[Moved] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)


def result_files(root: Path) -> list[Path]:
    base = root / "work" / "results"
    if not base.is_dir():
        return []
    return sorted(
        p
        for p in base.rglob("*.json")
        if "_reference" not in p.parts and not p.name.startswith(".")
    )


def _record(path: Path) -> tuple[Arrived | None, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"cannot be read: {exc}"
    except ValueError as exc:
        return None, f"not JSON: {exc}"
    if not isinstance(data, dict):
        return None, "not a result file (not a JSON object)"
    rec = Arrived.read(data)
    return (None, rec) if isinstance(rec, str) else (rec, "")


def ingest(conn: sqlite3.Connection, cfg: GradeConfig, root: Path) -> IngestReport:
    report = IngestReport()
    known = {r[0] for r in conn.execute("SELECT result_key FROM runs")}
    fresh: list[tuple[Path, Arrived]] = []
    for path in result_files(root):
        rec, problem = _record(path)
        if rec is None:
            report.problems.append((str(path.relative_to(root)), problem))
        elif rec.key in known:
            report.known += 1
        else:
            fresh.append((path, rec))
            known.add(rec.key)
    if not fresh:
        return report
    pairs = {(rec.student, rec.exercise) for _, rec in fresh}
    before = query.cells(conn, cfg, pairs)
    with writing(conn):
        for path, rec in fresh:
            problem = _add(conn, cfg, rec)
            if problem:
                report.problems.append((str(path.relative_to(root)), problem))
            else:
                report.added += 1
                status = str(rec.result.get("status"))
                report.statuses[status] = report.statuses.get(status, 0) + 1
    after = query.cells(conn, cfg, pairs)
    for pair in sorted(pairs):
        old, new = before[pair], after[pair]
        run_before = None if old.score is None else round(old.score * old.late_factor, 4)
        run_after = None if new.score is None else round(new.score * new.late_factor, 4)
        # A first grade (pending before) is no move: the table is the regrade's.
        if old.run_id is not None and (run_before, old.status) != (run_after, new.status):
            report.moved.append(
                Moved(*pair, run_before, run_after, old.status, new.status, new.override)
            )
    return report


def _add(conn: sqlite3.Connection, cfg: GradeConfig, rec: Arrived) -> str:
    sub = conn.execute(
        "SELECT id FROM submissions WHERE id = ? AND student = ? AND exercise = ? AND sha256 = ?",
        (rec.submission, rec.student, rec.exercise, rec.sha256),
    ).fetchone()
    if sub is None:
        return (
            f"names a submission this gradebook does not have ({rec.student}'s "
            f"{rec.exercise}, sha256 {rec.sha256[:12]})"
        )
    a = cfg.assignment(rec.exercise)
    if a is None:
        return f"exercise {rec.exercise!r} is no longer assigned in {cfg.path.name}"
    result, reference = rec.result, rec.reference
    s = score_run(result, reference, a, cfg)
    gpu = rec.gpu
    timing = result.get("timing")
    if not gpu and isinstance(timing, dict) and isinstance(timing.get("device"), str):
        gpu = timing["device"]
    cur = conn.execute(
        "INSERT INTO runs (submission_id, result_key, batch, grader_version, reference_sha,"
        " device, gpu, stack, host, status, passed, summary, message, timed, speed_ratio, score,"
        " max_score, grade, stages, result, reference, started_at, finished_at, ingested_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            sub["id"],
            rec.key,
            rec.batch,
            rec.grader_version,
            rec.reference_sha,
            str(result.get("device") or rec.device or ""),
            gpu,
            rec.stack,
            rec.host,
            s.status,
            int(s.passed),
            str(result.get("summary") or ""),
            str(result.get("message") or ""),
            int(s.timed),
            s.speed_ratio,
            s.score,
            s.max_score,
            s.grade,
            json.dumps(result.get("stages") or {}),
            json.dumps(result),
            json.dumps(reference or {}),
            rec.started_at,
            rec.finished_at,
            now(),
        ),
    )
    run_id = cur.lastrowid
    for i, case in enumerate(c for c in result.get("cases") or [] if isinstance(c, dict)):
        conn.execute(
            "INSERT INTO cases (run_id, kind, idx, name, passed, detail, max_abs, max_rel)"
            " VALUES (?, 'correctness', ?, ?, ?, ?, ?, ?)",
            (
                run_id,
                i,
                str(case.get("name") or case.get("shape") or ""),
                int(case.get("passed") is True),
                case.get("detail") if isinstance(case.get("detail"), str) else None,
                _num(case.get("max_abs")),
                _num(case.get("max_rel")),
            ),
        )
    ref_ms = _ms((reference or {}).get("result"))
    for i, timed in enumerate(_timing_cases(result)):
        name = str(timed.get("name") or timed.get("shape") or "")
        conn.execute(
            "INSERT INTO cases (run_id, kind, idx, name, ms, reference_ms)"
            " VALUES (?, 'timing', ?, ?, ?, ?)",
            (run_id, i, name, _num(timed.get("ms")), ref_ms.get(name)),
        )
    return ""


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def _timing_cases(result: CheckJson | None) -> list[TimedCaseJson]:
    timing = result.get("timing") if isinstance(result, dict) else None
    cases = timing.get("cases") if isinstance(timing, dict) else None
    return [c for c in cases or [] if isinstance(c, dict)]


def _ms(result: CheckJson | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for case in _timing_cases(result):
        ms = _num(case.get("ms"))
        if ms is not None:
            out[str(case.get("name") or case.get("shape") or "")] = ms
    return out
