"""In the lab, after a check (issue 48): bring back a file a reset backed up,
and, once the exercise passes, the learner's file beside the reference.

Both are offered in the command palette (gpulab.tui.commands): "exercise:
restore <backup>" for each backup of the open exercise, newest first, and
"solution: beside yours". The CLI has the same as `gpulab restore` and
`gpulab compare`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

MAX_OFFERED = 5  # backups offered in the palette, newest first


def backups(app: Any) -> list[Path]:
    """The open exercise's backups, newest first (none without a lesson)."""
    lesson = getattr(app, "lesson", None)
    if lesson is None or not lesson.ready:
        return []
    try:
        found: list[Path] = app.workspace.backups(lesson)
    except OSError:
        return []
    return found[:MAX_OFFERED]


def restore(app: Any, backup: Path) -> None:
    """Ask, then put `backup` back as the open exercise's file; the file it
    replaces is backed up first, as a reset does."""
    from gpulab.tui.editor import ExercisePane
    from gpulab.tui.screens import ConfirmScreen

    lesson = app.lesson
    pane = app.query_one(ExercisePane)
    if reason := pane.unsaved_reason():
        app.notify(
            f"Not restored: your edit is not saved: {reason}.",
            severity="warning",
            timeout=8,
            markup=False,
        )
        return

    def answer(yes: bool | None) -> None:
        if not yes:
            app.notify("Not restored; your file is untouched.", timeout=2)
            return
        try:
            kept = app.workspace.restore(lesson, backup)
        except OSError as exc:
            app.notify(f"restore failed: {exc}", severity="error", markup=False)
            return
        pane.set_lesson(lesson, pane.path)
        also = f" The file it replaced is kept as {kept.name}." if kept else ""
        app.notify(f"{backup.name} is back.{also}", title="Restored", timeout=8, markup=False)

    app.push_screen(
        ConfirmScreen(
            f"Put **{backup.name}** back as your {lesson.exercise} file?\n\n"
            "Your current file is copied to the backups first, so nothing is lost.",
            yes="Restore",
            no="Cancel",
            title="Restore a backup",
        ),
        answer,
    )


class CompareScreen(ModalScreen[None]):
    """The learner's file beside the reference, read-only."""

    BINDINGS = [Binding("escape,q", "close", "Close", show=False)]
    DEFAULT_CSS = """
    CompareScreen { align: center middle; }
    CompareScreen #compare { width: 100%; height: 100%; border: round $accent; }
    """

    def __init__(self, title: str, body: Any) -> None:
        super().__init__()
        self.title_text, self.body = title, body

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="compare") as box:
            box.border_title = self.title_text
            box.border_subtitle = "yours | the reference · escape closes"
            yield Static(self.body)

    def action_close(self) -> None:
        self.dismiss(None)


def compare(app: Any) -> None:
    """Once the open exercise has passed: the learner's file beside the reference."""
    lesson = getattr(app, "lesson", None)
    if lesson is None or not lesson.ready:
        return
    reference = app.workspace.solution_text(lesson)
    if reference is None:
        app.notify(
            "The reference solution unlocks once your exercise passes.", title="Locked", timeout=4
        )
        return
    try:
        mine = app.workspace.exercise_path(lesson).read_text("utf-8", errors="replace")
    except OSError as exc:
        app.notify(f"cannot read your file: {exc}", severity="error", markup=False)
        return
    from gpulab.course.side_by_side import side_by_side

    app.push_screen(
        CompareScreen(
            f"{lesson.exercise}: yours beside the reference", side_by_side(mine, reference)
        )
    )
