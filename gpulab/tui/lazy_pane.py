"""What the panes built on demand share: a base that builds on first show, and
the message a pane shows when a core module it needs is missing or broken.

The Roofline, Device, Roadmap and Serving panes each show a core module,
imported when the pane is first shown, never at start-up; a module that is
missing or broken becomes a message in its pane, not a crash.
"""

from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import TabbedContent, TabPane


def unavailable(what: str, exc: BaseException) -> Text:
    return Text(
        f"{what} is not available in this installation ({type(exc).__name__}: {exc}).",
        style="yellow",
    )


class LazyPane(VerticalScroll):
    """A pane that builds its content the first time it is shown."""

    HELP_TOPIC = ""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, can_focus=True)
        self._stale = True

    def ensure_rendered(self) -> None:
        if self._stale:
            self._stale = False
            self.build()

    def build(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


def tab_shown(widget: Widget) -> bool:
    """Whether `widget` is in the tab its TabbedContent shows: asked of the
    widget's own ancestors, not of the app."""
    tab = next((node for node in widget.ancestors if isinstance(node, TabPane)), None)
    tabs = next((node for node in widget.ancestors if isinstance(node, TabbedContent)), None)
    return tab is not None and tabs is not None and tabs.active == tab.id
