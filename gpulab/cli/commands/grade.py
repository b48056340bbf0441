"""`gpulab grade STEP`: the instructor's side (gpulab.gradebook).

    gpulab grade init COURSE --exercises softmax,matmul --due 2026-12-20 --roster class.csv
    gpulab grade collect submissions.zip      # Canvas, Moodle or student folders
    gpulab grade run                          # grade what is new or stale, then ingest
    gpulab grade export                       # Canvas CSV and the rest, in exports/

Every bad input (a roster row, a field of gradebook.toml, a file that
cannot be read) is one message naming the file, line or field, and exit 2.
"""

from __future__ import annotations

import json
from datetime import timezone
from pathlib import Path
from typing import Any

from gpulab.cli.commands.common import UsageError, console, guarded, open_course
from gpulab.gradebook.config import CONFIG_NAME, GradeConfigError, parse_when, template
from gpulab.gradebook.folder import CourseFolder, find_root, import_roster
from gpulab.gradebook.roster import RosterError, parse_roster
from gpulab.gradebook.store import DB_NAME, GradebookError, now, writing
from gpulab.textsafe import visible

# Colours of a status in tables (rich styles), shared with the view's words.
STYLES = {
    "passed": "green",
    "failed": "red",
    "refused": "bold red",
    "timeout": "yellow",
    "crashed": "magenta",
    "error": "bright_black",
    "pending": "cyan",
    "missing": "dim",
}


@guarded
def run(args: Any) -> int:
    from gpulab.gradebook.slurm import SlurmError

    try:
        if args.step == "run":
            from gpulab.cli.commands import grade_run

            return grade_run.run(args, open_folder(args))
        return int(STEPS[args.step](args))
    except (GradeConfigError, RosterError, GradebookError, SlurmError) as exc:
        raise UsageError(str(exc)) from None


def open_folder(args: Any) -> CourseFolder:
    course = open_course()
    root = Path(args.course).expanduser() if getattr(args, "course", None) else None
    if root is not None and not (root / CONFIG_NAME).is_file():
        raise UsageError(f"{root}: no {CONFIG_NAME} here (`gpulab grade init {root}` makes one)")
    return CourseFolder.open((root or find_root(Path.cwd())).resolve(), course)


def _init(args: Any) -> int:
    course = open_course()
    root = Path(args.folder).expanduser().resolve()
    if (root / CONFIG_NAME).exists():
        raise UsageError(f"{root / CONFIG_NAME} exists already: edit it, or init another folder")
    if args.exercises:
        exercises = [e.strip() for e in args.exercises.split(",") if e.strip()]
    else:
        exercises = [lesson.exercise for lesson in course.lessons if lesson.ready]
    for ex in exercises:
        found = course.find(ex)
        if found is None or found.exercise != ex:
            raise UsageError(
                f"--exercises: '{ex}' is not an exercise of the course ({', '.join(course.exercise_ids)})"
            )
    due = ""
    if args.due:
        when = parse_when(args.due, timezone.utc, "--due", "due")
        due = when.isoformat()
    roster = parse_roster(Path(args.roster).expanduser()) if args.roster else None
    rows = []
    for ex in exercises:
        lesson = course.find(ex)
        speed = 0.0 if lesson is None or lesson.is_step else min(args.speed_points, args.points)
        rows.append((ex, due, args.points, speed))
    root.mkdir(parents=True, exist_ok=True)
    (root / CONFIG_NAME).write_text(
        template(args.name or root.name, rows, args.late), encoding="utf-8"
    )
    for sub in ("store", "work", "exports"):
        (root / sub).mkdir(exist_ok=True)
    folder = CourseFolder.open(root, course)
    out = console()
    out.print(
        f"made {root}: {CONFIG_NAME} ({len(exercises)} exercises) and {DB_NAME}", markup=False
    )
    if roster is not None:
        change = import_roster(folder.conn, roster)
        out.print(f"roster: {len(change.added)} students", markup=False)
    out.print(
        f"next: edit {root / CONFIG_NAME} (due dates, points), then\n"
        f"  cd {root}\n  gpulab grade roster class.csv      (if not given)\n"
        "  gpulab grade collect SUBMISSIONS  (a folder or an LMS's .zip)\n"
        "  gpulab grade run && gpulab grade export",
        markup=False,
    )
    return 0


def _roster(args: Any) -> int:
    folder = open_folder(args)
    roster = parse_roster(Path(args.csv).expanduser())
    change = import_roster(folder.conn, roster)
    out = console()
    out.print(
        f"{args.csv} ({roster.kind} layout): {len(roster.students)} students; "
        f"{len(change.added)} added, {len(change.updated)} updated",
        markup=False,
    )
    if change.dropped:
        out.print(
            f"not in this roster, kept but inactive (their runs stay): {', '.join(change.dropped)}",
            markup=False,
        )
    return 0


def _collect(args: Any) -> int:
    from gpulab.gradebook.collect import collect

    folder = open_folder(args)
    when = (
        parse_when(args.submitted_at, folder.cfg.tz, "--submitted-at", "when")
        if args.submitted_at
        else None
    )
    source = Path(args.source).expanduser()
    if not source.exists():
        raise UsageError(f"{source}: no such folder or file")
    if args.exercise and args.exercise not in folder.cfg.exercises:
        raise UsageError(f"--exercise: '{args.exercise}' is not assigned in {CONFIG_NAME}")
    if not folder.conn.execute("SELECT 1 FROM students LIMIT 1").fetchone():
        raise UsageError("the gradebook has no students yet: `gpulab grade roster CSV` first")
    report = collect(
        folder.conn,
        folder.root,
        source,
        folder.cfg.exercises,
        layout=args.layout,
        exercise=args.exercise or "",
        submitted_at=when,
        tz=folder.cfg.tz,
    )
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return 1 if report.problems else 0
    out = console()
    out.print(
        f"{len(report.placed)} placed, {len(report.unchanged)} unchanged (collected before), "
        f"{len(report.problems)} not placed",
        markup=False,
    )
    if report.problems:
        from rich.table import Table

        table = Table("file", "not placed because", title="Files not placed", title_justify="left")
        for name, why in report.problems:
            table.add_row(visible(name), visible(why))
        out.print(table)
    return 1 if report.problems else 0


