"""A TextArea that edits Python the way a code editor does.

Lines wrap (at 80x24 the editor is about 74 columns wide and starters have
95-column lines: a wrapped line shows every column, a cut one hid its end),
but the cursor keys move by lines of code, not by wrapped rows: Textual's own
End stopped at the wrap and End, Left landed mid-identifier. Enter keeps the
line's indent (one more level after a colon or an unclosed bracket, one less after
return/pass/...), and Backspace in the indent removes a level. Nothing here
knows about the lab: editor.py adds the modes and saving.
"""

from __future__ import annotations

from textual import events
from textual.widgets import TextArea
from textual.widgets.text_area import Location

# A line that ends its block: the next one starts a level out.
BLOCK_ENDERS = ("return", "pass", "break", "continue", "raise")


def strip_comment(code: str) -> str:
    """`code` without a trailing # comment (a # inside quotes is kept)."""
    quote: str | None = None
    for i, ch in enumerate(code):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            return code[:i]
    return code


def opens_more(code: str) -> bool:
    """More brackets opened than closed in `code` (quotes skipped)."""
    depth, quote = 0, None
    for ch in code:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
    return depth > 0


def indent_after(line: str, width: int) -> str:
    """The indent of a new line typed after `line` (the part before the cursor)."""
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    code = strip_comment(line).rstrip()
    if code.endswith(":") or opens_more(code):
        return indent + " " * width
    words = code.split()
    if words and words[0] in BLOCK_ENDERS and indent:
        return indent[: max(0, len(indent) - width)]
    return indent


class CodeTextArea(TextArea):
    """TextArea with code-line motions, auto-indent and indent-aware Backspace."""

    _goal_width = 0  # the cell column Up/Down aim for (kept across short lines)

    # --- motion by lines of code -------------------------------------------------
    def record_cursor_width(self) -> None:
        super().record_cursor_width()
        row, column = self.cursor_location
        self._goal_width = self.get_column_width(row, column)

    def _at_goal(self, row: int) -> Location:
        return row, self.cell_width_to_column_index(self._goal_width, row)

    def get_cursor_up_location(self) -> Location:
        row, _ = self.cursor_location
        return (0, 0) if row == 0 else self._at_goal(row - 1)

    def get_cursor_down_location(self) -> Location:
        row, _ = self.cursor_location
        if row >= self.document.line_count - 1:
            return row, len(self.document[row])
        return self._at_goal(row + 1)

    def get_cursor_line_end_location(self) -> Location:
        row, _ = self.cursor_location
        return row, len(self.document[row])

    def get_cursor_line_start_location(self, smart_home: bool = False) -> Location:
        """Home: the first non-blank of the code line, then column 0 (Textual's
        smart home, which it turns off for wrapped lines)."""
        row, column = self.cursor_location
        line = self.document[row]
        first = len(line) - len(line.lstrip())
        if smart_home and (column == 0 or column > first):
            return row, first
        return row, 0

    # --- typing --------------------------------------------------------------------
    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter" and not self.read_only:
            event.stop()
            event.prevent_default()
            self._restart_blink()
            start, end = sorted(self.selection)
            before = self.document[start[0]][: start[1]]
            self._replace_via_keyboard("\n" + indent_after(before, self.indent_width), start, end)
            return
        await super()._on_key(event)

    def action_delete_left(self) -> None:
        """Backspace in a line's leading spaces goes back a whole indent level."""
        if not self.read_only and self.selection.is_empty:
            row, column = self.cursor_location
            before = self.document[row][:column]
            if column and before.strip(" ") == "":
                back = (column - 1) % self.indent_width + 1
                self._delete_via_keyboard((row, column - back), (row, column))
                return
        super().action_delete_left()
