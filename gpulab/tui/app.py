"""The gpulab app: one Textual App that composes its parts.

The App holds the lab's state (the workspace, the course, the lesson open),
binds the keys (keys.py) and runs the check's worker. Its parts are plain
objects it holds, each typed against what it needs of the App (lab_app.py):
the layout and the moves between panes (shell.py), the checks
(check_runner.py), the lesson actions (actions.py), the workspace's writes
and keeping up with it (upkeep.py), the file and GPU watchers (watchers.py)
and the keys' order (keyqueue.py). The UI process never imports torch,
triton or jax. Workers post messages (messages.py); only the UI thread
writes the workspace.

`build_app` is the one factory for the CLI, the tests and `gpulab serve`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual import events, on, work
from textual.app import App, ComposeResult
from textual.reactive import reactive
from textual.widgets import OptionList, TabbedContent
from textual.worker import Worker, WorkerState, get_current_worker

from gpulab.course.content import Course, Lesson, load_course
from gpulab.gpu.devinfo import GpuInfo
from gpulab.lab.check import CheckOptions, Lab, Planned
from gpulab.lab.runner import Spares
from gpulab.lab.workspace import Workspace
from gpulab.tui import keys, launch
from gpulab.tui.actions import LessonActions
from gpulab.tui.check_bus import CheckBus
from gpulab.tui.check_runner import CheckRunner
from gpulab.tui.commands import GpulabCommands
from gpulab.tui.editor import ExercisePane
from gpulab.tui.keep_up import POLL_S
from gpulab.tui.keyqueue import KeysInOrder
from gpulab.tui.launch import RESTART
from gpulab.tui.launch import restart_wanted as restart_wanted  # its home before launch.py
from gpulab.tui.messages import (
    CheckFinished,
    CheckProgress,
    ExerciseChangedOnDisk,
    ExerciseSaved,
    GpuDetected,
)
from gpulab.tui.screens import NoticeScreen
from gpulab.tui.shell import Shell
from gpulab.tui.sidebar import LessonList
from gpulab.tui.upkeep import Upkeep
from gpulab.tui.watchers import Watchers


class GpulabApp(App[int]):
    """The lab: its state, its keys and workers, and the parts it composes."""

    CSS_PATH = "app.tcss"
    TITLE = "gpulab"
    COMMANDS = App.COMMANDS | {GpulabCommands}
    BINDINGS = keys.BINDINGS  # with which work when (keys.allowed_now)

    checking: reactive[bool] = reactive(False, bindings=True)
    """A check is running (the cancel binding shows)."""
    watch_mode: reactive[bool] = reactive(False)
    """Re-check whenever the exercise file is saved."""
    probing: reactive[bool] = reactive(False, bindings=True)
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
        self.syntax = syntax
        self.show_welcome = workspace.created if welcome is None else welcome
        self.lesson: Lesson | None = None
        self.undo_hangup: Callable[[], None] | None = None
        self.package_changed_error = ""  # why the lab ended, when gpulab changed under it
        self.startup_notes: list[str] = []
        # A judge started ahead of the next check of the open exercise
        # (gpulab.lab.runner.Spares): its sandboxes import torch and Triton
        # while the learner edits.
        self.spares: Spares | None = Spares() if spare else None
        # The one check use case (gpulab.lab.check): plan, run, explain a timeout.
        self.lab = Lab(workspace, device=device, spares=self.spares)
        # What the panes subscribe to, to follow the latest check (check_bus.py).
        self.checks = CheckBus(self)
        # The parts (mypy checks here that this App is what they need: lab_app.py).
        self.shell = Shell(self)
        self.runner = CheckRunner(self, device=device, check_timeout=check_timeout)
        self.lessons = LessonActions(self, self.shell, self.runner)
        self.upkeep = Upkeep(self, self.shell)
        self.watchers = Watchers(self, poll=poll)
        self.key_queue = KeysInOrder(self, super().on_event)

    def compose(self) -> ComposeResult:
        yield from self.shell.compose()

    def on_mount(self) -> None:
        from gpulab.tui import hangup

        self.undo_hangup = hangup.install(self._save_edit)
        self.upkeep.keep_theme(self)
        self.watch_mode = bool(self.workspace.get_setting("watch", False))
        self.startup_notes = self.upkeep.say_startup_notes()
        self.upkeep.say_if_unwritable()
        # Progress another gpulab process records, and gpulab itself
        # reinstalled under the lab (keep_up.py): stamped once a second.
        self.upkeep.start()
        self.set_interval(POLL_S, self.upkeep.poll, name="keep-up")
        self.open_lesson(self.lessons.initial_lesson(), remember=False)
        if self.query_one("#sidebar").display:
            self.query_one(LessonList).focus()
        else:  # below NARROW columns: the lesson, with the list a b away
            self.shell.focus_pane(self.active_pane)
        if self.show_welcome:
            self.action_welcome()
        else:
            self.lessons.welcome_back()

    def on_unmount(self) -> None:
        if self.undo_hangup is not None:
            self.undo_hangup()
        self.watchers.stop_file()
        self.lab.close()

    # --- keys: one at a time, in the order typed (keyqueue.py) --------------------
    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded:
            await self.key_queue.take(event)  # App.on_event sends it on, in turn
            return
        await super().on_event(event)

    @on(events.Key)
    def _key_came_back(self, event: events.Key) -> None:
        # Called before App's own _on_key (Textual goes down the classes),
        # which runs the key's bindings next.
        self.key_queue.came_back(event)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return keys.allowed_now(self, action)

    # --- the actions: the layout's (shell.py) and the lesson's (actions.py) --------
    @property
    def active_pane(self) -> str:
        return self.shell.active_pane

    def editor_mode(self) -> str | None:
        """ "edit" or "view" while the Exercise pane is shown (the footer says which)."""
        return self.shell.editor_mode()

    def open_lesson(
        self, lesson: Lesson | None, *, remember: bool = True, keep_results: bool = False
    ) -> None:
        self.lessons.open_lesson(lesson, remember=remember, keep_results=keep_results)

    def action_show_pane(self, name: str) -> None:
        self.shell.show_pane(name)

    def action_glossary(self) -> None:
        self.shell.glossary()

    def action_focus_tabs(self) -> None:
        self.shell.focus_tabs()

    def action_toggle_sidebar(self) -> None:
        self.shell.toggle_sidebar()

    def action_help(self) -> None:
        self.shell.help()

    def action_probe(self) -> None:
        self.shell.probe()

    def action_choose_roofline_gpu(self) -> None:
        self.shell.choose_roofline_gpu()

    def action_export_roofline(self) -> None:
        self.shell.export_roofline()

    def action_open_lesson(self, key: str) -> None:
        self.lessons.open_by_key(key)

    def action_next_lesson(self) -> None:
        self.lessons.next_lesson()

    def action_edit(self) -> None:
        self.lessons.edit()

    def action_check(self) -> None:
        self.lessons.check()

    def action_check_explain(self) -> None:
        self.lessons.check_explain()

    def action_save(self) -> None:
        self.lessons.save()

    def action_toggle_watch(self) -> None:
        self.lessons.toggle_watch()

    def action_hint(self) -> None:
        self.lessons.hint()

    def action_reset(self) -> None:
        self.lessons.reset()

    def action_solution(self) -> None:
        self.lessons.solution()

    def action_welcome(self) -> None:
        self.lessons.welcome()

    def action_cancel_check(self) -> None:
        """x: stop the running check, and the microbenchmarks if they run."""
        self.workers.cancel_group(self, "check")
        self.workers.cancel_group(self.shell.pane("device"), "probe")

    def action_restart(self) -> None:
        """Quit, saving the edit, and start gpulab again (run_app does)."""
        self._save_edit()
        self.exit(RESTART)

    def action_startup_notes(self) -> None:
        """The start's warnings in full (their toasts were cut short)."""
        self.push_screen(NoticeScreen("\n\n".join(self.startup_notes) or "Nothing to report."))

    async def action_quit_q(self) -> None:
        await self.action_quit()

    async def action_quit(self) -> None:
        """q, ctrl+q: quit, once the edit is saved, or after asking when it cannot be."""
        reason = self.query_one(ExercisePane).unsaved_reason()
        if reason:
            self.lessons.confirm_discard(reason, "Quit", self.leave)
            return
        self.leave()

    def _save_edit(self) -> None:
        """The editor's unsaved edit, if there is one (quitting, the hang-up)."""
        pane = self.query_one(ExercisePane)
        if pane.dirty:
            pane.save()

    def leave(self) -> None:
        """Quit without asking (the browser tab has gone, or the learner said
        so): the edit is saved if it can be, the check and probe stopped."""
        self._save_edit()
        self.watchers.stop_file()
        self.workers.cancel_group(self, "check")
        self.workers.cancel_group(self.query_one("#device-pane"), "probe")
        self.exit(0)

    # --- messages from the layout ---------------------------------------------------
    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.lessons.option_selected(event)

    def on_exercise_changed_on_disk(self, message: ExerciseChangedOnDisk) -> None:
        self.lessons.changed_on_disk(message)

    @on(ExerciseSaved)
    def _saved(self, event: ExerciseSaved) -> None:
        self.lessons.saved(event)

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.shell.pane_shown(event.pane.id or "")

    def on_resize(self, event: events.Resize) -> None:
        # This handler runs before App._on_resize stores the new size, so
        # self.size is still the old one here: use the event's.
        if self.shell.main_screen() is not None:
            self.shell.fit_sidebar(event.size.width)

    def watch_watch_mode(self, on: bool) -> None:
        if self.shell.main_screen() is not None and self.lesson is not None:
            self.shell.update_summary()

    # --- checks (check_runner.py) ------------------------------------------------
    def start_check(self, lesson: Lesson, path: Path, explain: bool = False) -> None:
        self.runner.start(lesson, path, explain=explain)

    @work(thread=True, exclusive=True, group="check", exit_on_error=False, description="check")
    def check_worker(
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
        self.runner.progress(message, layout_up=self.shell.main_screen() is not None)

    def on_check_finished(self, message: CheckFinished) -> None:
        if self.runner.finished(message, layout_up=self.shell.main_screen() is not None):
            self.runner.announce(message, self.lessons.advance_after_pass)

    def on_lesson_painted(self) -> None:
        self.runner.lesson_painted()

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

    # --- the file on disk and the GPU (watchers.py) ---------------------------------
    def watch_file(self, path: Path | None) -> None:
        self.watchers.watch_file(path)

    def want_gpu_info(self) -> None:
        self.watchers.want_gpu_info()

    def on_gpu_detected(self, message: GpuDetected) -> None:
        self.gpu_info = message.info
        self.watchers.gpu_detected(message.info, self.shell)

    # --- the workspace (upkeep.py) ----------------------------------------------
    def remember(self, write: Callable[..., Any], *args: Any) -> Any:
        """`write(*args)`, a workspace method that writes progress or a setting;
        None when the workspace cannot be written (said once, with the folder)."""
        return self.upkeep.remember(write, *args)

    def _handle_exception(self, error: Exception) -> None:
        # A lazy import that fails once gpulab changed on disk is that change
        # (a reinstall took the files this lab imported from), not a bug.
        # Textual stops the message loop an exception escapes from, so the
        # lab cannot go on: it ends as it would on a crash, with the edit
        # saved and no traceback, and run_app says what happened and offers
        # to start the new gpulab.
        if isinstance(error, ImportError) and self.upkeep.package_changed():
            self.package_changed_error = f"{type(error).__name__}: {error}"
            with contextlib.suppress(Exception):
                self._save_edit()
            self._return_code = 1
            self._close_messages_no_wait()
            return
        super()._handle_exception(error)


def build_app(
    workspace: Workspace | Path | str | None = None,
    *,
    device: str = "auto",
    course: Course | None = None,
    **options: Any,
) -> GpulabApp:
    """The app, for the CLI, `gpulab serve` and the tests alike.

    `device` is "auto", "cpu" or "cuda" (tests pass "cpu" to be deterministic).
    Options: gpu_info (skip NVML), syntax (Python highlighting), poll (no file
    events), check_timeout (seconds; default: gpulab.lab.plan's choice),
    welcome (force the welcome screen on or off), spare (start the judge of
    the next check ahead: the lab's own, off where tests build the app).
    Raises ContentError when the course manifest itself is unusable.
    """
    ws = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace)
    return GpulabApp(ws, course or load_course(), device=device, **options)


def run_app(workspace: str | Path | None = None, device: str = "auto") -> int:
    """Start the lab in this terminal; returns the exit code (launch.py)."""
    return launch.run(lambda: build_app(workspace, device=device, spare=True))
