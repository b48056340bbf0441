"""The lesson sidebar: the nine lessons, their status and grade."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from gpulab.content import Course, Lesson
from gpulab.workspace import FAILED, PASSED, Workspace

# Glyphs as well as colours, so status reads the same with NO_COLOR.
STYLES = {
    PASSED: ("✔", "green"),
    FAILED: ("✘", "red"),
    "not started": ("○", ""),
    "coming": ("◌", "dim"),
    "broken": ("⚠", "bold red"),
}


def lesson_status(lesson: Lesson, ws: Workspace, state: dict | None = None) -> tuple[str, str]:
    """(status, grade) of a lesson: passed / failed / not started / coming / broken."""
    if lesson.error:
        return "broken", ""
    if not lesson.ready:
        return "coming", ""
    entry = (state or {}).get(lesson.exercise)
    if state is None:
        entry = ws.exercise_state(lesson.exercise)
    entry = entry if isinstance(entry, dict) else {}
    grade = entry.get("grade", "")
    return entry.get("status", "not started"), str(grade) if grade else ""


def lesson_prompt(lesson: Lesson, status: str, grade: str) -> Text:
    glyph, style = STYLES.get(status, ("?", ""))
    text = Text()
    text.append(f"{glyph} ", style=style)
    text.append(f"{lesson.number} ", style="bold")
    text.append(lesson.title, style="dim" if status == "coming" else "")
    detail = status + (f" · grade {grade}" if grade else "")
    text.append(f"\n   {detail}", style=f"{style} italic" if style else "dim italic")
    return text


class LessonList(OptionList):
    """One option per lesson; enter or a click opens it."""

    HELP_TOPIC = "sidebar"

    def __init__(self, course: Course, ws: Workspace, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.course, self.ws = course, ws

    def on_mount(self) -> None:
        self.rebuild()

    def rebuild(self) -> None:
        """Redraw every lesson's status (after a check, a reset, a reload)."""
        keep = self.highlighted
        exercises = self.ws.load_state().get("exercises", {})
        self.clear_options()
        self.add_options(
            [
                Option(
                    lesson_prompt(lesson, *lesson_status(lesson, self.ws, exercises)),
                    id=lesson.exercise,
                )
                for lesson in self.course.lessons
            ]
        )
        if keep is not None:
            self.highlighted = keep

    def select_lesson(self, lesson: Lesson) -> None:
        self.highlighted = lesson.index

    def summary(self) -> str:
        exercises = self.ws.load_state().get("exercises", {})
        ready = [lesson for lesson in self.course.lessons if lesson.ready]
        passed = sum(
            1 for lesson in ready if lesson_status(lesson, self.ws, exercises)[0] == PASSED
        )
        # "gradable" only while some lessons' exercises are not ready yet.
        kind = "gradable " if len(ready) < len(self.course.lessons) else ""
        noun = "exercise" if len(ready) == 1 else "exercises"
        return f"{passed} of {len(ready)} {kind}{noun} passed"
