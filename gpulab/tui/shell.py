"""The lab's shell: the layout (a lesson sidebar, seven panes, a footer), and
the workers that feed it (checks, the file watcher, GPU detection).

GpulabApp (app.py) builds on this with the lesson actions (actions.py) and the
keys. The UI process never imports torch, triton or jax: checks run in a child
process driven by a thread worker; GPU detection asks NVML. Workers post
messages (messages.py); only the UI thread writes the workspace. The shell
records a check and drops a replaced one; the panes follow the latest check
on the check bus (check_bus.py) themselves.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from textual import events, on, work
from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Header, Input, TabbedContent, TabPane
from textual.worker import Worker, WorkerState, get_current_worker

from gpulab.course.content import Course, Lesson
from gpulab.gpu.devinfo import GpuInfo, detect_gpus
from gpulab.lab.check import CheckOptions, Lab, Planned
from gpulab.lab.runner import Spares
from gpulab.lab.watcher import file_changes
from gpulab.lab.workspace import Workspace
from gpulab.tui.check_bus import CheckBus
from gpulab.tui.device_pane import DevicePane
from gpulab.tui.editor import ExercisePane
from gpulab.tui.focus import focus_now
from gpulab.tui.footer import LabFooter
from gpulab.tui.keyqueue import KeysInOrder
from gpulab.tui.lesson_pane import LessonPane
from gpulab.tui.messages import (
    CheckFinished,
    CheckProgress,
    CheckStarted,
    ExerciseChangedOnDisk,
    GpuDetected,
)
from gpulab.tui.results import ResultsPane
from gpulab.tui.roadmap_pane import RoadmapPane
from gpulab.tui.roofline_pane import RooflinePane
from gpulab.tui.screens import WelcomeScreen
from gpulab.tui.serving_pane import ServingPane
from gpulab.tui.sidebar import LessonList, PassedSummary
from gpulab.wire.status import Status

PANES = ("lesson", "exercise", "results", "roofline", "device", "roadmap", "serving")
TITLES = ("Lesson", "Exercise", "Results", "Roofline", "Device", "Roadmap", "Serving")
# Columns below which the sidebar steps aside for lessons, code, tables: the
# 38-column sidebar plus the 10 columns of pane chrome leave the 70 that lesson
# code blocks are written to (tests/course/test_lesson_width.py) from 118 up.
NARROW = 118


TOAST_CHARS = 90


def exercise_name(lesson: Lesson) -> str:
    """'step 1 of 3, softmax_row' or 'softmax': what a toast calls it."""
    return f"{lesson.step_label}, {lesson.exercise}" if lesson.step_label else lesson.exercise


def short(text: str, limit: int = TOAST_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "… (3: Results)"


# KeysInOrder's _on_key is a handler Textual calls beside App's, not an
# override of it (gpulab.tui.keyqueue): their signatures need not agree.
class LabShell(KeysInOrder, App[int]):  # type: ignore[misc]
    """The layout and the workers; GpulabApp (app.py) adds the actions and keys."""

    checking: reactive[bool] = reactive(False)
    """A check is running (the cancel binding shows)."""
    watch_mode: reactive[bool] = reactive(False)
    """Re-check whenever the exercise file is saved."""
    probing: reactive[bool] = reactive(False)
    """The microbenchmarks are running (Device pane)."""

    def __init__(
        self,
        workspace: Workspace,
        course: Course,
        *,
        device: str = "auto",
        gpu_info: GpuInfo | None = None,
        syntax: bool = True,
        poll: bool = False,
        check_timeout: float | None = None,
        welcome: bool | None = None,
        spare: bool = False,
    ) -> None:
        super().__init__()
        self.workspace, self.course, self.device = workspace, course, device
        self.gpu_info = gpu_info
        self.syntax, self.poll, self.check_timeout = syntax, poll, check_timeout
        self.show_welcome = workspace.created if welcome is None else welcome
        self.lesson: Lesson | None = None
        self._run_id = 0
        self._watch_stop: asyncio.Event | None = None
        self._sidebar_choice: bool | None = None  # None: automatic (see _fit_sidebar)
        self._unsaved_said = False  # the warning that progress is not saved, shown once
        # A judge started ahead of the next check of the open exercise
        # (gpulab.lab.runner.Spares): its sandboxes import torch and Triton
        # while the learner edits.
        self.spares: Spares | None = Spares() if spare else None
        # The one check use case (gpulab.lab.check): plan, run, explain a timeout.
        self.lab = Lab(workspace, device=device, spares=self.spares)
        # Until the first screen is up, the spare waits (prepare_spare).
        self._painted = False
        self._spare_waiting: tuple[Lesson, Path] | None = None
        # What the panes subscribe to, to follow the latest check (check_bus.py).
        self.checks = CheckBus(self)

    # --- layout ---------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(icon="▦")
        with Horizontal(id="main"):
            with Vertical(id="sidebar"):
                # The panes that show a check follow it on the bus themselves.
                checks = self.checks
                yield PassedSummary(self.course, self.workspace, checks, id="summary")
                yield LessonList(self.course, self.workspace, checks, id="lessons")
            with TabbedContent(id="panes", initial="lesson"):
                with TabPane("Lesson", id="lesson"):
                    yield LessonPane(self.workspace, checks, id="lesson-pane")
                with TabPane("Exercise", id="exercise"):
                    yield ExercisePane(self.workspace.root, syntax=self.syntax, id="exercise-pane")
                with TabPane("Results", id="results"):
                    yield ResultsPane(self.workspace, checks, id="results-pane")
                with TabPane("Roofline", id="roofline"):
                    yield RooflinePane(self.workspace, checks, self.remember, id="roofline-pane")
                with TabPane("Device", id="device"):
                    yield DevicePane(self.workspace, id="device-pane")
                with TabPane("Roadmap", id="roadmap"):
                    yield RoadmapPane(id="roadmap-pane")
                with TabPane("Serving", id="serving"):
                    yield ServingPane(id="serving-pane")
        yield LabFooter()

    def first_ready(self) -> Lesson | None:
        """The course's first gradable exercise: a lesson's first step, where it
        has steps (a new learner starts there, not on the lesson's final one)."""
        return next((lesson for lesson in self.course.exercises if lesson.ready), None)

    @property
    def active_pane(self) -> str:
        return self.query_one("#panes", TabbedContent).active

    def _pane(self, name: str) -> Any:
        return self.query_one(f"#{name}-pane")

    def advance_after_pass(self, lesson: Lesson) -> str:
        """After a pass; the lesson actions (actions.py) move a step on."""
        return ""

    def update_summary(self) -> None:
        self.query_one(PassedSummary).recount()
        watching = " · watching" if self.watch_mode else ""
        self.sub_title = (
            f"{self.lesson.number} {self.lesson.title}{watching}" if self.lesson else ""
        )

    # --- panes ----------------------------------------------------------------
    def action_show_pane(self, name: str) -> None:
        self.query_one("#panes", TabbedContent).active = name
        self._pane_shown(name)
        self._focus_pane(name)

    def action_glossary(self) -> None:
        """Jump to the glossary's search box (in the Roadmap pane) from
        anywhere but a text field, where / is a character."""
        self.action_show_pane("roadmap")
        self.query_one("#glossary-search", Input).focus()

    def _focus_pane(self, name: str) -> None:
        # At once: "2 e" and typing in one burst must reach the editor (focus.py).
        if name == "exercise":
            focus_now(self.query_one(ExercisePane).editor)
        else:
            focus_now(self._pane(name))

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self._pane_shown(event.pane.id or "")

    def _pane_shown(self, name: str) -> None:
        """Build a pane's content the first time it is shown (panes are lazy)."""
        main = self._main_screen()
        if main is None:
            return
        self._fit_sidebar()
        found = main.query(f"#{name}-pane") if name in PANES else None
        pane = found.first() if found else None
        if isinstance(pane, ExercisePane):
            pane.ensure_loaded()
        elif pane is not None and hasattr(pane, "ensure_rendered"):
            pane.ensure_rendered()

    def action_focus_tabs(self) -> None:
        self.query_one("#panes", TabbedContent).query_one("Tabs").focus()

    def action_toggle_sidebar(self) -> None:
        """b: the lesson list, shown (and focused, to pick a lesson) or put away."""
        self._sidebar_choice = not self.query_one("#sidebar").display
        self._fit_sidebar()
        if self._sidebar_choice:
            focus_now(self.query_one(LessonList))

    def _main_screen(self) -> Screen | None:
        """The screen holding the layout, under any open dialog; None while it
        is not there: a tab or resize message can arrive as the app closes,
        after the layout has been taken down."""
        stack = self.screen_stack
        if not stack or not stack[0].query("#sidebar"):
            return None
        return stack[0]

    def _fit_sidebar(self, width: int | None = None) -> None:
        """Code, lesson text, tables and the seven tabs need the width: below
        NARROW columns the sidebar steps aside on every pane (at 80 columns
        it pushed the first tabs off screen), unless the learner chose with b."""
        main = self._main_screen()
        if main is None:
            return
        width = self.size.width if width is None else width
        show = self._sidebar_choice
        if show is None:
            show = width >= NARROW
        sidebar = main.query_one("#sidebar")
        sidebar.display = show
        sidebar.set_class(width >= NARROW, "roomy")  # room for whole titles
        focused = sidebar.screen.focused
        if not show and focused is not None and sidebar in focused.ancestors_with_self:
            self._focus_pane(self.active_pane)  # not a hidden list taking the keys

    def on_resize(self, event: events.Resize) -> None:
        # This handler runs before App._on_resize stores the new size, so
        # self.size is still the old one here: use the event's.
        # (App.is_mounted is a method, always true as a condition: the layout
        # being there is what matters.)
        if self._main_screen() is not None:
            self._fit_sidebar(event.size.width)

    def watch_checking(self) -> None:
        self.refresh_bindings()

    def watch_probing(self) -> None:
        self.refresh_bindings()

    def watch_watch_mode(self, on: bool) -> None:
        if self._main_screen() is not None and self.lesson is not None:
            self.update_summary()

    def on_unmount(self) -> None:
        undo = getattr(self, "undo_hangup", None)
        if undo is not None:
            undo()
        # Lets the watchfiles thread finish now instead of at its next timeout.
        if self._watch_stop is not None:
            self._watch_stop.set()
        self.lab.close()

    # --- the workspace ------------------------------------------------------------
    def remember(self, write: Any, *args: Any) -> Any:
        """`write(*args)`, a workspace method that writes progress or a setting;
        None when the workspace cannot be written (said once, with the folder)."""
        try:
            done = write(*args)
            keep_up = getattr(self, "keep_up", None)
            if keep_up is not None:
                keep_up.seen()  # the lab's own write, not progress from elsewhere
            return done
        except OSError as exc:
            if not self._unsaved_said:
                self._unsaved_said = True
                self.notify(
                    f"{self.workspace.unwritable() or exc}. Your progress and settings are "
                    "not saved; start gpulab with --workspace DIR (or $GPULAB_HOME) on a "
                    "folder you can write to keep them.",
                    title="Workspace is read-only",
                    severity="error",
                    timeout=15,
                    markup=False,
                )
            return None

    def say_if_unwritable(self) -> None:
        """At start: a workspace gpulab cannot save in is said before any typing."""
        blocked = self.workspace.unwritable()
        if blocked:
            self._unsaved_said = True
            self.notify(
                f"{blocked}. Edits, progress and results cannot be saved. Start gpulab "
                "with --workspace DIR (or $GPULAB_HOME) on a folder you can write.",
                title="Workspace is read-only",
                severity="error",
                timeout=20,
                markup=False,
            )

    # --- checks -----------------------------------------------------------------
    def start_check(self, lesson: Lesson, path: Path, explain: bool = False) -> None:
        self._run_id += 1
        # A check before the spare started starts its own judge, and the
        # next check's spare after it (gpulab.lab.runner).
        self._spare_waiting = None
        self.checking = True
        # Planned as `gpulab check` plans it (gpulab.lab.check), here on the UI
        # thread, which alone touches the workspace.
        options = self._options(explain)
        planned = self._plan(lesson, options)
        plan = planned.plan
        self.checks.started.publish(CheckStarted(self._run_id, lesson, self.device, plan.timeout))
        if plan.note:
            self.notify(plan.note.replace("--explain", "X"), timeout=8, markup=False)
        self._check_worker(self._run_id, lesson, path, options, planned)

    def _options(self, explain: bool = False) -> CheckOptions:
        """The lab's --timeout, else the CLI's default (60 s on the CPU, 300 s
        on a GPU); X's --explain. Recorded by on_check_finished, on the UI
        thread, not by the worker."""
        return CheckOptions(
            limit=self.check_timeout or None,
            limit_why="the lab was started with it",
            explain=explain,
            record=False,
        )

    def _plan(self, lesson: Lesson, options: CheckOptions) -> Planned:
        return self.lab.plan(lesson, options, gpu=self.gpu_info.found if self.gpu_info else None)

    def prepare_spare(self, lesson: Lesson, path: Path | None) -> None:
        """Start the judge for the next check of `path` now (a thread: the
        UI never waits on a process start); at the lab's start, once the
        lesson's text is on screen (on_lesson_painted)."""
        spares = self.spares
        if path is None or spares is None or spares.closed:
            return
        if not self._painted:
            self._spare_waiting = (lesson, path)
            return
        gpu = self.gpu_info.found if self.gpu_info else None

        def start() -> None:
            self.lab.prepare_spare(lesson, path, self._options(), gpu=gpu)

        threading.Thread(target=start, name="gpulab-spare", daemon=True).start()

    def on_lesson_painted(self) -> None:
        """The lesson's first screenful is on screen: the spare may start.
        Its judge and sandboxes import torch and Triton, seconds of CPU: on
        a 2-core machine, started with the lab, they held its first frame
        and the lesson's text back by 0.5-1 s."""
        if self._painted:
            return
        self._painted = True
        waiting, self._spare_waiting = self._spare_waiting, None
        if waiting is not None:
            self.prepare_spare(*waiting)

    @work(thread=True, exclusive=True, group="check", exit_on_error=False, description="check")
    def _check_worker(
        self, run_id: int, lesson: Lesson, path: Path, options: CheckOptions, planned: Planned
    ) -> None:
        worker = get_current_worker()
        result = self.lab.check(
            lesson,
            path,
            options=options,
            planned=planned,
            on_event=lambda ev: self.post_message(CheckProgress(run_id, ev)),
            # Cancelling the worker (x, a newer check, quitting) kills the child.
            cancel=worker.cancelled_event,
        )
        self.post_message(CheckFinished(run_id, lesson, result))

    def on_check_progress(self, message: CheckProgress) -> None:
        if message.run_id == self._run_id and self._main_screen() is not None:
            self.checks.progress.publish(message)

    def on_check_finished(self, message: CheckFinished) -> None:
        result, lesson = message.result, message.lesson
        # Recorded here, on the UI thread, which alone writes the workspace;
        # a check that a newer one replaced still counts as an attempt.
        self.remember(self.lab.record, lesson, result)
        if message.run_id != self._run_id:
            return  # a check that a newer one replaced
        self.checking = False
        if self._main_screen() is None:
            return  # recorded above; the layout is gone (the app is closing)
        # The panes show it (results, roofline, hints, the sidebar), each
        # deciding what it means to it, before a pass opens the next step.
        self.checks.finished.publish(message)
        # The toast is short (at 80x24 a six-line toast covered half the
        # case table for 6 s) and names the exercise checked, a step's
        # label too; the Results pane has the whole report.
        name = exercise_name(lesson)
        if result.status == Status.CANCELLED:
            self.notify("check cancelled", timeout=2)
        elif result.passed:
            moved = self.advance_after_pass(lesson)
            self.notify(
                moved or "The reference solution is unlocked (s); n: the next lesson.",
                title=f"PASS: {name}",
                timeout=4,
                markup=False,
            )
        else:
            # The summary may quote learner code: shown as text, never markup
            # (made visible already, gpulab.lab.runner).
            self.notify(
                short(result.summary),
                title=f"{result.status.value.upper()}: {name}",
                severity="error",
                timeout=4,
                markup=False,
            )

    @on(Worker.StateChanged)
    def _worker_state(self, event: Worker.StateChanged) -> None:
        """The one route for workers that died of an exception (a gpulab bug)."""
        if event.state != WorkerState.ERROR:
            return
        worker = event.worker
        if worker.group == "check":
            self.checking = False
        elif worker.group == "probe":
            self.probing = False
        self.notify(
            f"{worker.description or worker.name} failed: "
            f"{type(worker.error).__name__}: {worker.error}",
            severity="error",
            title="gpulab error",
            timeout=10,
        )

    # --- files on disk ------------------------------------------------------------
    def watch_file(self, path: Path | None) -> None:
        """(Re)start watching the current exercise file."""
        if self._watch_stop is not None:
            self._watch_stop.set()
            self._watch_stop = None
        if path is None:
            return
        self._watch_stop = stop = asyncio.Event()
        self._file_watch_worker(path, stop)

    @work(exclusive=True, group="file-watch", exit_on_error=False, description="file watcher")
    async def _file_watch_worker(self, path: Path, stop: asyncio.Event) -> None:
        async for _ in file_changes(path, stop, poll=self.poll):
            self.post_message(ExerciseChangedOnDisk(path))

    # --- device -------------------------------------------------------------------
    def want_gpu_info(self) -> None:
        """Start NVML detection once, if nobody has the answer yet."""
        if self.gpu_info is None and not self.workers_in("gpu"):
            self._detect_worker()

    def workers_in(self, group: str) -> list[Worker]:
        return [w for w in self.workers if w.group == group and not w.is_finished]

    @work(thread=True, group="gpu", exit_on_error=False, description="GPU detection")
    def _detect_worker(self) -> None:
        self.post_message(GpuDetected(detect_gpus()))

    def on_gpu_detected(self, message: GpuDetected) -> None:
        self.gpu_info = message.info
        if self._main_screen() is not None:  # else the app is closing
            self.broadcast_gpu_info()

    def broadcast_gpu_info(self) -> None:
        """Tell whoever shows the device (welcome screen, Device pane)."""
        info = self.gpu_info
        if info is None:
            return
        for screen in self.screen_stack:
            if isinstance(screen, WelcomeScreen):
                screen.show_device(info)
        self._pane("device").show_gpu_info(info)
