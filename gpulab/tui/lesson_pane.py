"""The Lesson pane: the lesson's Markdown, then the hints revealed so far."""

from __future__ import annotations

import asyncio
from functools import partial

from textual.containers import Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.dom import NoScreen
from textual.widget import Widget

from gpulab.course.content import Lesson
from gpulab.lab.workspace import Workspace
from gpulab.tui.check_bus import CheckBus
from gpulab.tui.lazy_pane import tab_shown
from gpulab.tui.messages import CheckFinished, LessonPainted
from gpulab.wire.status import Status

HINT_NAMES = ("a nudge", "the approach", "nearly the solution")


def hints_markdown(lesson: Lesson, revealed: int, passed: bool = False) -> str:
    """The revealed hints; the closing line says where the solution stands."""
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
    elif passed:
        parts.append(
            "*That was the last hint. You have passed: press **s** for the reference solution.*"
        )
    else:
        parts.append(
            "*That was the last hint. The reference solution unlocks once your exercise passes.*"
        )
    return "\n".join(parts)


def lesson_markdown(lesson: Lesson) -> str:
    if lesson.error:
        return (
            f"# {lesson.number} {lesson.exercise_title}\n\n> **This lesson is broken.** "
            f"{lesson.error}\n\nThe other lessons work as usual; the course author "
            "can fix this entry in the manifest.\n"
        )
    text = lesson.text()
    if lesson.step_count > 1 and not lesson.error:
        # Which of the lesson's exercises is open: the text is the lesson's
        # (a folder step's own), the hints and the check are this exercise's.
        what = lesson.name if lesson.is_step else "the lesson's exercise"
        text = (
            f"> **{lesson.step_label.capitalize()}: {what}** (`{lesson.exercise}`). "
            "The hints below and the check (c) are this step's; the sidebar lists "
            "the others.\n\n" + text
        )
    if not lesson.ready:
        text = (
            "> **Coming soon.** This lesson's exercise is not gradable yet; the text "
            "below may be a draft.\n\n" + text
        )
    return text


FIRST_SCREEN_LINES = 30  # source lines rendered before the first paint of a lesson


def split_first_screen(text: str, lines: int = FIRST_SCREEN_LINES) -> tuple[str, str]:
    """The lesson cut at the first blank line, outside a code fence, from
    `lines` on: the head fills the first screen and is rendered alone, the
    rest is appended after it has painted. (Textual re-parses the last block
    of the head with the rest, so any cut renders the same in the end; a
    blank line between blocks just avoids a flash of a half block.)"""
    parts = text.splitlines(keepends=True)
    fenced = False
    for i, line in enumerate(parts):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif i >= lines and not fenced and not line.strip():
            return "".join(parts[: i + 1]), "".join(parts[i + 1 :])
    return text, ""


class LessonText(Vertical):
    """The lesson's text: Markdown for the core path, a folded DeepDive for
    each deep dive (gpulab.course.sections), in the lesson's order."""

    DEFAULT_CSS = "LessonText { height: auto; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.source = ""  # the Markdown shown, deep dives included


