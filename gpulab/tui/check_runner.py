"""The lab's checks: planned and recorded on the UI thread, run in the App's
thread worker, and the judge of the next check started ahead (the spare).

The UI process never imports torch, triton or jax: a check runs in a child
process that the worker drives through the one check use case
(gpulab.lab.check.Lab). Only the UI thread writes the workspace. The runner
records every check and publishes the latest on the check bus
(check_bus.py), where the panes follow it; a check that a newer one
replaced is recorded and shown nowhere.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from gpulab.lab.check import CheckOptions, Planned
from gpulab.tui.messages import CheckFinished, CheckProgress, CheckStarted
from gpulab.wire.status import Status

if TYPE_CHECKING:
    from pathlib import Path

    from gpulab.course.content import Lesson
    from gpulab.tui.lab_app import LabApp


TOAST_CHARS = 90


def exercise_name(lesson: Lesson) -> str:
    """'step 1 of 3, softmax_row' or 'softmax': what a toast calls it."""
    return f"{lesson.step_label}, {lesson.exercise}" if lesson.step_label else lesson.exercise


def short(text: str, limit: int = TOAST_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "… (3: Results)"


class CheckRunner:
    """One check at a time, for the App that holds it."""

    def __init__(self, app: LabApp, *, device: str, check_timeout: float | None) -> None:
        self.app, self.device, self.check_timeout = app, device, check_timeout
        self.run_id = 0
        """The latest check's number: a message of an older one is stale."""
        # Until the first screen is up, the spare waits (prepare_spare).
        self.painted = False
        self.spare_waiting: tuple[Lesson, Path] | None = None

    def start(self, lesson: Lesson, path: Path, explain: bool = False) -> None:
        app = self.app
        self.run_id += 1
        # A check before the spare started starts its own judge, and the
        # next check's spare after it (gpulab.lab.runner).
        self.spare_waiting = None
        app.checking = True
        # Planned as `gpulab check` plans it (gpulab.lab.check), here on the UI
        # thread, which alone touches the workspace.
        options = self.options(explain)
        planned = self.plan(lesson, options)
        plan = planned.plan
        app.checks.started.publish(CheckStarted(self.run_id, lesson, self.device, plan.timeout))
        if plan.note:
            app.notify(plan.note.replace("--explain", "X"), timeout=8, markup=False)
        app.check_worker(self.run_id, lesson, path, options, planned)

    def options(self, explain: bool = False) -> CheckOptions:
        """The lab's --timeout, else the CLI's default (60 s on the CPU, 300 s
        on a GPU); X's --explain. Recorded by `finished`, on the UI thread,
        not by the worker."""
        return CheckOptions(
            limit=self.check_timeout or None,
            limit_why="the lab was started with it",
            explain=explain,
            record=False,
        )

    def _gpu(self) -> bool | None:
        info = self.app.gpu_info
        return info.found if info else None

    def plan(self, lesson: Lesson, options: CheckOptions) -> Planned:
        return self.app.lab.plan(lesson, options, gpu=self._gpu())

    def prepare_spare(self, lesson: Lesson, path: Path | None) -> None:
        """Start the judge for the next check of `path` now (a thread: the
        UI never waits on a process start); at the lab's start, once the
        lesson's text is on screen (lesson_painted)."""
        spares = self.app.spares
        if path is None or spares is None or spares.closed:
            return
        if not self.painted:
            self.spare_waiting = (lesson, path)
            return
        gpu = self._gpu()

        def start() -> None:
            self.app.lab.prepare_spare(lesson, path, self.options(), gpu=gpu)

        threading.Thread(target=start, name="gpulab-spare", daemon=True).start()

    def lesson_painted(self) -> None:
        """The lesson's first screenful is on screen: the spare may start.
        Its judge and sandboxes import torch and Triton, seconds of CPU: on
        a 2-core machine, started with the lab, they held its first frame
        and the lesson's text back by 0.5-1 s."""
        if self.painted:
            return
        self.painted = True
        waiting, self.spare_waiting = self.spare_waiting, None
        if waiting is not None:
            self.prepare_spare(*waiting)

    def progress(self, message: CheckProgress, layout_up: bool) -> None:
        if message.run_id == self.run_id and layout_up:
            self.app.checks.progress.publish(message)

    def finished(self, message: CheckFinished, layout_up: bool) -> bool:
        """Record the check; publish it if it is the latest and the layout is
        up. True when it was published (the verdict is to be said)."""
        # Recorded here, on the UI thread, which alone writes the workspace;
        # a check that a newer one replaced still counts as an attempt.
        self.app.remember(self.app.lab.record, message.lesson, message.result)
        if message.run_id != self.run_id:
            return False  # a check that a newer one replaced
        self.app.checking = False
        if not layout_up:
            return False  # recorded above; the layout is gone (the app is closing)
        # The panes show it (results, roofline, hints, the sidebar), each
        # deciding what it means to it, before a pass opens the next step.
        self.app.checks.finished.publish(message)
        return True

    def announce(self, message: CheckFinished, advance: Callable[[Lesson], str]) -> None:
        """The verdict of the latest check, as a toast, once the panes show it;
        `advance` moves a passed step on (LessonActions.advance_after_pass)."""
        result, lesson = message.result, message.lesson
        # The toast is short (at 80x24 a six-line toast covered half the
        # case table for 6 s) and names the exercise checked, a step's
        # label too; the Results pane has the whole report.
        name = exercise_name(lesson)
        if result.status == Status.CANCELLED:
            self.app.notify("check cancelled", timeout=2)
        elif result.passed:
            moved = advance(lesson)
            self.app.notify(
                moved or "The reference solution is unlocked (s); n: the next lesson.",
                title=f"PASS: {name}",
                timeout=4,
                markup=False,
            )
        else:
            # The summary may quote learner code: shown as text, never markup
            # (made visible already, gpulab.lab.runner).
            self.app.notify(
                short(result.summary),
                title=f"{result.status.value.upper()}: {name}",
                severity="error",
                timeout=4,
                markup=False,
            )
