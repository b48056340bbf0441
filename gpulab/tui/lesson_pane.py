"""The Lesson pane: the lesson's Markdown, then the hints revealed so far."""

from __future__ import annotations

from textual.containers import VerticalScroll

from gpulab.content import Lesson

HINT_NAMES = ("a nudge", "the approach", "nearly the solution")


def hints_markdown(lesson: Lesson, revealed: int) -> str:
    total = len(lesson.hints)
    if not total:
        return ""
    parts = ["## Hints\n"]
    for i, hint in enumerate(lesson.hints[:revealed]):
        name = HINT_NAMES[i] if i < len(HINT_NAMES) else f"level {i + 1}"
        parts.append(f"**Hint {i + 1} of {total}: {name}.**\n\n{hint}\n")
    if revealed < total:
        nxt = HINT_NAMES[revealed] if revealed < len(HINT_NAMES) else "the next level"
        parts.append(f"*Stuck? Press **h** for hint {revealed + 1} of {total} ({nxt}).*")
    else:
        parts.append("*That was the last hint. The reference solution unlocks once your "
                     "exercise passes.*")
    return "\n".join(parts)


def lesson_markdown(lesson: Lesson) -> str:
    if lesson.error:
        return (f"# {lesson.number} {lesson.title}\n\n> **This lesson is broken.** "
                f"{lesson.error}\n\nThe other lessons work as usual; the course author "
                "can fix this entry in the manifest.\n")
    text = lesson.text()
    if not lesson.ready:
        text = ("> **Coming soon.** This lesson's exercise is not gradable yet; the text "
                "below may be a draft.\n\n" + text)
    return text


class LessonPane(VerticalScroll):
    """Lesson text and hints, rendered only once shown and after the first paint.

    Markdown is the costliest thing on the first screen (importing markdown-it
    and building a page: ~0.3 s CPU of a ~0.9 s start, measured), so the
    sidebar and tabs paint first and the text follows a moment later.
    """

    HELP_TOPIC = "lesson"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, can_focus=True)
        self.lesson: Lesson | None = None
        self.revealed = 0
        self._shown: tuple[str, int] | None = None  # what is on screen now

    def set_lesson(self, lesson: Lesson, revealed: int) -> None:
        self.lesson, self.revealed = lesson, revealed
        if getattr(self.app, "active_pane", None) == "lesson":
            self.call_after_refresh(self.ensure_rendered)

    def ensure_rendered(self) -> None:
        lesson = self.lesson
        if lesson is None or self._shown == (lesson.id, self.revealed):
            return
        if not self.children:
            from gpulab.tui.markdown import LabMarkdown

            self.mount(LabMarkdown("", id="lesson-text"), LabMarkdown("", id="hints"))
        if self._shown is None or self._shown[0] != lesson.id:
            self.query_one("#lesson-text").update(lesson_markdown(lesson))  # type: ignore[attr-defined]
            self.scroll_home(animate=False)
        self.query_one("#hints").update(hints_markdown(lesson, self.revealed))  # type: ignore[attr-defined]
        self._shown = (lesson.id, self.revealed)

    def show_hints(self) -> None:
        """Scroll the hints into view (after a reveal)."""
        self.ensure_rendered()
        self.call_after_refresh(self.scroll_to_widget, self.query_one("#hints"), top=True,
                                animate=False)
