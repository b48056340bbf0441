"""The Roadmap & Glossary pane: search the glossary; below, GPU generations and
the book's claims checked (gpulab.course.glossary, gpulab.gpu.roadmap)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import Input, Static

from gpulab.tui.lazy_pane import LazyPane, unavailable


class RoadmapPane(LazyPane):
    """Search the glossary; below, GPU generations and the book's claims checked."""

    HELP_TOPIC = "roadmap"
    MAX_TERMS = 6

    def compose(self) -> ComposeResult:
        yield Input(
            placeholder="search the glossary (e.g. ridge, coalescing, HBM)", id="glossary-search"
        )
        yield Static("", id="glossary-results")
        yield Static("", id="roadmap")

    def build(self) -> None:
        self._show_terms("")
        try:
            from gpulab.gpu.roadmap import roadmap_renderable

            roadmap: Any = roadmap_renderable()
        except Exception as exc:  # noqa: BLE001
            roadmap = unavailable("The roadmap", exc)
        self.query_one("#roadmap", Static).update(roadmap)

    def on_key(self, event: Any) -> None:
        if event.key == "escape" and isinstance(self.app.focused, Input):
            event.stop()
            self.focus()  # leave the search box; single-letter keys work again

    @on(Input.Changed, "#glossary-search")
    def _search(self, event: Input.Changed) -> None:
        self._show_terms(event.value)

    def _show_terms(self, query: str) -> None:
        out = self.query_one("#glossary-results", Static)
        try:
            from rich.console import Group

            from gpulab.course.glossary import search, term_renderable

            terms = search(query)
        except Exception as exc:  # noqa: BLE001
            out.update(unavailable("The glossary", exc))
            return
        if not terms:
            out.update(Text(f"No term matches {query!r}.", style="dim"))
            return
        shown: list[Any] = []
        for term in terms[: self.MAX_TERMS]:
            shown += [term_renderable(term), Text("")]
        more = len(terms) - self.MAX_TERMS
        if more > 0:
            names = ", ".join(t.name for t in terms[self.MAX_TERMS : self.MAX_TERMS + 12])
            shown.append(Text(f"{more} more: {names}{'…' if more > 12 else ''}", style="dim"))
        out.update(Group(*shown))
