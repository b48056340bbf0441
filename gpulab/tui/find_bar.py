"""The editor's one-line bar: find text (ctrl+f) or go to a line (ctrl+g).

It sits under the code and never changes the file: a find selects the match
and a go-to moves the cursor. Enter finds the next match (down too, up the one
before), or goes to the line and closes; Esc closes; both give the focus back
to the code, in the mode it was in.
"""

from __future__ import annotations

from collections.abc import Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Input, Label, TextArea
from textual.widgets.text_area import Location, Selection

from gpulab.tui.focus import focus_now


def find_in(text: str, needle: str, after: int, *, backwards: bool = False) -> int:
    """Offset of the next `needle` in `text` from `after` (case-insensitive
    unless the needle has capitals), wrapping round; -1 when there is none."""
    if not needle:
        return -1
    if needle == needle.lower():
        text = text.lower()
    if backwards:
        found = text.rfind(needle, 0, max(0, after))
        return found if found >= 0 else text.rfind(needle)
    found = text.find(needle, after)
    return found if found >= 0 else text.find(needle)


def offset_to_location(text: str, offset: int) -> Location:
    row = text.count("\n", 0, offset)
    return row, offset - (text.rfind("\n", 0, offset) + 1)


def location_to_offset(text: str, location: Location) -> int:
    row, column = location
    lines = text.split("\n")
    return sum(len(line) + 1 for line in lines[:row]) + column


class FindBar(Horizontal):
    """Find or go-to-line for one TextArea; hidden until opened."""

    DEFAULT_CSS = """
    FindBar { height: 1; display: none; background: $boost; }
    FindBar.-open { display: block; }
    FindBar Label { width: auto; padding: 0 1; }
    FindBar Input { width: 1fr; }
    FindBar #find-said { color: $text-muted; }
    """

    BINDINGS = [
        Binding("escape", "close", "Close", show=False),
        Binding("down", "step(False)", "Next", show=False),
        Binding("up", "step(True)", "Previous", show=False),
    ]

    def __init__(
        self, editor: TextArea, *, on_leave: Callable[[], None] | None = None, id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self.editor = editor
        self.on_leave = on_leave  # the focus went to neither the bar nor the code
        self.mode = "find"

    def compose(self) -> ComposeResult:
        yield Label("Find:", id="find-label")
        yield Input(id="find-input", select_on_focus=True, compact=True)  # no border: one row
        yield Label("", id="find-said")

    @property
    def input(self) -> Input:
        return self.query_one("#find-input", Input)

    @property
    def is_open(self) -> bool:
        return self.has_class("-open")

    def open(self, mode: str) -> None:
        """Show the bar for "find" or "line" and focus its field."""
        self.mode = mode
        ed = self.editor
        label, hint, value = (
            ("Find:", "text; Enter next, ↑ previous, Esc closes", ed.selected_text)
            if mode == "find"
            else ("Go to line:", f"1 to {ed.document.line_count}; Enter goes", "")
        )
        self.query_one("#find-label", Label).update(label)
        self.input.placeholder = hint
        if "\n" not in value and (value or mode == "line"):
            self.input.value = value
        self.say("")
        self.add_class("-open")
        focus_now(self.input)  # "40" right after ctrl+g goes in the field

    def action_close(self) -> None:
        self.remove_class("-open")
        focus_now(self.editor)

    def on_descendant_blur(self) -> None:
        self.call_after_refresh(self._left)  # once the new focus is known

    def _left(self) -> None:
        if not (self.is_attached and self.is_open and self.app.screen is self.screen):
            return  # closed, or a dialog on top: the bar stays for its return
        focused = self.screen.focused
        if focused is not None and self in focused.ancestors_with_self:
            return
        self.remove_class("-open")
        if focused is not self.editor and self.on_leave is not None:
            self.on_leave()

    def say(self, words: str) -> None:
        self.query_one("#find-said", Label).update(words)

    @on(Input.Submitted, "#find-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.mode == "line":
            self._go_to_line(event.value)
        else:
            self.action_step(False)

    def action_step(self, backwards: bool) -> None:
        """The next (or previous) match, selected and scrolled into view."""
        if self.mode != "find":
            return
        ed, needle = self.editor, self.input.value
        text = "\n".join(ed.document.lines)  # offsets count one per line end, CRLF or not
        start, end = sorted(ed.selection)
        after = location_to_offset(text, start if backwards else end)
        found = find_in(text, needle, after, backwards=backwards)
        if found < 0:
            self.say("not found" if needle else "")
            return
        ed.selection = Selection(
            offset_to_location(text, found), offset_to_location(text, found + len(needle))
        )
        ed.scroll_cursor_visible(center=True)
        row = offset_to_location(text, found)[0]
        self.say(f"line {row + 1}")

    def _go_to_line(self, value: str) -> None:
        ed = self.editor
        count = ed.document.line_count
        try:
            line = int(value.strip())
        except ValueError:
            line = 0
        if not 1 <= line <= count:
            self.say(f"a line from 1 to {count}")
            return
        code = ed.document[line - 1]
        self.action_close()
        ed.move_cursor((line - 1, len(code) - len(code.lstrip())), center=True)
