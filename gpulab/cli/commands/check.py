"""`gpulab check` and `gpulab watch`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from gpulab.cli.commands.common import (
    console,
    exercise_file,
    find_lesson,
    guarded,
    open_course,
    open_workspace,
    parse_timeout,
)
from gpulab.lab.check import CheckOptions, Lab
from gpulab.lab.runner import Spares
from gpulab.wire.events import Correct, Event, Graded, Stage
from gpulab.wire.status import Status


@guarded
def run(args: Any) -> int:
    return _watch(args) if args._name == "watch" else _check(args)


def _target(args: Any):
    course = open_course()
    lesson = find_lesson(course, args.exercise)
    ws = open_workspace(args)
    return (lesson, ws, *exercise_file(args, ws, lesson), course)


def next_step(course: Any, lesson: Any) -> str:
    """After a pass: the command for the next exercise (the lesson's next
    step, or the next lesson), or "" after the last."""
    nxt = course.next_exercise(lesson)
    if nxt is None:
        return ""
    where = (
        f"step {nxt.position + 1} of {nxt.step_count} of lesson {nxt.number}"
        if nxt.index == lesson.index
        else f"lesson {nxt.number}" + (f", {nxt.step_label}" if nxt.step_label else "")
    )
    return f"Next: {nxt.exercise_title} ({where}): gpulab check {nxt.exercise}"


def _check(args: Any) -> int:
    timeout = parse_timeout(args.timeout, 0.0)
    lesson, ws, path, own, course = _target(args)
    # No --timeout: 60 s on the CPU, 300 s on a GPU (gpulab.lab.plan says why).
    lab = Lab(ws, device=args.device)
    options = CheckOptions(
        limit=timeout if args.timeout is not None else None,
        limit_why="you asked for it with --timeout",
        explain=getattr(args, "explain", False),
        explain_gpu=getattr(args, "gpu", None),
        timing=not args.no_timing,
        paths_off=tuple(getattr(args, "off", None) or ()),
        record=own,
        timeout_option="--timeout SECONDS",
    )
    planned = lab.plan(lesson, options)
    plan = planned.plan
    if plan.note:  # said once, here, rather than silently nothing
        print(f"note: {plan.note}", file=sys.stderr)
    # A read-only workspace: the check still runs (its compiler cache in a
    # temporary folder), and says why its result is not kept.
    if planned.blocked:
        print(f"warning: {not_recorded(planned.blocked)}", file=sys.stderr)

    with CheckProgress(plan.timeout, quiet=args.json, cap=plan.cap) as progress:
        result = lab.check(lesson, path, options=options, planned=planned, on_event=progress.event)
    if args.json:
        # Learner text is visible already (gpulab.lab.runner): `jq -r .output`
        # must not paint the terminal either.
        print(json.dumps(result.to_json(), indent=2, default=str))
    else:
        from gpulab.lab.report import render

        console().print(render(result))
        if result.passed and (line := next_step(course, lesson)):
            console().print(line, markup=False, highlight=False, style="dim")
    if result.status == Status.ERROR:
        return 2
    return 0 if result.passed else 1


class CheckProgress:
    """A check's progress as it runs. In a terminal (stderr a TTY): each
    stage a line on stderr, and under them a live line with the seconds
    run against the time limit (an infinite loop runs until then), gone
    when the check ends. Piped: the same lines on stdout, before the
    verdict, so a log that joins the two streams (a CI job, a capture that
    prints stdout, then stderr) reads in order; no live line."""

    def __init__(self, limit: float, *, quiet: bool = False, cap: float | None = None) -> None:
        # `cap`: where the judge may give a case more time than `limit`
        # (gpulab.lab.plan's CPU allowance), a stage's allow_s moves the
        # limit shown, as it moves the lab's deadline (runner._relay).
        self.limit, self.quiet, self.cap = limit, quiet, cap
        self.stage = "starting"
        self.started = time.monotonic()
        self.tty = sys.stderr.isatty()
        self.out = console(stderr=self.tty)
        self._live: Any = None

    def __enter__(self) -> CheckProgress:
        if self.tty and not self.quiet:
            from rich.live import Live

            self._live = Live(self, console=self.out, transient=True, refresh_per_second=4)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None
        sys.stdout.flush()

    def __rich__(self) -> Any:
        from rich.text import Text

        elapsed = time.monotonic() - self.started
        return Text(
            f"… {self.stage}: {elapsed:.0f} s of the {self.limit:g} s limit",
            style="dim",
        )

    def line(self, text: str, style: str = "") -> None:
        self.out.print(text, style=style, markup=False, highlight=False)

    def event(self, ev: Event) -> None:
        if self.quiet:
            return
        if isinstance(ev, Stage) and self.cap and ev.allow_s is not None:
            elapsed = time.monotonic() - self.started
            self.limit = max(self.limit, min(self.cap, elapsed + ev.allow_s))
        # Graders quote case names: text, not markup (made visible already,
        # gpulab.lab.runner).
        if isinstance(ev, Stage):
            self.stage = ev.text
            self.line(f"… {ev.text}", style="dim")
        elif isinstance(ev, Correct):  # the verdict on correctness, before the timing
            count = f"all {ev.cases} cases" if ev.cases is not None else "every case"
            self.stage = "timing"
            self.line(f"correct: {count} right; timing now")
        elif isinstance(ev, Graded):  # the grade, before the advice that follows it
            self.line(f"graded: {ev.summary}")


def not_recorded(blocked: str) -> str:
    """The warning for a workspace gpulab cannot write (Workspace.unwritable)."""
    return (
        f"{blocked}: the check runs, but its result is not recorded. To keep your "
        "progress, use a folder you can write: --workspace DIR or $GPULAB_HOME."
    )


def _watch(args: Any) -> int:
    """Re-check on every save until Ctrl-C. Doesn't auto-advance (rustlings)."""
    timeout = parse_timeout(args.timeout, 0.0)
    lesson, ws, path, _, course = _target(args)
    con = console()
    from gpulab.lab.report import render

    options = CheckOptions(
        limit=timeout if args.timeout is not None else None,
        limit_why="you asked for it with --timeout",
    )
    # The judge of the next check starts as one ends, and imports while the
    # learner edits (gpulab.lab.runner.Spares).
    lab = Lab(ws, device=args.device, spares=Spares())

    def once() -> None:
        con.rule(f"{lesson.exercise} — {time.strftime('%H:%M:%S')}")
        planned = lab.plan(lesson, options)
        if planned.blocked:
            print(f"warning: {not_recorded(planned.blocked)}", file=sys.stderr)
        with CheckProgress(planned.plan.timeout, cap=planned.plan.cap) as progress:
            result = lab.check(
                lesson, path, options=options, planned=planned, on_event=progress.event
            )
        con.print(render(result))
        if result.passed and (line := next_step(course, lesson)):
            con.print(line, markup=False, highlight=False, style="dim")
        con.print(f"[dim]watching {path} — save to re-check, Ctrl-C to stop[/]")

    from gpulab.lab.watcher import stamp

    checked = stamp(path)  # the version the first check reads: a save after it counts
    try:
        once()
        _until_interrupted(_recheck_on_save(path, once, poll=args.poll, checked=checked))
    except KeyboardInterrupt:
        return 0
    finally:
        lab.close()
    return 0


