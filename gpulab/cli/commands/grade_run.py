"""`gpulab grade run`: grade what is new or stale, then ingest.

Locally, worker processes grade N students at a time under a progress bar
(done, failed, left, ETA); Ctrl-C stops them, ingests what they finished,
and the next `gpulab grade run` goes on from there. With `--executor
slurm` the batch is one Slurm array (submitit), watched by the same bar
from the result files it writes; `--emit-sbatch PATH` writes a plain
sbatch script instead and returns.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from gpulab.cli.commands.common import UsageError, console, parse_timeout
from gpulab.gradebook.exports import number
from gpulab.gradebook.folder import CourseFolder
from gpulab.gradebook.ingest import IngestReport, ingest
from gpulab.gradebook.plan import Task, read_batch, stale, write_batch
from gpulab.gradebook.records import ProgressEvent
from gpulab.textsafe import visible
from gpulab.wire.protocol import JsonObject

FAILED = ("failed", "refused", "timeout", "crashed", "error")


def run(args: Any, folder: CourseFolder) -> int:
    out = console()
    earlier = ingest(folder.conn, folder.cfg, folder.root)  # an interrupted run's finished files
    if earlier.added:
        out.print(f"ingested {earlier.added} results an earlier run left", markup=False)
    tasks = stale(
        folder.conn,
        folder.cfg,
        folder.course,
        everything=args.all,
        exercises=args.exercise or (),
        students=args.student or (),
    )
    if not tasks:
        out.print("nothing to grade: every latest submission has a current run", markup=False)
        return 0
    if args.dry_run:
        return _dry_run(tasks)
    device = args.device or folder.cfg.device
    timeout = parse_timeout(args.timeout, 0.0) if args.timeout else folder.cfg.timeout
    from gpulab.course.content import content_root

    batch = write_batch(
        folder.root, tasks, device=device, timeout=timeout, content_root=content_root()
    )
    students = len(read_batch(batch)["students"])
    if args.executor == "slurm" or args.emit_sbatch:
        return _slurm(args, folder, batch, students, len(tasks))
    from gpulab.gradebook.local import LocalRun, slots_for

    slots = slots_for(device, args.jobs)
    where = f"{len(slots)} GPU worker(s)" if slots[0] is not None else f"{len(slots)} CPU worker(s)"
    if slots[0] is None and device != "cpu":
        where += " (no GPU seen: correctness only, no speed points)"
    out.print(
        f"batch {batch.stem}: {len(tasks)} files of {students} students, {where}", markup=False
    )
    local = LocalRun(batch, Path(read_batch(batch)["results"]), students, slots)
    bar = _Bar(len(tasks))
    interrupted = False
    with bar:
        try:
            local.run(bar.worker_line)
        except KeyboardInterrupt:
            interrupted = True
    for problem in local.failed_workers:
        out.print(f"warning: {problem}", markup=False, style="yellow")
    report = ingest(folder.conn, folder.cfg, folder.root)
    print_ingest(report)
    if interrupted:
        left = len(stale(folder.conn, folder.cfg, folder.course))
        out.print(
            f"interrupted: {left} left to grade; `gpulab grade run` goes on from here", markup=False
        )
        return 130
    return 0


def _dry_run(tasks: list[Task]) -> int:
    from rich.table import Table

    table = Table("student", "exercise", "why", title=f"{len(tasks)} to grade")
    for t in tasks:
        table.add_row(visible(t.student), t.exercise, t.why)
    console().print(table)
    return 0


class _Bar:
    """A rich progress bar fed by the workers' JSON lines."""

    def __init__(self, total: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("grading"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "done {task.fields[done]} · failed {task.fields[failed]} · left {task.fields[left]}"
            ),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console(stderr=True),
        )
        self.total, self.done, self.failed = total, 0, 0
        self.task = self.progress.add_task("grading", total=total, done=0, failed=0, left=total)

    def __enter__(self) -> _Bar:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def worker_line(self, line: JsonObject) -> None:
        """A worker's JSON line, as it came from its stdout (gpulab.gradebook.local)."""
        get = line.get
        self.event(
            _event(get("event"), get("student"), get("exercise"), get("status"), get("summary"))
        )

    def event(self, event: ProgressEvent) -> None:
        if event["event"] not in ("done", "skipped"):
            return
        self.done += 1
        status = event["status"]
        if status in FAILED:
            self.failed += 1
            self.progress.console.print(
                f"{visible(event['student'])} {visible(event['exercise'])}: "
                f"{status}: {visible(event['summary'])[:160]}",
                markup=False,
                highlight=False,
            )
        self.progress.update(
            self.task,
            completed=self.done,
            done=self.done,
            failed=self.failed,
            left=self.total - self.done,
        )