class LessonPane(VerticalScroll):
    """Lesson text and hints, rendered only once shown and after the first paint.

    Markdown is the costliest thing on the first screen (importing markdown-it
    and building a page: ~0.3 s CPU of a ~0.9 s start, measured), so the
    sidebar and tabs paint first and the text follows a moment later. Under
    a dialog (the welcome, on a first start) only the first screenful is
    built until the dialog closes: mounting the whole lesson behind it kept
    the first frame, dialog included, off the screen for 2-4 s.
    """

    HELP_TOPIC = "lesson"

    def __init__(self, workspace: Workspace, checks: CheckBus, *, id: str | None = None) -> None:
        """`workspace` is read, never written (the hint level, whether the
        exercise passed); `checks` is the bus a finished check comes on."""
        super().__init__(id=id, can_focus=True)
        self.workspace, self._checks = workspace, checks
        self.lesson: Lesson | None = None
        self.revealed = 0
        self._shown: tuple[str, int, bool] | None = None  # what is on screen now
        self._lock = asyncio.Lock()
        self._screens_moved = asyncio.Event()  # a dialog opened or closed

    def on_mount(self) -> None:
        self._checks.finished.subscribe(self, self._check_finished, immediate=True)
        self.app.screen_change_signal.subscribe(
            self, lambda _: self._screens_moved.set(), immediate=True
        )

    def _check_finished(self, message: CheckFinished) -> None:
        # The hints' last line says whether the solution is open yet.
        lesson = message.lesson
        if self.lesson is not None and self.lesson.exercise == lesson.exercise:
            self.set_lesson(lesson, self.workspace.hint_level(lesson.exercise))

    def set_lesson(self, lesson: Lesson, revealed: int) -> None:
        self.lesson, self.revealed = lesson, revealed
        if tab_shown(self):
            self.call_after_refresh(self.ensure_rendered)

    def ensure_rendered(self) -> None:
        # mypy solves Textual's WorkType union for an async function as Never.
        self.run_worker(
            self._render_lesson,  # type: ignore[arg-type]
            group="lesson-render",
            exit_on_error=False,
        )

    async def wait_rendered(self) -> None:
        """Return once the lesson set last is on screen, whole: waits for the
        render in flight (they take turns on a lock), or renders it now if
        none has started. An event to wait on, for tests and anything that
        must scroll the whole lesson: a time limit fails on a busy machine.
        Under a dialog, that is once the dialog has closed."""
        await self._render_lesson()

    async def _render_lesson(self, hints_on_top: bool = False) -> None:
        async with self._lock:  # one render at a time: they mount and update the same widgets
            try:
                await self._render_locked(hints_on_top)
            except (NoMatches, NoScreen):
                pass  # the app is closing and took the widgets with it

    async def _render_locked(self, hints_on_top: bool) -> None:
        lesson = self.lesson
        passed = self._passed()
        # Keyed by exercise: a lesson's steps share its text (a folder step has
        # its own), not its hints.
        if lesson is None or self._shown == (lesson.exercise, self.revealed, passed):
            if hints_on_top:
                self.anchor()
            return
        if not self.children:
            from gpulab.tui.markdown import LabMarkdown

            await self.mount(LessonText(id="lesson-text"), LabMarkdown("", id="hints"))
        if self._shown is None or self._shown[0] != lesson.exercise:
            self.anchor(False)
            await self._render_text(lesson_markdown(lesson))
        await self.query_one("#hints").update(  # type: ignore[attr-defined]
            hints_markdown(lesson, self.revealed, passed)
        )
        self._shown = (lesson.exercise, self.revealed, passed)
        if hints_on_top:
            # The hints are last: anchoring keeps the newest in view while the
            # Markdown lays out (a one-off scroll raced the layout and fell short).
            # Scrolling by hand releases the anchor.
            self.anchor()

    async def _render_text(self, markdown: str) -> None:
        """The core path's first screenful, painted alone; then the rest of
        the lesson, each deep dive as a folded DeepDive."""
        from gpulab.course.sections import Section, split_sections
        from gpulab.tui.deep_dive import DeepDive
        from gpulab.tui.markdown import LabMarkdown

        body = self.query_one("#lesson-text", LessonText)
        await body.remove_children()
        body.source = markdown
        sections = split_sections(markdown)
        if not sections or sections[0].deep:
            sections.insert(0, Section(""))
        head, rest = split_first_screen(sections[0].text)
        top = LabMarkdown(head)
        await body.mount(top)
        self.scroll_home(animate=False)
        later = sections[1:]
        # Mounting a whole lesson's blocks (~160 widgets for lesson 01)
        # before anything paints put the first screen at ~1 s on a 2-core
        # machine: paint the first screenful, then the rest.
        await self._until_painted()
        self.post_message(LessonPainted())
        if not (rest or later):
            return
        if rest:
            await top.append(rest)
        widgets: list[Widget] = [DeepDive(s) if s.deep else LabMarkdown(s.text) for s in later]
        if widgets:
            await body.mount_all(widgets)

    async def _until_painted(self) -> None:
        """Return once this pane's screen has been drawn with what is mounted
        now. While a dialog covers it, that is once the dialog has closed:
        behind the welcome, a refresh asked for came at once, before the
        dialog had been drawn, and the rest of the lesson, mounted next,
        kept a batch of mounts open (Textual draws nothing then) until all
        of it was in: the first frame came 2-4 s late on a 2-core machine."""
        while not self.screen.is_active:  # is_current is true under a dialog too
            self._screens_moved.clear()
            await self._screens_moved.wait()
        painted = asyncio.Event()
        self.call_after_refresh(painted.set)
        await painted.wait()

    def _passed(self) -> bool:
        """Whether the open exercise has passed (the hints' last line depends on it)."""
        if self.lesson is None:
            return False
        return self.workspace.status(self.lesson.exercise) == Status.PASSED

    def show_hints(self) -> None:
        """Render, then keep the hints in view (after a reveal)."""
        # mypy solves Textual's WorkType union for an async function as Never.
        self.run_worker(
            partial(self._render_lesson, True),  # type: ignore[arg-type]
            group="lesson-render",
            exit_on_error=False,
        )