def _until_interrupted(coro: Coroutine[Any, Any, None]) -> None:
    """Run `coro` on an event loop of its own; Ctrl-C raises at once.

    Not asyncio.run: from Python 3.11 its first Ctrl-C only cancels the task,
    which then waits for the running check to end (up to its timeout).
    """
    loop = asyncio.new_event_loop()
    task = loop.create_task(coro)
    try:
        loop.run_until_complete(task)
    finally:
        if task.done():  # Ctrl-C during a check: the task ended with it
            if not task.cancelled():
                task.exception()  # seen: asyncio would log it as never retrieved
        else:  # Ctrl-C while waiting for a save
            task.cancel()  # the watcher stops its thread when cancelled
            with contextlib.suppress(BaseException):
                loop.run_until_complete(task)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


# However the watcher is doing (starting up, blocked behind a check, or file
# events lost), the file's stamp is compared this often: a save is never missed.
RESTAMP_S = 1.0
# An editor's save can take a few steps (write, rename): wait for it to settle.
SETTLE_S = 0.2


async def _recheck_on_save(
    path: Path,
    once: Callable[[], None],
    *,
    poll: bool,
    checked: tuple[int, int, int] | None = None,
) -> None:
    """Run `once` after every change to `path`, the lab's watcher telling.

    `checked` is the stamp of the version last checked (default: the file as
    it is now). A change is a stamp that differs from it: the watcher only
    wakes the loop, so a save made before the watcher is up (or during a
    check, which blocks the loop) is seen all the same, and a spurious event
    re-checks nothing.
    """
    from gpulab.lab.watcher import file_changes, stamp

    def fallback(why: str) -> None:
        print(why, file=sys.stderr)

    if checked is None:
        checked = stamp(path)
    wake, stop = asyncio.Event(), asyncio.Event()

    async def listen() -> None:
        async for _ in file_changes(path, stop, poll=poll, on_fallback=fallback):
            wake.set()

    listener = asyncio.get_running_loop().create_task(listen())
    try:
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(wake.wait(), RESTAMP_S)
            wake.clear()
            now = stamp(path)
            if now is None or now == checked:  # None: gone for a moment, mid-save
                continue
            while True:  # settled: the same stamp twice, SETTLE_S apart
                await asyncio.sleep(SETTLE_S)
                if (later := stamp(path)) == now:
                    break
                now = later
            checked = now
            once()
    finally:
        stop.set()  # ends watchfiles' thread
        listener.cancel()
        with contextlib.suppress(BaseException):
            await listener