def _ingest(args: Any) -> int:
    from gpulab.cli.commands.grade_run import print_ingest
    from gpulab.gradebook.ingest import ingest

    folder = open_folder(args)
    report = ingest(folder.conn, folder.cfg, folder.root)
    if args.json:
        print(
            json.dumps(
                {
                    "added": report.added,
                    "known": report.known,
                    "problems": [{"file": f, "why": w} for f, w in report.problems],
                    "moved": [m.__dict__ for m in report.moved],
                },
                indent=2,
            )
        )
    else:
        print_ingest(report)
    return 1 if report.problems else 0


def _status(args: Any) -> int:
    from gpulab.gradebook import query
    from gpulab.gradebook.exports import number
    from gpulab.gradebook.plan import stale

    folder = open_folder(args)
    cfg = folder.cfg
    grid = query.grid(folder.conn, cfg)
    left = stale(folder.conn, cfg, folder.course)
    if args.json:
        print(
            json.dumps(
                {
                    "students": [dict(r) for r in query.students(folder.conn)],
                    "grades": [c.__dict__ for c in grid.values()],
                    "to_grade": [t.to_json() for t in left],
                },
                indent=2,
            )
        )
        return 0
    from rich.table import Table

    table = Table("student", *(a.exercise for a in cfg.assignments), "total", title=cfg.name)
    for st in query.students(folder.conn):
        cells, total = [], 0.0
        for a in cfg.assignments:
            c = grid[(st["id"], a.exercise)]
            total += c.final or 0.0
            mark = (
                ("*" if c.override is not None else "")
                + ("L" if c.late else "")
                + ("E" if c.extended else "")
            )
            text = f"{number(c.final) or '-'}{mark} {c.status}"
            cells.append(f"[{STYLES.get(c.status, '')}]{text}[/]")
        table.add_row(visible(st["id"]), *cells, number(total))
    out = console()
    out.print(table)
    counts: dict[str, int] = {}
    for c in grid.values():
        counts[c.status] = counts.get(c.status, 0) + 1
    out.print(", ".join(f"{n} {s}" for s, n in sorted(counts.items())), markup=False)
    out.print("* override  L late  E extension", style="dim", markup=False)
    if left:
        out.print(f"{len(left)} to grade (new or stale): gpulab grade run", markup=False)
    return 0


def _override(args: Any) -> int:
    folder = open_folder(args)
    if args.exercise not in folder.cfg.exercises:
        raise UsageError(f"'{args.exercise}' is not assigned in {CONFIG_NAME}")
    if not folder.conn.execute("SELECT 1 FROM students WHERE id = ?", (args.student,)).fetchone():
        raise UsageError(f"'{args.student}' is not a student of the gradebook")
    who = f"{Path.home().name}"
    with writing(folder.conn):
        folder.conn.execute(
            "UPDATE overrides SET cleared_at = ? WHERE student = ? AND exercise = ? AND cleared_at IS NULL",
            (now(), args.student, args.exercise),
        )
        if args.clear:
            console().print(f"override of {args.student}'s {args.exercise} cleared", markup=False)
            return 0
        if args.points is None:
            raise UsageError("give the POINTS (or --clear)")
        try:
            points = float(args.points)
        except ValueError:
            raise UsageError(f"POINTS must be a number, got {args.points!r}") from None
        if not args.comment.strip():
            raise UsageError("an override needs --comment (why), kept beside it")
        folder.conn.execute(
            "INSERT INTO overrides (student, exercise, points, comment, author, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (args.student, args.exercise, points, args.comment.strip(), who, now()),
        )
    console().print(
        f"{args.student}'s {args.exercise}: {points:g} (override: {args.comment.strip()})",
        markup=False,
    )
    return 0


def _export(args: Any) -> int:
    from gpulab.cli.commands.grade_export import export

    return export(open_folder(args), args)


def _similar(args: Any) -> int:
    from gpulab.gradebook.similar import find

    folder = open_folder(args)
    exercises = args.exercise or folder.cfg.exercises
    report = (
        Path(args.report).expanduser()
        if args.report
        else folder.root / "exports" / "similarity.html"
    )
    pairs = find(
        folder.conn, folder.root, folder.course, exercises, threshold=args.threshold, report=report
    )
    if args.json:
        print(json.dumps({"report": str(report), "pairs": [p.__dict__ for p in pairs]}, indent=2))
        return 0
    from rich.table import Table

    table = Table(
        "exercise",
        "student",
        "student",
        "shared",
        "tokens",
        title=f"{len(pairs)} pairs at {args.threshold:.0%} or more",
    )
    for p in pairs:
        table.add_row(p.exercise, p.a, p.b, f"{p.a_share:.0%} / {p.b_share:.0%}", str(p.tokens))
    out = console()
    out.print(table)
    out.print(f"report: {report}", markup=False)
    return 0


def _view(args: Any) -> int:
    folder = open_folder(args)
    folder.close()
    from gpulab.tui.gradebook_app import run_gradebook

    return run_gradebook(folder.root)


STEPS = {
    "init": _init,
    "roster": _roster,
    "collect": _collect,
    "ingest": _ingest,
    "status": _status,
    "override": _override,
    "export": _export,
    "similar": _similar,
    "view": _view,
}
