"""Moving the focus before the next key is handled.

Widget.focus() only schedules the change, behind every message already
queued. Keys typed in one burst (2, e and the first letters, as a quick
typist does on a fresh start, or any typing on a loaded machine) are all
queued before it: they went to the widget that had the focus before, where
letters are commands, and `q` quit the lab with the text lost.
"""

from __future__ import annotations

from textual.dom import NoScreen
from textual.widget import Widget


def focus_now(widget: Widget) -> None:
    """Give `widget` the focus at once (as Widget.focus() does, but not later)."""
    try:
        screen = widget.screen
    except NoScreen:  # not on a screen (yet): the deferred way
        widget.focus()
        return
    screen.set_focus(widget)
