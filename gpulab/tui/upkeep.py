"""The lab's upkeep: its writes to the workspace, and keeping up with what
changes outside it (keep_up.py has the stamps).

A workspace that cannot be written is said once, with the folder, and the
lab goes on without saving. Progress another gpulab process records shows
in the sidebar and the Results pane; gpulab reinstalled under the lab is
said, and an ImportError from then on is that change (GpulabApp's
_handle_exception), not a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpulab.tui.keep_up import KeepUp
from gpulab.tui.sidebar import LessonList

if TYPE_CHECKING:
    from textual.app import App
    from textual.theme import Theme

    from gpulab.tui.lab_app import LabApp
    from gpulab.tui.shell import Shell


NOTE_CHARS = 160


def short_note(text: str) -> str:
    """A start-up warning short enough for a toast: a state repair listing
    six fields covered half of an 80x24 screen. The rest is a palette away."""
    if len(text) <= NOTE_CHARS:
        return text
    cut = text.rfind(" ", 0, NOTE_CHARS)
    return text[: cut if cut > 0 else NOTE_CHARS] + " … (all of it: ctrl+p, startup: notes)"


class Upkeep:
    """The workspace's writes and the keep-up stamps, for the App that holds it."""

    def __init__(self, app: LabApp, shell: Shell) -> None:
        self.app, self.shell = app, shell
        self.unsaved_said = False
        """The warning that progress is not saved has been shown (it is, once)."""
        self.keep_up: KeepUp | None = None
        """The stamps, from the App's mount on (start)."""

    def remember(self, write: Callable[..., Any], *args: Any) -> Any:
        """`write(*args)`, a workspace method that writes progress or a setting;
        None when the workspace cannot be written (said once, with the folder)."""
        try:
            done = write(*args)
            if self.keep_up is not None:
                self.keep_up.seen()  # the lab's own write, not progress from elsewhere
            return done
        except OSError as exc:
            if not self.unsaved_said:
                self.unsaved_said = True
                self.app.notify(
                    f"{self.app.workspace.unwritable() or exc}. Your progress and settings are "
                    "not saved; start gpulab with --workspace DIR (or $GPULAB_HOME) on a "
                    "folder you can write to keep them.",
                    title="Workspace is read-only",
                    severity="error",
                    timeout=15,
                    markup=False,
                )
            return None

    def say_startup_notes(self) -> list[str]:
        """The course's and the workspace's warnings, each a toast; all of them."""
        notes = [*self.app.course.warnings, *self.app.workspace.warnings]
        for warning in notes:
            self.app.notify(short_note(warning), severity="warning", timeout=10, markup=False)
        return notes

    def say_if_unwritable(self) -> None:
        """At start: a workspace gpulab cannot save in is said before any typing."""
        blocked = self.app.workspace.unwritable()
        if blocked:
            self.unsaved_said = True
            self.app.notify(
                f"{blocked}. Edits, progress and results cannot be saved. Start gpulab "
                "with --workspace DIR (or $GPULAB_HOME) on a folder you can write.",
                title="Workspace is read-only",
                severity="error",
                timeout=20,
                markup=False,
            )

    def keep_theme(self, app: App[int]) -> None:
        """The theme chosen last time, and from now on each one chosen (ctrl+p)."""
        theme = self.app.workspace.get_setting("theme")
        if isinstance(theme, str) and theme in app.available_themes:
            app.theme = theme
        app.theme_changed_signal.subscribe(app, self._remember_theme)

    def _remember_theme(self, theme: Theme) -> None:
        self.remember(self.app.workspace.set_setting, "theme", theme.name)

    # --- keeping up with what changes outside the lab (keep_up.py) -------------
    def start(self) -> None:
        self.keep_up = KeepUp((self.app.workspace.state_path,))

    def package_changed(self) -> bool:
        """gpulab changed on disk under the lab (an ImportError now is that)."""
        keep_up = self.keep_up
        return keep_up is not None and (keep_up.package_changed or keep_up.package_newly_changed())

    def poll(self) -> None:
        """Once a second: the stamps of the progress files and of gpulab."""
        if self.keep_up is None or self.shell.main_screen() is None:
            return
        if self.keep_up.package_newly_changed():
            self.app.notify(
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
        self.app.query_one(LessonList).rebuild()
        self.shell.update_summary()
        lesson = self.app.lesson
        if lesson is None or self.app.checking:
            return
        attempts = self.app.workspace.exercise_state(lesson.exercise).get("attempts", [])
        self.shell.pane("results").show_idle(
            lesson, self.app.workspace.last_result(lesson.exercise), attempts
        )
