"""The gpulab app: the shell's layout and workers (shell.py), the lesson actions
(actions.py), and the keys.

`build_app` is the one factory for the CLI, the tests and `gpulab serve`.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from textual.app import App
from textual.binding import Binding
from textual.widgets import Input, TextArea

from gpulab.course.content import ContentError, Course, Lesson, load_course
from gpulab.lab.workspace import Workspace, WorkspaceError
from gpulab.tui.actions import LessonActions
from gpulab.tui.commands import GpulabCommands
from gpulab.tui.editor import ExercisePane
from gpulab.tui.keep_up import POLL_S, KeepUp
from gpulab.tui.screens import HelpScreen, NoticeScreen, SolutionScreen
from gpulab.tui.shell import PANES, TITLES
from gpulab.tui.sidebar import LessonList

# App actions that act on the lesson or the layout: off while a dialog is open.
LESSON_ACTIONS = {
    "check",
    "check_explain",
    "hint",
    "toggle_watch",
    "reset",
    "edit",
    "solution",
    "next_lesson",
    "toggle_sidebar",
    "help",
    "show_pane",
    "glossary",
}


NOTE_CHARS = 160
RESTART = 75  # the app's exit value that asks run_app to start gpulab again


def short_note(text: str) -> str:
    """A start-up warning short enough for a toast: a state repair listing
    six fields covered half of an 80x24 screen. The rest is a palette away."""
    if len(text) <= NOTE_CHARS:
        return text
    cut = text.rfind(" ", 0, NOTE_CHARS)
    return text[: cut if cut > 0 else NOTE_CHARS] + " … (all of it: ctrl+p, startup: notes)"


class GpulabApp(LessonActions):
    """The lab: the shell (shell.py), its lesson actions (actions.py), the keys."""

    CSS_PATH = "app.tcss"
    TITLE = "gpulab"
    COMMANDS = App.COMMANDS | {GpulabCommands}
    BINDINGS = [
        # q quits, except where it is a letter someone is typing (the editor).
        Binding(
            "q",
            "quit_q",
            "Quit",
            priority=True,
            id="app.quit",
            tooltip="Quit gpulab (ctrl+q works everywhere)",
        ),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
        Binding("c,f5", "check", "Check", id="app.check", tooltip="Grade the exercise"),
        Binding("x", "cancel_check", "Cancel", id="app.cancel", tooltip="Stop the check"),
        Binding(
            "X",
            "check_explain",
            "Explain",
            show=False,
            id="app.explain",
            tooltip="Check, then say what limits the kernel",
        ),
        Binding("h", "hint", "Hint", id="app.hint", tooltip="Reveal the next hint level"),
        Binding(
            "w",
            "toggle_watch",
            "Watch",
            id="app.watch",
            tooltip="Re-check every time the exercise file is saved",
        ),
        Binding("r", "reset", "Reset", id="app.reset", tooltip="Restore the starter"),
        Binding(
            "e", "edit", "Edit", id="app.edit", tooltip="Edit the exercise (Esc stops editing)"
        ),
        Binding("s", "solution", "Solution", show=False, id="app.solution"),
        Binding("n", "next_lesson", "Next lesson", show=False, id="app.next"),
        Binding("b", "toggle_sidebar", "Sidebar", show=False, id="app.sidebar"),
        Binding(
            "slash",
            "glossary",
            "Glossary",
            show=False,
            id="app.glossary",
            tooltip="Search the glossary (Roadmap pane)",
        ),
        Binding(
            "question_mark", "help", "Help", id="app.help", tooltip="Help for the pane you are in"
        ),
        Binding("f1", "help", "Help", show=False, priority=True),
        *[
            Binding(str(i + 1), f"show_pane('{p}')", t, show=False, id=f"app.pane.{p}")
            for i, (p, t) in enumerate(zip(PANES, TITLES, strict=True))
        ],
    ]

    def on_mount(self) -> None:
        from gpulab.tui import hangup

        self.undo_hangup = hangup.install(self._save_edit)
        theme = self.workspace.get_setting("theme")
        if isinstance(theme, str) and theme in self.available_themes:
            self.theme = theme
        self.theme_changed_signal.subscribe(self, self._remember_theme)
        self.watch_mode = bool(self.workspace.get_setting("watch", False))
        self.startup_notes = [*self.course.warnings, *self.workspace.warnings]
        for warning in self.startup_notes:
            self.notify(short_note(warning), severity="warning", timeout=10, markup=False)
        self.say_if_unwritable()
        # Progress another gpulab process records, and gpulab itself
        # reinstalled under the lab (keep_up.py): stamped once a second.
        self.keep_up = KeepUp((self.workspace.state_path,))
        self.package_changed_error = ""  # why the lab ended, when gpulab changed under it
        self.set_interval(POLL_S, self._keep_up, name="keep-up")
        self.open_lesson(self._initial_lesson(), remember=False)
        if self.query_one("#sidebar").display:
            self.query_one(LessonList).focus()
        else:  # below NARROW columns: the lesson, with the list a b away
            self._focus_pane(self.active_pane)
        if self.show_welcome:
            self.action_welcome()
        elif self.lesson is not None and not self.workspace.created:
            status = self.workspace.status(self.lesson.exercise)
            self.notify(
                f"Continuing lesson {self.lesson.number}, {self.lesson.title}"
                + (f", {self.lesson.step_label}" if self.lesson.step_label else "")
                + f" ({status}).",
                title="Welcome back",
                timeout=4,
            )

    # --- keeping up with what changes outside the lab (keep_up.py) -------------
    def _keep_up(self) -> None:
        if self._main_screen() is None:
            return
        if self.keep_up.package_newly_changed():
            self.notify(
                "gpulab was reinstalled or updated while this lab was open. Your work "
                "is saved; restart the lab to use the new version: ctrl+p, "
                '"Restart the lab" (or q, then gpulab).',
                title="gpulab changed",
                severity="warning",
                timeout=30,
                markup=False,
            )
        if self.keep_up.progress_changed():
            self.progress_from_elsewhere()

    def progress_from_elsewhere(self) -> None:
        """Another gpulab process (a `gpulab check` or `gpulab watch` in
        another terminal) recorded progress: the sidebar, and the open
        exercise's result when no check of the lab's is on screen."""
        self.query_one(LessonList).rebuild()
        self.update_summary()
        lesson = self.lesson
        if lesson is None or self.checking:
            return
        attempts = self.workspace.exercise_state(lesson.exercise).get("attempts", [])
        self._pane("results").show_idle(
            lesson, self.workspace.last_result(lesson.exercise), attempts
        )

    def _handle_exception(self, error: Exception) -> None:
        # A lazy import that fails once gpulab changed on disk is that change
        # (a reinstall took the files this lab imported from), not a bug.
        # Textual stops the message loop an exception escapes from, so the
        # lab cannot go on: it ends as it would on a crash, with the edit
        # saved and no traceback, and run_app says what happened and offers
        # to start the new gpulab.
        if isinstance(error, ImportError) and (
            self.keep_up.package_changed or self.keep_up.package_newly_changed()
        ):
            self.package_changed_error = f"{type(error).__name__}: {error}"
            with contextlib.suppress(Exception):
                self._save_edit()
            self._return_code = 1
            self._close_messages_no_wait()
            return
        super()._handle_exception(error)

    def action_restart(self) -> None:
        """Quit, saving the edit, and start gpulab again (run_app does)."""
        pane = self.query_one(ExercisePane)
        if pane.dirty:
            pane.save()
        self.exit(RESTART)

    def action_startup_notes(self) -> None:
        """The start's warnings in full (their toasts were cut short)."""
        notes = getattr(self, "startup_notes", [])
        self.push_screen(NoticeScreen("\n\n".join(notes) or "Nothing to report."))

    def _initial_lesson(self) -> Lesson | None:
        last = self.workspace.load_state().get("last_lesson")
        found = self.course.find(last) if isinstance(last, str) else None
        return (
            found or self.first_ready() or (self.course.lessons[0] if self.course.lessons else None)
        )

    def _remember_theme(self, theme: Any) -> None:
        self.remember(self.workspace.set_setting, "theme", getattr(theme, "name", str(theme)))

    # --- bindings that depend on state -------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        modal = len(self.screen_stack) > 1
        if action == "quit_q":
            # False lets the key through: people type q in the editor and the
            # search boxes, and q closes help and the solution.
            focused = self.focused
            typing = isinstance(focused, Input) or (
                isinstance(focused, TextArea) and not focused.read_only
            )
            return not typing and not isinstance(
                self.screen, (HelpScreen, SolutionScreen, NoticeScreen)
            )
        if action == "cancel_check":
            return self.checking or self.probing
        if modal and action in LESSON_ACTIONS:
            return False  # not behind a dialog's back (a check under "Reset?", help on help)
        if action in ("check", "check_explain", "reset", "solution", "hint", "toggle_watch"):
            return True if self.lesson is not None and self.lesson.ready else None
        return True

    async def action_quit_q(self) -> None:
        await self.action_quit()

    async def action_quit(self) -> None:
        """q, ctrl+q: quit, once the edit is saved, or after asking when it cannot be."""
        reason = self.query_one(ExercisePane).unsaved_reason()
        if reason:
            self.confirm_discard(reason, "Quit", self.leave)
            return
        self.leave()

    def _save_edit(self) -> None:
        """The hang-up's save: the editor's unsaved edit, if there is one."""
        pane = self.query_one(ExercisePane)
        if pane.dirty:
            pane.save()

    def leave(self) -> None:
        """Quit without asking (the browser tab has gone, or the learner said
        so): the edit is saved if it can be, the check and probe stopped."""
        pane = self.query_one(ExercisePane)
        if pane.dirty:
            pane.save()
        if self._watch_stop is not None:
            self._watch_stop.set()
        self.workers.cancel_group(self, "check")
        self.workers.cancel_group(self.query_one("#device-pane"), "probe")
        self.exit(0)


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
    """Start the lab in this terminal; returns the exit code."""
    import sys

    from gpulab.gpu import hardware

    try:
        len(hardware.GPUS)  # the datasheet table, read and checked now: every pane uses it
        app = build_app(workspace, device=device, spare=True)
    except (ContentError, hardware.HardwareDataError, WorkspaceError) as exc:
        print(f"gpulab: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"gpulab: cannot open the workspace: {exc}", file=sys.stderr)
        return 2
    code = app.run()
    changed = getattr(app, "package_changed_error", "")
    if code == RESTART or (changed and restart_wanted(changed)):
        # This process holds the old gpulab: a new one, found as `python -m
        # gpulab` finds it, opens where the learner was (their edit is saved).
        import os

        os.execv(sys.executable, [sys.executable, "-m", "gpulab", *sys.argv[1:]])
    return 1 if changed else int(code or 0)


def restart_wanted(error: str, ask: Any = input) -> bool:
    """After the lab ended because gpulab changed under it: say so, and ask
    (in a terminal) whether to start the new one."""
    import sys

    print(
        "gpulab changed on disk while the lab was open (a reinstall or an update), and "
        f"the lab could not load a part of it it had not loaded yet ({error}). Your work "
        "is saved.",
        file=sys.stderr,
    )
    if not sys.stdin.isatty():
        print("Start gpulab again to use the new version.", file=sys.stderr)
        return False
    try:
        answer = ask("Start the new gpulab now? [Y/n] ")
    except (EOFError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("", "y", "yes")
