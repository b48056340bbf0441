"""The lesson actions: open, check, hint, reset, solution, watch, help, welcome,
and what a finished check says (a pass moves a step on).

A plain object the App (app.py) holds: the App binds the keys and the
command palette's commands to it. Every action is reachable by a key, from
the command palette, and by the mouse (sidebar, tabs, buttons).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from gpulab.course.content import Lesson
from gpulab.tui.editor import ExercisePane, editor_language
from gpulab.tui.screens import ConfirmScreen, SolutionScreen, WelcomeScreen, start_words
from gpulab.tui.sidebar import LessonList
from gpulab.wire.status import Status

if TYPE_CHECKING:
    from textual.widgets import OptionList

    from gpulab.tui.check_runner import CheckRunner
    from gpulab.tui.lab_app import LabApp
    from gpulab.tui.messages import ExerciseChangedOnDisk, ExerciseSaved
    from gpulab.tui.shell import Shell


class LessonActions:
    """The lesson actions, on the App's lesson and its layout (Shell)."""

    def __init__(self, app: LabApp, shell: Shell, runner: CheckRunner) -> None:
        self.app, self.shell, self.runner = app, shell, runner

    def first_ready(self) -> Lesson | None:
        """The course's first gradable exercise: a lesson's first step, where it
        has steps (a new learner starts there, not on the lesson's final one)."""
        return next((lesson for lesson in self.app.course.exercises if lesson.ready), None)

    def initial_lesson(self) -> Lesson | None:
        """Where the lab opens: the lesson last open, else the first gradable one."""
        app = self.app
        last = app.workspace.load_state().get("last_lesson")
        found = app.course.find(last) if isinstance(last, str) else None
        return (
            found or self.first_ready() or (app.course.lessons[0] if app.course.lessons else None)
        )

    def welcome_back(self) -> None:
        """At a start in a workspace used before: the lesson it opens on."""
        lesson = self.app.lesson
        if lesson is not None and not self.app.workspace.created:
            status = self.app.workspace.status(lesson.exercise)
            self.app.notify(
                f"Continuing lesson {lesson.number}, {lesson.title}"
                + (f", {lesson.step_label}" if lesson.step_label else "")
                + f" ({status}).",
                title="Welcome back",
                timeout=4,
            )

    # --- opening lessons ----------------------------------------------------------
    def open_lesson(
        self, lesson: Lesson | None, *, remember: bool = True, keep_results: bool = False
    ) -> None:
        """Open `lesson`'s text and exercise. `keep_results`: the Results
        pane keeps the check it shows (a step that just passed, whose
        results the learner has not read yet) and says what opened."""
        if lesson is None:
            return
        pane = self.app.query_one(ExercisePane)
        if self.app.lesson is not None and lesson.exercise != self.app.lesson.exercise:
            reason = pane.unsaved_reason()
            if reason and pane.asking:
                self.app.notify(
                    "Answer the question about the changed file first.", severity="warning"
                )
                return
            if reason:
                self.confirm_discard(
                    reason,
                    f"Open lesson {lesson.number}"
                    + (f", {lesson.step_label}" if lesson.step_label else ""),
                    lambda: self.open_lesson(lesson, remember=remember),
                )
                return
        self.app.lesson = lesson
        path = None
        if lesson.ready:
            try:
                path = self.app.workspace.ensure_exercise(lesson)
            except OSError as exc:
                self.app.notify(
                    f"cannot create your copy of {lesson.exercise}: {exc}", severity="error"
                )
        if remember:
            # The exercise, not only the lesson: a lesson with steps reopens
            # on the step last open (a lesson id, as older versions wrote,
            # still opens its final exercise).
            self.app.remember(
                self.app.workspace.set_last_lesson,
                lesson.exercise if lesson.step_count > 1 else lesson.id,
            )
        self.app.query_one(LessonList).select_lesson(lesson)
        self.shell.update_summary()
        self.shell.pane("lesson").set_lesson(lesson, self.app.workspace.hint_level(lesson.exercise))
        pane.set_lesson(lesson, path)
        if keep_results:
            self.shell.pane("results").note_opened(lesson)
        else:
            attempts = self.app.workspace.exercise_state(lesson.exercise).get("attempts", [])
            self.shell.pane("results").show_idle(
                lesson, self.app.workspace.last_result(lesson.exercise), attempts
            )
        self.shell.pane("roofline").set_lesson(lesson)
        self.app.watch_file(path)
        self.runner.prepare_spare(lesson, path)
        self.shell.pane_shown(self.shell.active_pane)  # the learner stays on the pane they were on
        self.app.refresh_bindings()

    def confirm_discard(self, reason: str, go: str, then: Callable[[], object]) -> None:
        """Ask before an edit that cannot be saved is left behind; `then()` on yes."""
        pane = self.app.query_one(ExercisePane)
        name = pane.path.name if pane.path else "the exercise"

        def answer(yes: bool | None) -> None:
            if yes:
                pane.discard()
                then()

        self.app.push_screen(
            ConfirmScreen(
                f"**Your edit to {name} is not saved**: {reason}.\n\n"
                f"{go} anyway, and lose the edit?",
                yes=f"{go}, losing it",
                no="Stay",
                title="Unsaved edit",
            ),
            answer,
        )

    def option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list.id != "lessons":
            return  # another list (the command palette's) bubbling up
        lesson = self.app.query_one(LessonList).choose(event.option.id or "")
        if lesson is not None:
            self.shell.sidebar_choice = None  # shown with b to pick one: it steps aside again
            self.open_lesson(lesson)
            self.shell.show_pane("lesson")

    def open_by_key(self, key: str) -> None:
        lesson = self.app.course.find(key)
        if lesson is None:
            self.app.notify(f"no lesson {key!r}", severity="error")
            return
        self.open_lesson(lesson)
        self.shell.show_pane("lesson")

    def next_lesson(self) -> None:
        """n: the next exercise: the lesson's next step, or the next lesson."""
        nxt = (
            self.app.course.next_exercise(self.app.lesson) if self.app.lesson is not None else None
        )
        if nxt is None:
            self.app.notify("This is the last lesson.", timeout=3)
            return
        self.open_by_key(nxt.exercise)

    def advance_after_pass(self, lesson: Lesson) -> str:
        """A step has passed: open the lesson's next step (the learner can
        still open any other). Returns what to tell them, "" when staying."""
        nxt = self.app.course.next_exercise(lesson)
        if not lesson.is_step or nxt is None or nxt.index != lesson.index:
            return ""
        if self.app.lesson is None or self.app.lesson.exercise != lesson.exercise:
            return ""  # they have moved on meanwhile: leave them where they are
        if self.app.query_one(ExercisePane).unsaved_reason():
            return f"Next: {nxt.step_label}, {nxt.exercise_title} (n)."
        # The passing results stay on screen: they were the point of the check.
        self.open_lesson(nxt, keep_results=True)
        return f"On to {nxt.step_label}: {nxt.exercise_title}."

    # --- VIEW and EDIT modes of the Exercise pane ---------------------------------------
    def edit(self) -> None:
        """e: the Exercise pane in EDIT mode (it opens in VIEW mode otherwise)."""
        self.shell.show_pane("exercise")
        self.app.query_one(ExercisePane).start_editing()

    # --- checking -------------------------------------------------------------------
    def gradable(self) -> Lesson | None:
        lesson = self.app.lesson
        if lesson is None:
            self.app.notify("Pick a lesson first.", severity="warning")
        elif lesson.error:
            self.app.notify(f"Lesson {lesson.number} is broken: {lesson.error}", severity="error")
        elif not lesson.ready:
            self.app.notify(f"Lesson {lesson.number}'s exercise is coming soon.", timeout=3)
        elif missing := lesson.missing_requirements():
            from gpulab.course.install_hint import missing_message  # `gpulab check` says the same

            # markup off: "gpulab[jax]" is not a style tag
            self.app.notify(
                missing_message(lesson.exercise, missing),
                title="Missing package",
                severity="error",
                timeout=10,
                markup=False,
            )
        else:
            return lesson
        return None

    def check_explain(self) -> None:
        """X: a check, then what limits the kernel (`gpulab check --explain`):
        on a CPU too, from the compiled kernel and the datasheet GPU."""
        self.check(explain=True)

    def check(self, from_watch: bool = False, explain: bool = False) -> None:
        lesson = self.gradable()
        if lesson is None:
            return
        pane = self.app.query_one(ExercisePane)
        # Save first: the check grades the file on disk. In watch mode the
        # disk already holds what the learner's own editor wrote.
        if not from_watch and (reason := pane.unsaved_reason()):
            self.app.notify(
                "Not checked: answer the question about the changed file first."
                if pane.asking
                else f"Not checked: a check grades the file on disk, and your edit is not "
                f"saved: {reason}.",
                severity="warning",
                timeout=8,
                markup=False,
            )
            return
        path = pane.path
        if path is None:
            try:
                path = self.app.workspace.ensure_exercise(lesson)
            except OSError as exc:
                self.app.notify(
                    f"cannot create your copy of {lesson.exercise}: {exc}", severity="error"
                )
                return
        # A watch-mode check of the learner's typing here leaves them typing:
        # its verdict comes as a toast, and the Results pane has the rest.
        if not (from_watch and self.shell.editor_mode() == "edit"):
            self.shell.show_pane("results")
        self.app.start_check(lesson, path, explain=explain)

    def save(self) -> None:
        self.app.query_one(ExercisePane).save(explicit=True)

    def toggle_watch(self) -> None:
        if self.gradable() is None:
            return
        self.app.watch_mode = not self.app.watch_mode
        self.app.remember(self.app.workspace.set_setting, "watch", self.app.watch_mode)
        if self.app.watch_mode:
            name = self.app.query_one(ExercisePane).path
            self.app.notify(
                f"Every save of {name} re-runs the check: here (ctrl+s, or the "
                "autosave a second after you stop typing) or in your own editor. w stops.",
                title="Watch mode on",
                timeout=5,
            )
        else:
            self.app.notify("Watch mode off.", timeout=2)

    def changed_on_disk(self, message: ExerciseChangedOnDisk) -> None:
        if self.shell.main_screen() is None:
            return  # the watcher's message arrived as the app closed
        pane = self.app.query_one(ExercisePane)
        if message.path != pane.path or pane.is_own_version():
            return  # an old lesson's file, or the lab's own write
        pane.disk_changed()
        if self.app.watch_mode:
            # A check already running on the old text is replaced (exclusive worker).
            self.check(from_watch=True)

    def saved(self, event: ExerciseSaved) -> None:
        """Watch mode re-checks on every save of the in-lab editor, ctrl+s
        and the autosave alike, as on every save of another editor (the file
        watcher ignores the lab's own writes). It never did: only ctrl+s was
        meant to, and after the autosave ctrl+s found nothing to save."""
        if self.app.watch_mode:
            self.check(from_watch=True)
        elif not event.changed:
            self.app.notify(f"{event.path.name}: nothing to save", timeout=2)

    # --- hints, reset, solution ------------------------------------------------------
    def hint(self) -> None:
        lesson = self.gradable()
        if lesson is None:
            return
        before = self.app.workspace.hint_level(lesson.exercise)
        level = self.app.remember(self.app.workspace.reveal_hint, lesson)
        if level is None:  # not saved: shown for this session all the same
            level = min(before + 1, len(lesson.hints))
        if level == before:
            passed = self.app.workspace.status(lesson.exercise) == Status.PASSED
            self.app.notify(
                "All three hints are showing. "
                + (
                    "You have passed: s shows the reference solution."
                    if passed
                    else "The solution unlocks once you pass."
                ),
                timeout=4,
            )
        pane = self.shell.pane("lesson")
        pane.set_lesson(lesson, level)
        self.shell.show_pane("lesson")
        pane.show_hints()

    def reset(self) -> None:
        lesson = self.gradable()
        if lesson is None:
            return
        pane = self.app.query_one(ExercisePane)
        if reason := pane.unsaved_reason():
            self.app.notify(
                "Not reset: answer the question about the changed file first."
                if pane.asking
                else f"Not reset: your edit is not saved: {reason}.",
                severity="warning",
                timeout=8,
                markup=False,
            )
            return

        def answer(yes: bool | None) -> None:
            if not yes:
                self.app.notify("Reset cancelled; your file is untouched.", timeout=2)
                return
            try:
                backup = self.app.workspace.reset(lesson)
            except OSError as exc:
                self.app.notify(f"reset failed: {exc}", severity="error")
                return
            pane.set_lesson(lesson, pane.path)
            kept = f" Your file was saved as {backup}." if backup else ""
            self.app.notify(
                f"{lesson.exercise} is back to the starter.{kept}", title="Reset", timeout=8
            )

        self.app.push_screen(
            ConfirmScreen(
                f"Reset **{lesson.exercise}** to the starter?\n\nYour current file is copied to "
                f"`{self.app.workspace.backups_dir}` first, so nothing is lost.",
                yes="Reset",
                no="Cancel",
                title="Reset the exercise",
            ),
            answer,
        )

    def solution(self) -> None:
        lesson = self.gradable()
        if lesson is None:
            return
        text = self.app.workspace.solution_text(lesson)
        if text is None:
            self.app.notify(
                "The reference solution unlocks once your exercise passes. "
                "Hints (h) help meanwhile.",
                title="Locked",
                timeout=4,
            )
            return
        self.app.push_screen(
            SolutionScreen(
                lesson.reference_path.name, text, language=editor_language(self.app.syntax)
            )
        )

    # --- welcome ---------------------------------------------------------------------
    def welcome(self) -> None:
        from gpulab.gpu import hardware

        first = self.first_ready()
        label, text = start_words(first)
        screen = WelcomeScreen(
            first=self.app.workspace.created,
            workspace=str(self.app.workspace.root),
            start_label=label,
            start_text=text,
            datasheet_gpu=hardware.GPUS[hardware.DEFAULT_GPU].name,
            info=self.app.gpu_info,
        )

        def answer(start: bool | None) -> None:
            if start and first is not None:
                self.open_lesson(first)
                self.shell.show_pane("lesson")

        self.app.push_screen(screen, answer)
        self.app.want_gpu_info()
