"""The footer: the keys that work now, led by the Exercise pane's mode.

On the Exercise pane a single letter is either a command (VIEW) or text typed
into the learner's file (EDIT), so the footer says which, always, on its left
where it cannot scroll out of sight. Textual's Footer recomposes whenever the
bindings change; the pane refreshes them on every change of mode.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer, Label

MODE_TEXT = {"view": "VIEW", "edit": "EDIT — Esc to stop"}


class ModeLabel(Label):
    """VIEW or EDIT; a click switches, like e and Esc."""

    def __init__(self, mode: str) -> None:
        super().__init__(MODE_TEXT[mode], id="footer-mode", classes=f"-{mode}")
        self.mode = mode
        self.tooltip = (
            "Editing: keys type into your file. Esc (or a click here) stops."
            if mode == "edit"
            else "Viewing: keys are commands. e, Enter or a click in the code edits."
        )

    def on_click(self) -> None:
        pane = self.app.query_one("#exercise-pane")
        if self.mode == "edit":
            pane.stop_editing()  # type: ignore[attr-defined]
        else:
            pane.start_editing()  # type: ignore[attr-defined]


class LabFooter(Footer):
    """Footer with the Exercise pane's mode in front of the keys."""

    DEFAULT_CSS = """
    LabFooter #footer-mode {
        width: auto;
        height: 1;
        padding: 0 1;
        margin-right: 1;
        text-style: bold;
        color: $text;
        background: $primary-muted;
    }
    LabFooter #footer-mode.-edit {
        color: $text-warning;
        background: $warning-muted;
    }
    """

    # Below this many columns the keys go closer together: at 80, the Device
    # pane's nine keys and the palette's hint cut "? Help" to "? Hel".
    COMPACT_BELOW = 100

    def on_resize(self) -> None:
        if hasattr(self, "compact"):  # Textual >= 0.86
            self.compact = self.app.size.width < self.COMPACT_BELOW

    def compose(self) -> ComposeResult:
        if self._bindings_ready:
            mode = getattr(self.app, "editor_mode", lambda: None)()
            if mode in MODE_TEXT:
                yield ModeLabel(mode)
        yield from super().compose()
