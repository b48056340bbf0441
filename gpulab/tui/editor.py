"""The Exercise pane: the learner's copy of the exercise in a code editor.

Saving rules, in order of importance:
1. Never overwrite another editor's save silently. The pane remembers the
   version of the file its buffer started from (`_known`, a stat stamp, and
   `_baseline`, the text). Before every write it checks the disk still holds
   that version; if not, it asks.
2. Autosave about a second after typing stops, so a check or a crash never
   loses work; ctrl+s saves at once.
3. Another editor's save reloads a clean buffer, and asks about a dirty one.

Keys never type into the file by accident: the pane opens in VIEW mode (the
editor is read-only, so c, h, 1-7 and the other single-letter keys reach the
app), and only e, Enter or a click starts EDIT mode; Esc ends it. Losing the
focus to another widget of the lab ends it too (a dialog on top does not),
so a key that returns focus here (Esc from help, b) lands in VIEW mode.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.timer import Timer
from textual.widgets import Static, TextArea

from gpulab.course.content import Lesson
from gpulab.fsutil import atomic_write_text, read_for_editor
from gpulab.lab.watcher import Stamp, stamp
from gpulab.tui.code_text import CodeTextArea
from gpulab.tui.find_bar import FindBar
from gpulab.tui.focus import focus_now
from gpulab.tui.messages import ExerciseSaved
from gpulab.tui.screens import ConfirmScreen

AUTOSAVE_DELAY = 1.0


def syntax_available() -> bool:
    """Python highlighting needs tree-sitter (textual[syntax]); plain text without it."""
    return all(importlib.util.find_spec(m) for m in ("tree_sitter", "tree_sitter_python"))


def editor_language(syntax: bool) -> str | None:
    """The TextArea language for Python code: the editor's and the solution's."""
    return "python" if syntax and syntax_available() else None


def save_error_words(path: Path, exc: OSError) -> str:
    """Why `path` could not be written, naming its folder (the file that failed
    is a temporary one beside it)."""
    return f"the folder {path.parent} cannot be written to ({exc.strerror or exc})"


class CodeEditor(CodeTextArea):
    """The code (code_text.py) with the lab's keys: read-only in VIEW mode,
    writable in EDIT mode.

    Tab indents while editing; Esc stops editing (the footer says which mode).
    """

    BINDINGS = [
        Binding("ctrl+s", "save", "Save", id="editor.save", tooltip="Save the file now"),
        Binding("ctrl+f", "find('find')", "Find", id="editor.find", tooltip="Find in the code"),
        Binding("ctrl+g", "find('line')", "Go to line", id="editor.line", tooltip="Go to a line"),
        Binding(
            "enter",
            "start_editing",
            "Edit",
            show=False,
            id="editor.edit",
            tooltip="Start editing the exercise",
        ),
        # Shown by the footer's mode label ("EDIT — Esc to stop") instead.
        Binding(
            "escape",
            "stop_editing",
            "Stop editing",
            show=False,
            id="editor.stop",
            tooltip="Back to VIEW mode, where single-letter keys are commands",
        ),
    ]

    @property
    def pane(self) -> ExercisePane:
        return self.query_ancestor(ExercisePane)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "start_editing":
            return self.read_only
        if action in ("stop_editing", "save", "find"):
            return not self.read_only  # in VIEW mode the pane's unlisted keys find
        return True

    def action_save(self) -> None:
        self.pane.save(explicit=True)

    def action_find(self, mode: str) -> None:
        self.pane.action_find(mode)

    def action_start_editing(self) -> None:
        self.pane.start_editing()

    def action_stop_editing(self) -> None:
        self.pane.stop_editing()

    async def _on_key(self, event: events.Key) -> None:
        # TextArea's code editor moves the focus on (tab_behavior "indent")
        # when Esc is pressed; here Esc means "stop editing" and nothing else.
        if event.key == "escape" and not self.read_only:
            event.stop()
            event.prevent_default()
            self.pane.stop_editing()
            return
        await super()._on_key(event)

    async def on_click(self, event: events.Click) -> None:
        if self.read_only:
            self.pane.start_editing()  # the click already placed the cursor

    def _on_blur(self, event: events.Blur) -> None:
        # After the refresh, so that the new focus is known: another widget of
        # this screen ends EDIT mode; a dialog pushed on top does not.
        self.call_after_refresh(self._left)

    def _left(self) -> None:
        focused = self.screen.focused if self.is_attached else None
        if (
            not self.read_only
            and self.is_attached
            and self.app.screen is self.screen
            and focused is not self
            # The find bar under the code is part of editing (Esc returns here).
            and not (focused is not None and self.pane.find_bar in focused.ancestors_with_self)
        ):
            self.pane.stop_editing()


class ExercisePane(Vertical):
    """Editor for the current lesson's exercise file, loaded when first shown."""

    HELP_TOPIC = "exercise"
    # They work in VIEW mode too, unlisted there: the footer at 80 columns
    # keeps its room for the commands (CodeEditor lists them while editing).
    BINDINGS = [
        Binding("ctrl+f", "find('find')", "Find", show=False),
        Binding("ctrl+g", "find('line')", "Go to line", show=False),
    ]

    def __init__(
        self, root: Path | None = None, *, syntax: bool = True, id: str | None = None
    ) -> None:
        """`root`: the workspace's folder, which the status line shows paths from."""
        super().__init__(id=id)
        self._root = root
        self._syntax = syntax
        self.lesson: Lesson | None = None
        self.path: Path | None = None
        self._baseline: str | None = None  # the text the buffer started from
        self._known: Stamp | None = None  # the disk version that text came from
        self._loaded = False  # the buffer holds this lesson's file
        self._timer: Timer | None = None
        self._asking = False  # a conflict question is on screen
        # Why the last save failed (a read-only folder...); None once one works.
        self.save_error: str | None = None
        # Why the file could not be loaded (not UTF-8, too big...); None when it was.
        self.read_error: str | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="editor-status")
        language = editor_language(self._syntax)
        # Soft wrap: starters have lines of up to ~95 columns and the editor
        # is 74 wide at 80x24; a wrapped line shows every column, a cut one hid
        # the end of the line with nothing to say so.
        editor = CodeEditor.code_editor(
            "", language=language, theme="css", id="editor", soft_wrap=True, read_only=True
        )
        yield editor
        yield FindBar(editor, on_leave=self.stop_editing, id="find-bar")

    @property
    def find_bar(self) -> FindBar:
        return self.query_one(FindBar)

    def action_find(self, mode: str) -> None:
        """ctrl+f finds text, ctrl+g goes to a line, in VIEW and EDIT mode alike."""
        self.ensure_loaded()
        self.find_bar.open(mode)

    @property
    def editor(self) -> CodeEditor:
        return self.query_one(CodeEditor)

    # --- VIEW and EDIT modes --------------------------------------------------
    @property
    def editing(self) -> bool:
        """EDIT mode: the editor takes printable keys as text."""
        return self.is_mounted and not self.editor.read_only

    @property
    def editable(self) -> bool:
        """There is a file to edit: a ready lesson whose copy could be read."""
        return self._loaded and self.path is not None and self._baseline is not None

    def start_editing(self) -> bool:
        """EDIT mode, focused; False (and a notice) when there is nothing to edit."""
        self.ensure_loaded()
        if not self.editable:
            if self.read_error and self.path is not None:
                self.app.notify(
                    f"{self.path.name} cannot be edited here: {self.read_error}.",
                    severity="warning",
                    timeout=10,
                    markup=False,
                )
            else:
                self.app.notify("There is no exercise file to edit here.", timeout=3)
            return False
        ed = self.editor
        ed.read_only = False
        focus_now(ed)  # before the keys typed right after e
        self._mode_changed()
        return True

    def stop_editing(self) -> None:
        """VIEW mode. The buffer is saved now rather than a second later."""
        if not self.is_mounted or self.editor.read_only:
            return
        self.editor.read_only = True
        if self.dirty:
            self.save()
        self._mode_changed()

    def _mode_changed(self) -> None:
        self._update_status()
        self.app.refresh_bindings()  # the footer's mode label and keys follow

    # --- lesson switching and loading ----------------------------------------
    def set_lesson(self, lesson: Lesson | None, path: Path | None) -> None:
        """Point the pane at a lesson's file; the buffer loads when it is shown."""
        self._stop_timer()
        self.lesson, self.path, self._loaded = lesson, path, False
        self._baseline, self._known = self._read_disk()
        if self.is_mounted and not self.editor.read_only:
            self.editor.read_only = True  # another lesson, or a reset: VIEW mode
            self.app.refresh_bindings()
        if self.is_visible_pane():
            self.ensure_loaded()
        else:
            self._update_status()

    def is_visible_pane(self) -> bool:
        return self.is_mounted and getattr(self.app, "active_pane", None) == "exercise"

    def ensure_loaded(self) -> None:
        if self._loaded:
            return
        ed = self.editor
        self._loaded = True
        was_editing = not ed.read_only
        ed.read_only = True  # a newly loaded file opens in VIEW mode
        ed.load_text(
            self._placeholder() if self.path is None or self._baseline is None else self._baseline
        )
        self._update_status()
        if was_editing:
            self.app.refresh_bindings()

    def _placeholder(self) -> str:
        if self.lesson is None:
            return "# Pick a lesson in the sidebar."
        if self.lesson.error:
            return f"# This lesson is broken:\n# {self.lesson.error}"
        if not self.lesson.ready:
            return (
                f"# Lesson {self.lesson.number}'s exercise ({self.lesson.exercise}) is "
                "coming soon.\n# Read the lesson text meanwhile."
            )
        why = self.read_error or "it could not be read"
        return f"# Could not open {self.path}:\n# {why}."

    def _read_disk(self) -> tuple[str | None, Stamp | None]:
        if self.path is None:
            self.read_error = None
            return None, None
        known = stamp(self.path)  # before reading: a save in between is seen later
        text, self.read_error = read_for_editor(self.path)
        return (text, known) if text is not None else (None, None)

    # --- state ----------------------------------------------------------------
    @property
    def dirty(self) -> bool:
        return self._loaded and self._baseline is not None and self.editor.text != self._baseline

    def _update_status(self) -> None:
        if not self.is_mounted:
            return
        if self.path is None:
            text = "no exercise file"
        else:
            try:
                shown = self.path.relative_to(self._root) if self._root else self.path
            except ValueError:
                shown = self.path
            state = (
                ("[b]● NOT SAVED[/]" if self.save_error else "[b]● modified[/]")
                if self.dirty
                # Not read (not UTF-8, too big): "saved" said all was well.
                else "[b]not opened[/]"
                if self._baseline is None
                else "saved"
            )
            mode = (
                "[b]EDIT[/]: Esc stops"
                if self.editing
                else "VIEW: e, Enter or a click edits"
                if self.editable
                else "VIEW"
            )
            text = f"{shown} · {state} · {mode}"
        self.query_one("#editor-status", Static).update(text)

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        event.stop()
        self._update_status()
        self._stop_timer()
        if self.dirty:
            self._timer = self.set_timer(AUTOSAVE_DELAY, self._autosave)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def _autosave(self) -> None:
        self._timer = None
        self.save(explicit=False)

    # --- saving -----------------------------------------------------------------
    def save(self, *, explicit: bool = False) -> bool:
        """Write the buffer if it changed. False when it could not (conflict, error)."""
        self._stop_timer()
        if not self.dirty or self.path is None:
            if explicit and self._loaded and self.path is not None:
                # ctrl+s after the autosave: the file is saved already, and
                # in watch mode the learner still means "check it" (the app
                # decides; it says "nothing to save" otherwise).
                self.post_message(ExerciseSaved(self.path, explicit, changed=False))
            return True
        if self._asking:
            return False
        if stamp(self.path) != self._known:
            disk, now = self._read_disk()
            if disk != self._baseline:
                self._ask_about_conflict()
                return False
            self._known = now  # touched, same text: not a conflict
        text = self.editor.text
        try:
            atomic_write_text(self.path, text)
        except OSError as exc:
            error = save_error_words(self.path, exc)
            if error != self.save_error or explicit:  # once, not at every autosave
                self.app.notify(
                    f"Could not save {self.path.name}: {error}. Your edit is kept here, "
                    "unsaved; quitting or leaving the lesson asks first.",
                    title="Not saved",
                    severity="error",
                    timeout=10,
                    markup=False,
                )
            self.save_error = error
            self._update_status()
            return False
        self.save_error = None
        self._baseline, self._known = text, stamp(self.path)
        self._update_status()
        self.post_message(ExerciseSaved(self.path, explicit))
        return True

    @property
    def asking(self) -> bool:
        """The question about a file changed on disk is open."""
        return self._asking

    def unsaved_reason(self) -> str | None:
        """Why the buffer holds an edit that is not on disk, in words; None when
        it holds none (or it can be saved now)."""
        if not self.dirty or self.save():
            return None
        if self._asking:
            return "the file changed on disk and the question about it is still open"
        return self.save_error or "it could not be saved"

    def discard(self) -> None:
        """Drop the unsaved edit (the learner said so): the buffer goes back to
        the text it started from, which ctrl+z can still undo."""
        self._stop_timer()
        if self.dirty and self._baseline is not None:
            self._reload(self._baseline, self._known)
        self.save_error = None
        self._update_status()

    # --- another editor's saves ---------------------------------------------------
    def is_own_version(self) -> bool:
        """True when the disk holds the version this pane last read or wrote."""
        return self.path is not None and stamp(self.path) == self._known

    def disk_changed(self) -> str:
        """React to a change on disk; returns "same", "reloaded" or "asking"."""
        disk, now = self._read_disk()
        if disk is None or disk == self._baseline:
            self._known = now
            return "same"
        if not self._loaded:
            self._baseline, self._known = disk, now
            return "reloaded"
        if not self.dirty:
            self._reload(disk, now)
            assert self.path is not None  # _read_disk read the file at self.path
            self.app.notify(f"{self.path.name} changed on disk: reloaded", timeout=3)
            return "reloaded"
        self._ask_about_conflict()
        return "asking"

    def _reload(self, text: str, now: Stamp | None) -> None:
        ed = self.editor
        row, col = ed.cursor_location
        self._baseline, self._known = text, now
        # An edit, not load_text: the learner can undo a reload.
        ed.replace(text, (0, 0), ed.document.end)
        last = max(0, ed.document.line_count - 1)
        ed.cursor_location = (min(row, last), col)
        self._update_status()

    def _ask_about_conflict(self) -> None:
        self._stop_timer()
        self._asking = True
        name = self.path.name if self.path else "the file"

        def answer(reload: bool | None) -> None:
            self._asking = False
            disk, now = self._read_disk()
            if reload:
                if disk is not None:
                    self._reload(disk, now)
                self.app.notify(f"reloaded {name} from disk", timeout=3)
            else:
                # The learner chose their buffer: it becomes the version to
                # keep, and the next save replaces the disk copy on purpose.
                self._baseline, self._known = (disk if disk is not None else ""), now
                self.save(explicit=True)

        self.app.push_screen(
            ConfirmScreen(
                f"**{name} changed on disk** while you had unsaved edits here.\n\n"
                "Reload it (your edits here are lost, but ctrl+z brings them back), "
                "or keep yours (they overwrite the file on disk)?",
                yes="Reload from disk",
                no="Keep mine",
                title="File changed on disk",
            ),
            answer,
        )
