"""Per submission and per student: a Gradescope-style `results.json` (the
format a Gradescope autograder writes, so the same files plug into one),
and a Markdown feedback file with each case's message and, on a GPU, the
roofline figures of each timed case beside the reference's.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, TypedDict

from gpulab.gradebook.config import Assignment, GradeConfig
from gpulab.gradebook.exports import number
from gpulab.gradebook.query import Cell
from gpulab.gradebook.records import CaseJson, CheckJson, ReferenceRecord, TimedCaseJson
from gpulab.gradebook.score import speed_fraction

# --- Gradescope's results.json, as its autograder documentation spells it ------


class GradescopeTest(TypedDict):
    name: str
    score: float
    max_score: float
    status: str  # "passed" or "failed"
    output: str
    visibility: str


class LeaderboardEntry(TypedDict):
    name: str
    value: float
    order: str  # "asc" or "desc": which way is better


class GradescopeExtra(TypedDict):
    gpu: str
    device: str
    reference_gpu: str


class GradescopeResults(TypedDict):
    score: float
    execution_time: float
    output: str
    output_format: str
    tests: list[GradescopeTest]
    leaderboard: list[LeaderboardEntry]
    extra_data: GradescopeExtra


def _run(conn: sqlite3.Connection, run_id: int | None) -> tuple[CheckJson, ReferenceRecord]:
    """The run's result and reference as ingest stored them (JSON objects)."""
    if run_id is None:
        return {}, {}
    row = conn.execute("SELECT result, reference FROM runs WHERE id = ?", (run_id,)).fetchone()
    result: CheckJson = json.loads(row["result"]) if row else {}
    reference: ReferenceRecord = json.loads(row["reference"]) if row else {}
    return result, reference


def _cases(result: CheckJson) -> list[CaseJson]:
    return [c for c in result.get("cases") or [] if isinstance(c, dict)]


def _timed(result: CheckJson) -> list[TimedCaseJson]:
    timing = result.get("timing")
    cases = timing.get("cases") if isinstance(timing, dict) else None
    return [c for c in cases or [] if isinstance(c, dict)]


def gradescope(
    conn: sqlite3.Connection, cfg: GradeConfig, c: Cell, a: Assignment
) -> GradescopeResults:
    """results.json for one submission (Gradescope's autograder format)."""
    result, reference = _run(conn, c.run_id)
    correctness = a.points - a.speed_points
    passed = c.status == "passed"
    tests: list[GradescopeTest] = [
        {
            "name": f"correctness ({len(_cases(result))} cases)",
            "score": correctness if passed else 0.0,
            "max_score": correctness,
            "status": "passed" if passed else "failed",
            "output": "\n\n".join(p for p in (c.summary, str(result.get("message") or "")) if p),
            "visibility": "visible",
        }
    ]
    if a.speed_points:
        earned = a.speed_points * speed_fraction(c.speed_ratio, cfg) if c.speed_ratio else 0.0
        tests.append(
            {
                "name": "speed against the reference kernel",
                "score": round(earned, 4) if passed else 0.0,
                "max_score": a.speed_points,
                "status": "passed" if passed and earned > 0 else "failed",
                "output": _speed_words(c),
                "visibility": "visible",
            }
        )
    for case in _cases(result):
        tests.append(
            {
                "name": f"case {case.get('name') or case.get('shape')}",
                "score": 0.0,
                "max_score": 0.0,
                "status": "passed" if case.get("passed") is True else "failed",
                "output": str(case.get("detail") or ""),
                "visibility": "visible",
            }
        )
    leaderboard: list[LeaderboardEntry] = []
    if c.speed_ratio is not None:
        leaderboard.append(
            {"name": "speed vs reference", "value": round(c.speed_ratio, 4), "order": "desc"}
        )
    timing = result.get("timing")
    if isinstance(timing, dict) and isinstance(timing.get("ms"), (int, float)):
        leaderboard.append({"name": "median ms", "value": timing["ms"], "order": "asc"})
    output = [f"{c.status}: {c.summary}" if c.summary else c.status]
    if c.late:
        output.append(
            f"{c.days_late} day(s) late: score x{c.late_factor:g} ({cfg.late.describe()})"
        )
    if c.override is not None:
        output.append(f"grade set by the instructor: {number(c.override)} ({c.override_comment})")
    return {
        "score": c.final if c.final is not None else 0.0,
        "execution_time": result.get("duration_s") or 0.0,
        "output": "\n".join(output),
        "output_format": "text",
        "tests": tests,
        "leaderboard": leaderboard,
        "extra_data": {"gpu": c.gpu, "device": c.device, "reference_gpu": reference.get("gpu", "")},
    }


