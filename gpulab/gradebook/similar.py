"""Pairs of submissions that share too much code, found by copydetect
(PyPI: winnowing over tokenised code, as MOSS does), with each exercise's
starter as boilerplate: what every student was handed is never a match.

Each student's latest submission of each exercise is compared with every
other student's of the same exercise (a student is never compared with
themself). copydetect writes its HTML report (the pairs side by side, the
shared code highlighted), which an instructor opens in a browser.
copydetect (with numpy and matplotlib) is imported here only.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gpulab.course.content import Course


@dataclass(frozen=True)
class Pair:
    exercise: str
    a: str
    b: str
    a_share: float  # of a's code found in b
    b_share: float
    tokens: int


def find(
    conn: sqlite3.Connection,
    root: Path,
    course: Course,
    exercises: list[str],
    *,
    threshold: float = 0.5,
    report: Path | None = None,
    noise: int = 25,
    guarantee: int = 30,
) -> list[Pair]:
    """Pairs whose shared share of either file is at least `threshold`."""
    # A report is written to a file: no display is needed or wanted.
    os.environ.setdefault("MPLBACKEND", "Agg")
    from copydetect import CopyDetector  # type: ignore[import-untyped]

    rows = conn.execute(
        "SELECT * FROM submissions s WHERE s.id = (SELECT s2.id FROM submissions s2"
        " WHERE s2.student = s.student AND s2.exercise = s.exercise"
        " ORDER BY s2.submitted_at DESC, s2.id DESC LIMIT 1)"
    ).fetchall()
    with tempfile.TemporaryDirectory(prefix="gpulab-similar-") as tmp:
        stage, starters = Path(tmp) / "subs", Path(tmp) / "starters"
        starters.mkdir()
        for ex in exercises:
            lesson = course.find(ex)
            if lesson is not None and lesson.starter_path.is_file():
                shutil.copy(lesson.starter_path, starters / f"{ex}.py")
        for r in rows:
            if r["exercise"] not in exercises:
                continue
            # One folder per student, files named by exercise: copydetect then
            # compares same-named files only, and never within a folder.
            dest = stage / r["student"] / f"{r['exercise']}.py"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(root / r["path"], dest)
        if not stage.is_dir():
            return []
        detector = CopyDetector(
            test_dirs=[str(stage)],
            ref_dirs=[str(stage)],
            boilerplate_dirs=[str(starters)],
            extensions=["py"],
            noise_t=noise,
            guarantee_t=guarantee,
            display_t=threshold,
            same_name_only=True,
            ignore_leaf=True,
            autoopen=False,
            silent=True,
            out_file=str(report) if report else str(Path(tmp) / "report.html"),
        )
        detector.run()
        pairs: list[Pair] = []
        seen: set[tuple[str, str, str]] = set()
        for i, test in enumerate(detector.test_files):
            for j, ref in enumerate(detector.ref_files):
                s1, s2 = (float(x) for x in detector.similarity_matrix[i, j])
                if s1 < 0 or max(s1, s2) < threshold:
                    continue
                a, b = Path(test).parent.name, Path(ref).parent.name
                ex = Path(test).stem
                key = (ex, min(a, b), max(a, b))
                if key in seen:
                    continue
                seen.add(key)
                tokens = int(detector.token_overlap_matrix[i, j])
                pairs.append(Pair(ex, a, b, s1, s2, tokens))
        if report is not None:
            report.parent.mkdir(parents=True, exist_ok=True)
            if pairs:
                detector.generate_html_report()
            else:
                report.write_text(
                    "<!doctype html><title>gpulab grade similar</title>"
                    f"<p>No pair of submissions shares {threshold:.0%} or more of its code "
                    "(the starters not counted).</p>\n",
                    encoding="utf-8",
                )
    pairs.sort(key=lambda p: -max(p.a_share, p.b_share))
    return pairs
