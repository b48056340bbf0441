"""The Exercise pane: the learner's copy of the exercise in a code editor.

Saving rules, in order of importance:
1. Never overwrite another editor's save silently. The pane remembers the
   version of the file its buffer started from (`_known`, a stat stamp, and
   `_baseline`, the text). Before every write it checks the disk still holds
   that version; if not, it asks.
2. Autosave about a second after typing stops, so a check or a crash never
   loses work; ctrl+s saves at once.
3. Another editor's save reloads a clean buffer, and asks about a dirty one.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Static, TextArea

from gpulab.content import Lesson
from gpulab.fsutil import atomic_write_text
from gpulab.tui.watcher import Stamp, stamp

AUTOSAVE_DELAY = 1.0


def syntax_available() -> bool:
    """Python highlighting needs tree-sitter (textual[syntax]); plain text without it."""
    return all(importlib.util.find_spec(m) for m in ("tree_sitter", "tree_sitter_python"))


class CodeEditor(TextArea):
    """A TextArea with the lab's keys. Tab indents; escape leaves the editor."""

    BINDINGS = [
        Binding("ctrl+s", "save", "Save", id="editor.save", tooltip="Save the file now"),
        Binding("escape", "leave", "Leave editor", id="editor.leave",
                tooltip="Move focus to the tabs, so single-key commands work again"),
    ]

    def action_save(self) -> None:
        self.query_ancestor(ExercisePane).save(explicit=True)

    def action_leave(self) -> None:
        self.app.action_focus_tabs()


class ExercisePane(Vertical):
    """Editor for the current lesson's exercise file, loaded when first shown."""

    HELP_TOPIC = "exercise"

    class Saved(Message):
        """The pane wrote the exercise file."""

        def __init__(self, path: Path, explicit: bool) -> None:
            super().__init__()
            self.path = path
            self.explicit = explicit

    def __init__(self, *, syntax: bool = True, id: str | None = None) -> None:
        super().__init__(id=id)
        self._syntax = syntax
        self.lesson: Lesson | None = None
        self.path: Path | None = None
        self._baseline: str | None = None  # the text the buffer started from
        self._known: Stamp | None = None  # the disk version that text came from
        self._loaded = False  # the buffer holds this lesson's file
        self._timer: Timer | None = None
        self._asking = False  # a conflict question is on screen

    def compose(self) -> ComposeResult:
        yield Static("", id="editor-status")
        language = "python" if self._syntax and syntax_available() else None
        yield CodeEditor.code_editor("", language=language, theme="css", id="editor",
                                     soft_wrap=False)

    @property
    def editor(self) -> CodeEditor:
        return self.query_one(CodeEditor)

    # --- lesson switching and loading ----------------------------------------
    def set_lesson(self, lesson: Lesson | None, path: Path | None) -> None:
        """Point the pane at a lesson's file; the buffer loads when it is shown."""
        self._stop_timer()
        self.lesson, self.path, self._loaded = lesson, path, False
        self._baseline, self._known = self._read_disk()
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
        if self.path is None or self._baseline is None:
            ed.read_only = True
            ed.load_text(self._placeholder())
        else:
            ed.read_only = False
            ed.load_text(self._baseline)
        self._update_status()

    def _placeholder(self) -> str:
        if self.lesson is None:
            return "# Pick a lesson in the sidebar."
        if self.lesson.error:
            return f"# This lesson is broken:\n# {self.lesson.error}"
        if not self.lesson.ready:
            return (f"# Lesson {self.lesson.number}'s exercise ({self.lesson.exercise}) is "
                    "coming soon.\n# Read the lesson text meanwhile.")
        return f"# Could not read {self.path}."

    def _read_disk(self) -> tuple[str | None, Stamp | None]:
        if self.path is None:
            return None, None
        try:
            return self.path.read_text(encoding="utf-8"), stamp(self.path)
        except (OSError, UnicodeDecodeError):
            return None, None

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
                shown = self.path.relative_to(self.app.workspace.root)  # type: ignore[attr-defined]
            except (ValueError, AttributeError):
                shown = self.path
            state = "[b]● modified[/]" if self.dirty else "saved"
            text = f"{shown} · {state}"
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
                self.app.notify(f"{self.path.name}: nothing to save", timeout=2)
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
            self.app.notify(f"could not save {self.path}: {exc}", severity="error")
            return False
        self._baseline, self._known = text, stamp(self.path)
        self._update_status()
        self.post_message(self.Saved(self.path, explicit))
        return True

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
        from gpulab.tui.screens import ConfirmScreen

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
                yes="Reload from disk", no="Keep mine", title="File changed on disk",
            ),
            answer,
        )