def _speed_words(c: Cell) -> str:
    if c.status != "passed":
        return "speed is scored once every case is correct"
    if c.speed_ratio is None:
        if c.device.startswith("CPU") or not c.gpu:
            return "not timed: graded on the CPU, where nothing is timed (correctness points only)"
        return "not timed against the reference on this GPU"
    return f"{c.speed_ratio:.2f}x the reference kernel's speed, timed on {c.gpu} in the same job"


def feedback(
    conn: sqlite3.Connection, cfg: GradeConfig, student: sqlite3.Row, cells: list[Cell]
) -> str:
    """One student's feedback, every assignment."""
    lines = [f"# {cfg.name}: feedback for {student['name'] or student['id']} ({student['id']})", ""]
    total = sum(c.final or 0.0 for c in cells)
    most = sum(c.max_score for c in cells)
    lines += [f"Total: **{number(total)} / {number(most)}**", ""]
    for c in cells:
        a = cfg.assignment(c.exercise)
        if a is None:
            continue
        lines += [f"## {a.title or a.exercise}: {number(c.final) or '-'} / {number(a.points)}", ""]
        if c.status == "missing":
            lines += ["No submission was received.", ""]
            continue
        if c.status == "pending":
            lines += [f"Submitted {c.submitted_at}; not graded yet.", ""]
            continue
        result, reference = _run(conn, c.run_id)
        lines += [f"- **{c.status}**: {c.summary}", f"- submitted {c.submitted_at}"]
        if c.late:
            lines.append(f"- {c.days_late} day(s) late: x{c.late_factor:g} ({cfg.late.describe()})")
        elif c.extended:
            lines.append("- on time with your extension")
        if a.speed_points:
            lines.append(f"- speed: {_speed_words(c)}")
        if c.override is not None:
            lines.append(
                f"- grade set by the instructor: {number(c.override)}. {c.override_comment}"
            )
        message = str(result.get("message") or "").strip()
        if message:
            lines += ["", "```text", message[:4000], "```"]
        cases = _cases(result)
        if cases:
            lines += [
                "",
                "| case | result | max abs error | max rel error | detail |",
                "|---|---|---|---|---|",
            ]
            for case in cases:
                lines.append(
                    f"| {_cell(case.get('name') or case.get('shape'))} | "
                    f"{'pass' if case.get('passed') is True else 'FAIL'} | "
                    f"{_cell(case.get('max_abs'))} | {_cell(case.get('max_rel'))} | {_cell(case.get('detail'))} |"
                )
        timed = _timed(result)
        if timed:
            ref = {str(t.get("name")): t for t in _timed(reference.get("result") or {})}
            lines += [
                "",
                f"Timed on {c.gpu}; the reference kernel on the same GPU in the same job:",
                "",
                "| case | ms | reference ms | throughput | of the roofline | vs baseline |",
                "|---|---|---|---|---|---|",
            ]
            for t in timed:
                r = ref.get(str(t.get("name")), {})
                frac = t.get("roofline_fraction")
                lines.append(
                    f"| {_cell(t.get('name'))} | {_cell(t.get('ms'))} | {_cell(r.get('ms'))} | "
                    f"{_cell(t.get('throughput'))} {_cell(t.get('unit'))} | "
                    f"{f'{frac:.0%}' if isinstance(frac, (int, float)) else '-'} | "
                    f"{_cell(t.get('speedup'))}x {_cell(t.get('baseline'))} |"
                )
        notes = [n for n in result.get("notes") or [] if isinstance(n, str)]
        if notes:
            lines += ["", *(f"> {n}" for n in notes)]
        lines.append("")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")[:300]
