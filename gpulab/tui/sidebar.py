"""The lesson sidebar: the nine lessons, their status and grade, and under a
lesson with steps one line per exercise (its steps, then its final one)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option, OptionDoesNotExist

from gpulab.course.content import Course, Lesson
from gpulab.lab import state as progress
from gpulab.lab.workspace import Workspace
from gpulab.tui.check_bus import CheckBus
from gpulab.wire.status import Status

# Glyphs as well as colours, so status reads the same with NO_COLOR.
STYLES = {
    Status.PASSED: ("✔", "green"),
    Status.FAILED: ("✘", "red"),
    Status.NOT_STARTED: ("○", ""),
    Status.COMING: ("◌", "dim"),
    Status.BROKEN: ("⚠", "bold red"),
}


def lesson_status(lesson: Lesson, ws: Workspace, state: dict | None = None) -> tuple[Status, str]:
    """(status, grade) of a lesson: passed / failed / not started / coming / broken."""
    entry = (state or {}).get(lesson.exercise)
    if state is None:
        entry = ws.exercise_state(lesson.exercise)
    status = progress.lesson_status(lesson, entry)
    entry = entry if isinstance(entry, dict) and lesson.ready else {}
    grade = entry.get("grade", "")
    return status, str(grade) if grade else ""


def lesson_prompt(lesson: Lesson, status: Status, grade: str, detail: str = "") -> Text:
    glyph, style = STYLES.get(status, ("?", ""))
    text = Text()
    text.append(f"{glyph} ", style=style)
    text.append(f"{lesson.number} ", style="bold")
    text.append(lesson.title, style="dim" if status == Status.COMING else "")
    detail = detail or status + (f" · grade {grade}" if grade else "")
    text.append(f"\n   {detail}", style=f"{style} italic" if style else "dim italic")
    return text


def step_prompt(lesson: Lesson, status: Status, grade: str) -> Text:
    """One exercise of a lesson with steps, on one line under the lesson."""
    glyph, style = STYLES.get(status, ("?", ""))
    text = Text("   ")
    text.append(f"{glyph} ", style=style)
    name = lesson.name if lesson.is_step else f"the exercise: {lesson.exercise}"
    text.append(f"{lesson.position + 1}. {name}", style="dim" if status == Status.COMING else "")
    if grade:
        text.append(f" · {grade}", style=style)
    return text


HEADER = "lesson:"  # the id of a lesson's own line above its steps: "lesson:<lesson id>"


def current_exercise(exercises: tuple[Lesson, ...], ws: Workspace, state: dict | None = None):
    """The exercise to open for a lesson: its first not yet passed, else its last."""
    for e in exercises:
        if lesson_status(e, ws, state)[0] not in (Status.PASSED, Status.COMING, Status.BROKEN):
            return e
    return exercises[-1]


class LessonList(OptionList):
    """One option per lesson; enter or a click opens it."""

    HELP_TOPIC = "sidebar"

    def __init__(
        self, course: Course, ws: Workspace, checks: CheckBus, *, id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self.course, self.ws, self._checks = course, ws, checks

    def on_mount(self) -> None:
        self.rebuild()
        # Any check changes a status, the open lesson's or one left meanwhile.
        self._checks.finished.subscribe(self, lambda _: self.rebuild(), immediate=True)

    def rebuild(self) -> None:
        """Redraw every lesson's status (after a check, a reset, a reload)."""
        keep = self.highlighted
        exercises = self.ws.load_state().get("exercises", {})
        options = []
        for lesson in self.course.lessons:
            steps = self.course.lesson_exercises(lesson)
            status = lesson_status(lesson, self.ws, exercises)
            if len(steps) == 1:
                options.append(Option(lesson_prompt(lesson, *status), id=lesson.exercise))
                continue
            done = sum(1 for e in steps if lesson_status(e, self.ws, exercises)[0] == Status.PASSED)
            detail = f"{done} of {len(steps)} passed" + (
                f" · grade {status[1]}" if status[1] else ""
            )
            options.append(
                Option(lesson_prompt(lesson, *status, detail=detail), id=HEADER + lesson.id)
            )
            options += [
                Option(step_prompt(e, *lesson_status(e, self.ws, exercises)), id=e.exercise)
                for e in steps
            ]
        self.clear_options()
        self.add_options(options)
        if keep is not None:
            self.highlighted = keep

    def select_lesson(self, lesson: Lesson) -> None:
        """Highlight the open exercise (under its lesson, if it has steps)."""
        try:
            self.highlighted = self.get_option_index(lesson.exercise)
        except OptionDoesNotExist:  # a course built by hand, without its steps listed
            self.highlighted = lesson.index

    def choose(self, option_id: str) -> Lesson | None:
        """The exercise an option opens: its own, or for a lesson's line above
        its steps, the lesson's first exercise not yet passed."""
        if option_id.startswith(HEADER):
            key = option_id[len(HEADER) :]
            lesson = next((le for le in self.course.lessons if le.id == key), None)
            if lesson is None:
                return None
            return current_exercise(self.course.lesson_exercises(lesson), self.ws)
        return self.course.find(option_id)


def passed_summary(course: Course, ws: Workspace) -> str:
    """The sidebar's first line: "3 of 9 exercises passed"."""
    exercises = ws.load_state().get("exercises", {})
    # Every exercise counts, steps included: each is graded on its own.
    ready = [lesson for lesson in course.exercises if lesson.ready]
    passed = sum(1 for lesson in ready if lesson_status(lesson, ws, exercises)[0] == Status.PASSED)
    # "gradable" only while some exercises are not ready yet.
    kind = "gradable " if len(ready) < len(course.exercises) else ""
    noun = "exercise" if len(ready) == 1 else "exercises"
    return f"{passed} of {len(ready)} {kind}{noun} passed"


class PassedSummary(Static):
    """The count of exercises passed, above the list; recounted after a check."""

    def __init__(
        self, course: Course, ws: Workspace, checks: CheckBus, *, id: str | None = None
    ) -> None:
        super().__init__("", id=id)
        self.course, self.ws, self._checks = course, ws, checks

    def on_mount(self) -> None:
        self._checks.finished.subscribe(self, lambda _: self.recount(), immediate=True)

    def recount(self) -> None:
        self.update(passed_summary(self.course, self.ws))