def print_ingest(report: IngestReport) -> None:
    out = console()
    if report.added:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(report.statuses.items()))
        out.print(f"ingested {report.added} results ({counts})", markup=False)
    elif not report.problems:
        out.print("no new results to ingest", markup=False)
    for name, why in report.problems:
        out.print(f"not ingested: {visible(name)}: {visible(why)}", markup=False, style="yellow")
    if report.moved:
        from rich.table import Table

        table = Table("student", "exercise", "before", "after", "note", title="Grades that moved")
        for m in report.moved:
            note = f"override kept: {number(m.override)}" if m.override is not None else ""
            table.add_row(
                visible(m.student),
                m.exercise,
                f"{m.status_before} {number(m.before)}".strip(),
                f"{m.status_after} {number(m.after)}".strip(),
                note,
            )
        out.print(table)


def _slurm(args: Any, folder: CourseFolder, batch: Path, students: int, files: int) -> int:
    from gpulab.gradebook.slurm import SlurmOptions, running, submit

    opts = SlurmOptions(
        partition=args.partition,
        account=args.account,
        time_min=args.time,
        gpus=args.gpus,
        parallel=args.parallel,
        cpus=args.cpus,
    )
    logs = folder.root / "work" / "slurm"
    logs.mkdir(parents=True, exist_ok=True)
    out = console()
    if args.emit_sbatch:
        from gpulab.gradebook.slurm import emit_sbatch

        path = Path(args.emit_sbatch).expanduser()
        path.write_text(emit_sbatch(batch, students, opts, logs.resolve()), encoding="utf-8")
        out.print(
            f"wrote {path}: {students} array tasks ({files} files). Submit it with `sbatch {path}`; "
            "when its tasks are done, `gpulab grade ingest`.",
            markup=False,
        )
        return 0
    job = submit(batch, students, opts, logs.resolve())
    out.print(
        f"submitted Slurm array {job}: {students} tasks ({files} files), at most {opts.parallel} at once",
        markup=False,
    )
    if args.no_wait:
        out.print(
            "`gpulab grade ingest` reads what the tasks wrote; `gpulab grade status` shows it",
            markup=False,
        )
        return 0
    results = Path(read_batch(batch)["results"])
    bar = _Bar(files)
    seen: set[Path] = set()
    try:
        with bar:
            while True:
                _new_results(results, seen, bar)
                if len(seen) >= files or not running(job):
                    _new_results(results, seen, bar)
                    break
                time.sleep(2.0)
    except KeyboardInterrupt:
        print(
            f"\nstopped watching; the array goes on (scancel {job} stops it). "
            "`gpulab grade ingest` reads what it wrote.",
            file=sys.stderr,
        )
        return 130
    print_ingest(ingest(folder.conn, folder.cfg, folder.root))
    if len(seen) < files:
        raise UsageError(
            f"the array ended with {files - len(seen)} of {files} files ungraded: see {logs} "
            "(`gpulab grade run` grades them again)"
        )
    return 0


def _new_results(results: Path, seen: set[Path], bar: _Bar) -> None:
    import json

    for path in sorted(results.glob("*/*.json")):
        if path in seen or path.parent.name.startswith("_"):
            continue
        seen.add(path)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            res = record.get("result") or {}
            student, exercise = record.get("student"), record.get("exercise")
            bar.event(_event("done", student, exercise, res.get("status"), res.get("summary")))
        except (OSError, ValueError, AttributeError):
            bar.event(_event("done", None, None, "error", f"{path}: unreadable"))


def _event(
    event: object, student: object, exercise: object, status: object, summary: object
) -> ProgressEvent:
    """A task's line from values read off JSON, any of them missing or of
    another type: made text as the bar prints them (a missing student reads
    "None", as it always did)."""
    return {
        "event": event if isinstance(event, str) else "",
        "student": str(student),
        "exercise": str(exercise),
        "status": str(status or ""),
        "summary": str(summary or ""),
    }
