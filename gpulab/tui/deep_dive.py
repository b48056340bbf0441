"""A lesson's deep dive in the Lesson pane: folded until the learner opens it.

The core path of a lesson is what a newcomer needs to pass its steps; deep
dives (gpulab.course.sections) hold the rest. Each is a Collapsible whose
Markdown is built the first time it is unfolded: a folded deep dive costs
one line on screen and nothing to lay out (a whole lesson's Markdown blocks
are the slowest thing the pane renders, see lesson_pane.py).
"""

from __future__ import annotations

from textual.widgets import Collapsible

from gpulab.course.sections import Section


class DeepDive(Collapsible):
    """One deep-dive section, folded; its text is rendered on first unfold."""

    def __init__(self, section: Section) -> None:
        super().__init__(
            title=f"Deep dive: {section.title}",
            collapsed=True,
            classes="deep-dive",
        )
        self.source = section.body  # the Markdown shown once unfolded
        self.filled = False

    async def on_collapsible_expanded(self, event: Collapsible.Expanded) -> None:
        if event.collapsible is not self or self.filled:
            return
        from gpulab.tui.markdown import LabMarkdown

        self.filled = True
        await self.query_one(Collapsible.Contents).mount(LabMarkdown(self.source))
