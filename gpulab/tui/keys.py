"""The lab's keys: the App's bindings, and which of them work now.

Every key here is in gpulab/tui/help/keys.md (tests/tui/test_tui_modes.py
checks it); the panes' own keys are on the panes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.binding import Binding, BindingType
from textual.widgets import Input, TextArea

from gpulab.tui.screens import HelpScreen, NoticeScreen, SolutionScreen
from gpulab.tui.shell import PANES, TITLES

if TYPE_CHECKING:
    from gpulab.tui.lab_app import LabApp

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


BINDINGS: list[BindingType] = [
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
    Binding("e", "edit", "Edit", id="app.edit", tooltip="Edit the exercise (Esc stops editing)"),
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
    Binding("question_mark", "help", "Help", id="app.help", tooltip="Help for the pane you are in"),
    Binding("f1", "help", "Help", show=False, priority=True),
    *[
        Binding(str(i + 1), f"show_pane('{p}')", t, show=False, id=f"app.pane.{p}")
        for i, (p, t) in enumerate(zip(PANES, TITLES, strict=True))
    ],
]


def allowed_now(app: LabApp, action: str) -> bool | None:
    """The App's check_action: True, the action runs; False, it does not,
    its binding is hidden and the key goes on (q typed into a field); None,
    the binding shows, dimmed, and does nothing."""
    modal = len(app.screen_stack) > 1
    if action == "quit_q":
        # False lets the key through: people type q in the editor and the
        # search boxes, and q closes help and the solution.
        focused = app.focused
        typing = isinstance(focused, Input) or (
            isinstance(focused, TextArea) and not focused.read_only
        )
        return not typing and not isinstance(app.screen, (HelpScreen, SolutionScreen, NoticeScreen))
    if action == "cancel_check":
        return app.checking or app.probing
    if modal and action in LESSON_ACTIONS:
        return False  # not behind a dialog's back (a check under "Reset?", help on help)
    if action in ("check", "check_explain", "reset", "solution", "hint", "toggle_watch"):
        return True if app.lesson is not None and app.lesson.ready else None
    return True
