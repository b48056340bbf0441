"""The app's actions on lessons: open, check, hint, reset, solution, watch, help.

Built on the shell (shell.py: layout and workers) and under GpulabApp (app.py:
the keys), so each module imports only the one below it. Every action is
reachable by a key, from the command palette, and by the mouse (sidebar, tabs,
buttons).
"""

from __future__ import annotations

from typing import Any

from textual import on

from gpulab.course.content import Lesson
from gpulab.tui.editor import ExercisePane, editor_language
from gpulab.tui.messages import ExerciseChangedOnDisk, ExerciseSaved
from gpulab.tui.screens import ConfirmScreen, HelpScreen, SolutionScreen, WelcomeScreen
from gpulab.tui.shell import LabShell
from gpulab.tui.sidebar import LessonList


class LessonActions(LabShell):
    """The shell's lesson actions; GpulabApp binds keys to them."""

    # --- opening lessons ----------------------------------------------------------
    def open_lesson(
        self, lesson: Lesson | None, *, remember: bool = True, keep_results: bool = False
    ) -> None:
        """Open `lesson`'s text and exercise. `keep_results`: the Results
        pane keeps the check it shows (a step that just passed, whose
        results the learner has not read yet) and says what opened."""
        if lesson is None:
            return
        pane = self.query_one(ExercisePane)
        if self.lesson is not None and lesson.exercise != self.lesson.exercise:
            reason = pane.unsaved_reason()
            if reason and pane.asking:
                self.notify("Answer the question about the changed file first.", severity="warning")
                return
            if reason:
                self.confirm_discard(
                    reason,
                    f"Open lesson {lesson.number}"
                    + (f", {lesson.step_label}" if lesson.step_label else ""),
                    lambda: self.open_lesson(lesson, remember=remember),
                )
                return
        self.lesson = lesson
        path = None
        if lesson.ready:
            try:
                path = self.workspace.ensure_exercise(lesson)
            except OSError as exc:
                self.notify(
                    f"cannot create your copy of {lesson.exercise}: {exc}", severity="error"
                )
        if remember:
            # The exercise, not only the lesson: a lesson with steps reopens
            # on the step last open (a lesson id, as older versions wrote,
            # still opens its final exercise).
            self.remember(
                self.workspace.set_last_lesson,
                lesson.exercise if lesson.step_count > 1 else lesson.id,
            )
        self.query_one(LessonList).select_lesson(lesson)
        self.update_summary()
        self._pane("lesson").set_lesson(lesson, self.workspace.hint_level(lesson.exercise))
        pane.set_lesson(lesson, path)
        if keep_results:
            self._pane("results").note_opened(lesson)
        else:
            attempts = self.workspace.exercise_state(lesson.exercise).get("attempts", [])
            self._pane("results").show_idle(
                lesson, self.workspace.last_result(lesson.exercise), attempts
            )
        self._pane("roofline").set_lesson(lesson)
        self.watch_file(path)
        self.prepare_spare(lesson, path)
        self._pane_shown(self.active_pane)  # the learner stays on the pane they were on
        self.refresh_bindings()

    def confirm_discard(self, reason: str, go: str, then: Any) -> None:
        """Ask before an edit that cannot be saved is left behind; `then()` on yes."""
        pane = self.query_one(ExercisePane)
        name = pane.path.name if pane.path else "the exercise"

        def answer(yes: bool | None) -> None:
            if yes:
                pane.discard()
                then()

        self.push_screen(
            ConfirmScreen(
                f"**Your edit to {name} is not saved**: {reason}.\n\n"
                f"{go} anyway, and lose the edit?",
                yes=f"{go}, losing it",
                no="Stay",
                title="Unsaved edit",
            ),
            answer,
        )

    def on_option_list_option_selected(self, event: Any) -> None:
        if event.option_list.id != "lessons":
            return  # another list (the command palette's) bubbling up
        lesson = self.query_one(LessonList).choose(event.option.id or "")
        if lesson is not None:
            self._sidebar_choice = None  # shown with b to pick one: it steps aside again
            self.open_lesson(lesson)
            self.action_show_pane("lesson")

    def action_open_lesson(self, key: str) -> None:
        lesson = self.course.find(key)
        if lesson is None:
            self.notify(f"no lesson {key!r}", severity="error")
            return
        self.open_lesson(lesson)
        self.action_show_pane("lesson")

    def action_next_lesson(self) -> None:
        """n: the next exercise: the lesson's next step, or the next lesson."""
        nxt = self.course.next_exercise(self.lesson) if self.lesson is not None else None
        if nxt is None:
            self.notify("This is the last lesson.", timeout=3)
            return
        self.action_open_lesson(nxt.exercise)

    def advance_after_pass(self, lesson: Lesson) -> str:
        """A step has passed: open the lesson's next step (the learner can
        still open any other). Returns what to tell them, "" when staying."""
        nxt = self.course.next_exercise(lesson)
        if not lesson.is_step or nxt is None or nxt.index != lesson.index:
            return ""
        if self.lesson is None or self.lesson.exercise != lesson.exercise:
            return ""  # they have moved on meanwhile: leave them where they are
        if self.query_one(ExercisePane).unsaved_reason():
            return f"Next: {nxt.step_label}, {nxt.exercise_title} (n)."
        # The passing results stay on screen: they were the point of the check.
        self.open_lesson(nxt, keep_results=True)
        return f"On to {nxt.step_label}: {nxt.exercise_title}."

    # --- VIEW and EDIT modes of the Exercise pane ---------------------------------------
    def action_edit(self) -> None:
        """e: the Exercise pane in EDIT mode (it opens in VIEW mode otherwise)."""
        self.action_show_pane("exercise")
        self.query_one(ExercisePane).start_editing()

    def editor_mode(self) -> str | None:
        """ "edit" or "view" while the Exercise pane is shown (the footer says
        which), else None."""
        # Not App.is_mounted: on the app that is a method (is a widget mounted?),
        # always true as a condition. The layout being there is what matters.
        if self._main_screen() is None or self.active_pane != "exercise":
            return None
        return "edit" if self.query_one(ExercisePane).editing else "view"

    # --- checking -------------------------------------------------------------------
    def _gradable(self) -> Lesson | None:
        lesson = self.lesson
        if lesson is None:
            self.notify("Pick a lesson first.", severity="warning")
        elif lesson.error:
            self.notify(f"Lesson {lesson.number} is broken: {lesson.error}", severity="error")
        elif not lesson.ready:
            self.notify(f"Lesson {lesson.number}'s exercise is coming soon.", timeout=3)
        elif missing := lesson.missing_requirements():
            from gpulab.course.install_hint import missing_message  # `gpulab check` says the same

            # markup off: "gpulab[jax]" is not a style tag
            self.notify(
                missing_message(lesson.exercise, missing),
                title="Missing package",
                severity="error",
                timeout=10,
                markup=False,
            )
        else:
            return lesson
        return None

    def action_check_explain(self) -> None:
        """X: a check, then what limits the kernel (`gpulab check --explain`):
        on a CPU too, from the compiled kernel and the datasheet GPU."""
        self.action_check(explain=True)

    def action_check(self, from_watch: bool = False, explain: bool = False) -> None:
        lesson = self._gradable()
        if lesson is None:
            return
        pane = self.query_one(ExercisePane)
        # Save first: the check grades the file on disk. In watch mode the
        # disk already holds what the learner's own editor wrote.
        if not from_watch and (reason := pane.unsaved_reason()):
            self.notify(
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
                path = self.workspace.ensure_exercise(lesson)
            except OSError as exc:
                self.notify(
                    f"cannot create your copy of {lesson.exercise}: {exc}", severity="error"
                )
                return
        # A watch-mode check of the learner's typing here leaves them typing:
        # its verdict comes as a toast, and the Results pane has the rest.
        if not (from_watch and self.editor_mode() == "edit"):
            self.action_show_pane("results")
        self.start_check(lesson, path, explain=explain)

    def action_cancel_check(self) -> None:
        """x: stop the running check, and the microbenchmarks if they run."""
        self.workers.cancel_group(self, "check")
        self.workers.cancel_group(self._pane("device"), "probe")

    def action_save(self) -> None:
        self.query_one(ExercisePane).save(explicit=True)

    def action_toggle_watch(self) -> None:
        if self._gradable() is None:
            return
        self.watch_mode = not self.watch_mode
        self.remember(self.workspace.set_setting, "watch", self.watch_mode)
        if self.watch_mode:
            name = self.query_one(ExercisePane).path
            self.notify(
                f"Every save of {name} re-runs the check: here (ctrl+s, or the "
                "autosave a second after you stop typing) or in your own editor. w stops.",
                title="Watch mode on",
                timeout=5,
            )
        else:
            self.notify("Watch mode off.", timeout=2)

    def on_exercise_changed_on_disk(self, message: ExerciseChangedOnDisk) -> None:
        if self._main_screen() is None:
            return  # the watcher's message arrived as the app closed
        pane = self.query_one(ExercisePane)
        if message.path != pane.path or pane.is_own_version():
            return  # an old lesson's file, or the lab's own write
        pane.disk_changed()
        if self.watch_mode:
            # A check already running on the old text is replaced (exclusive worker).
            self.action_check(from_watch=True)

    @on(ExerciseSaved)
    def _saved(self, event: ExerciseSaved) -> None:
        """Watch mode re-checks on every save of the in-lab editor, ctrl+s
        and the autosave alike, as on every save of another editor (the file
        watcher ignores the lab's own writes). It never did: only ctrl+s was
        meant to, and after the autosave ctrl+s found nothing to save."""
        if self.watch_mode:
            self.action_check(from_watch=True)
        elif not event.changed:
            self.notify(f"{event.path.name}: nothing to save", timeout=2)

    # --- hints, reset, solution ------------------------------------------------------
    def action_hint(self) -> None:
        lesson = self._gradable()
        if lesson is None:
            return
        before = self.workspace.hint_level(lesson.exercise)
        level = self.remember(self.workspace.reveal_hint, lesson)
        if level is None:  # not saved: shown for this session all the same
            level = min(before + 1, len(lesson.hints))
        if level == before:
            from gpulab.wire.status import Status

            passed = self.workspace.status(lesson.exercise) == Status.PASSED
            self.notify(
                "All three hints are showing. "
                + (
                    "You have passed: s shows the reference solution."
                    if passed
                    else "The solution unlocks once you pass."
                ),
                timeout=4,
            )
        pane = self._pane("lesson")
        pane.set_lesson(lesson, level)
        self.action_show_pane("lesson")
        pane.show_hints()

    def action_reset(self) -> None:
        lesson = self._gradable()
        if lesson is None:
            return
        pane = self.query_one(ExercisePane)
        if reason := pane.unsaved_reason():
            self.notify(
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
                self.notify("Reset cancelled; your file is untouched.", timeout=2)
                return
            try:
                backup = self.workspace.reset(lesson)
            except OSError as exc:
                self.notify(f"reset failed: {exc}", severity="error")
                return
            pane.set_lesson(lesson, pane.path)
            kept = f" Your file was saved as {backup}." if backup else ""
            self.notify(
                f"{lesson.exercise} is back to the starter.{kept}", title="Reset", timeout=8
            )

        self.push_screen(
            ConfirmScreen(
                f"Reset **{lesson.exercise}** to the starter?\n\nYour current file is copied to "
                f"`{self.workspace.backups_dir}` first, so nothing is lost.",
                yes="Reset",
                no="Cancel",
                title="Reset the exercise",
            ),
            answer,
        )

    def action_solution(self) -> None:
        lesson = self._gradable()
        if lesson is None:
            return
        text = self.workspace.solution_text(lesson)
        if text is None:
            self.notify(
                "The reference solution unlocks once your exercise passes. "
                "Hints (h) help meanwhile.",
                title="Locked",
                timeout=4,
            )
            return
        self.push_screen(
            SolutionScreen(lesson.reference_path.name, text, language=editor_language(self.syntax))
        )

    # --- help and welcome ----------------------------------------------------------------
    def action_help(self) -> None:
        topic = "keys"
        node = self.focused
        while node is not None:
            if getattr(node, "HELP_TOPIC", None):
                topic = node.HELP_TOPIC  # type: ignore[attr-defined]
                break
            node = node.parent  # type: ignore[assignment]
        else:
            pane = self._pane(self.active_pane)
            topic = getattr(pane, "HELP_TOPIC", topic)
        self.push_screen(HelpScreen(topic))

    def action_welcome(self) -> None:
        from gpulab.gpu import hardware

        first = self.first_ready()
        if first is None:
            label, text = "Read lesson 01", "with lesson 01: no exercise is gradable yet."
        elif first.index == 0:
            label, text = (
                f"Start lesson {first.number}",
                (f"with lesson {first.number}, *{first.title}*."),
            )
        else:
            label, text = (
                f"Start lesson {first.number}",
                (
                    f"with lesson {first.number}, *{first.title}* (the ones before it are "
                    "not gradable yet)."
                ),
            )
        screen = WelcomeScreen(
            first=self.workspace.created,
            workspace=str(self.workspace.root),
            start_label=label,
            start_text=text,
            datasheet_gpu=hardware.GPUS[hardware.DEFAULT_GPU].name,
            info=self.gpu_info,
        )

        def answer(start: bool | None) -> None:
            if start and first is not None:
                self.open_lesson(first)
                self.action_show_pane("lesson")

        self.push_screen(screen, answer)
        self.want_gpu_info()

    # --- probe and roofline (the Device and Roofline panes do the work) ---------------
    def action_probe(self) -> None:
        self.action_show_pane("device")
        self._pane("device").run_probe()

    def action_choose_roofline_gpu(self) -> None:
        self.action_show_pane("roofline")
        self._pane("roofline").choose_gpu()

    def action_export_roofline(self) -> None:
        self.action_show_pane("roofline")
        self._pane("roofline").export_svg()
