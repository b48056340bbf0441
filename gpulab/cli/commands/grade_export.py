"""`gpulab grade export`: the files an LMS imports, and the students' feedback.

exports/canvas.csv                          Canvas's gradebook import
exports/moodle.csv                          Moodle's grade import
exports/grades-long.csv                     one row per student and exercise
exports/gradescope/<student>/<exercise>/results.json
exports/feedback/<student>.md
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpulab.cli.commands.common import console
from gpulab.fsutil import atomic_write_text
from gpulab.gradebook import exports, query, reports
from gpulab.gradebook.folder import CourseFolder

FORMATS = ("canvas", "moodle", "long", "gradescope", "feedback")


def export(folder: CourseFolder, args: Any) -> int:
    to = Path(args.to).expanduser() if args.to else folder.root / "exports"
    formats = args.format or list(FORMATS)
    conn, cfg = folder.conn, folder.cfg
    written: list[str] = []
    out = console()
    if "canvas" in formats:
        atomic_write_text(
            to / "canvas.csv", exports.canvas(conn, cfg, points_row=not args.no_points_row)
        )
        written.append("canvas.csv")
        if not any(a.canvas_column for a in cfg.assignments):
            out.print(
                "note: no assignment has a canvas_column in gradebook.toml: Canvas matches a "
                'column by its own header, "Name (id)", so set them before importing',
                markup=False,
                style="yellow",
            )
    if "moodle" in formats:
        atomic_write_text(to / "moodle.csv", exports.moodle(conn, cfg, identity=args.moodle_id))
        written.append("moodle.csv")
        unmatched = exports.missing_identity(conn, args.moodle_id)
        if unmatched:
            out.print(
                f"note: moodle.csv: no {args.moodle_id} in the roster for {', '.join(unmatched[:10])}"
                f"{' ...' if len(unmatched) > 10 else ''}: Moodle cannot match them",
                markup=False,
                style="yellow",
            )
    if "long" in formats:
        atomic_write_text(to / "grades-long.csv", exports.long(conn, cfg))
        written.append("grades-long.csv")
    grid = query.grid(conn, cfg) if {"gradescope", "feedback"} & set(formats) else {}
    if "gradescope" in formats:
        n = 0
        for (student, ex), c in grid.items():
            a = cfg.assignment(ex)
            if c.submission_id is None or a is None:
                continue
            data = reports.gradescope(conn, cfg, c, a)
            atomic_write_text(
                to / "gradescope" / student / ex / "results.json", json.dumps(data, indent=2) + "\n"
            )
            n += 1
        written.append(f"gradescope/ ({n} results.json)")
    if "feedback" in formats:
        n = 0
        for st in query.students(conn):
            cells = [grid[(st["id"], a.exercise)] for a in cfg.assignments]
            atomic_write_text(
                to / "feedback" / f"{st['id']}.md", reports.feedback(conn, cfg, st, cells)
            )
            n += 1
        written.append(f"feedback/ ({n} students)")
    out.print(f"wrote in {to}: {', '.join(written)}", markup=False)
    return 0
