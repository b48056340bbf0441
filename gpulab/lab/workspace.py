"""The learner's workspace: their copies of the exercises, progress and backups.

Layout under the workspace root ($GPULAB_HOME, else ~/gpulab):

    exercises/<exercise>.py      the learner's copy (never the pristine starter)
    .gpulab/state.json           progress, attempts, settings (atomic JSON)
    .gpulab/state.last-good.json the state before the last write, to recover from
    .gpulab/state.lock           serialises writers across gpulab processes
    .gpulab/backups/             the learner's file before each reset
    .gpulab/results/             the full result of the last check per exercise

State is always read-modify-written under the lock and written atomically.
Every read checks the whole state against its schema (gpulab.lab.state). A file
that cannot be parsed, or has fields of the wrong shape, is repaired under the
lock with a warning naming what changed, and the file as it was is kept beside
it under a name of its own (never deleted, never overwritten). A file that
cannot be parsed at all (truncated, overwritten) is replaced by the last good
copy, which every write refreshes first: at most the last change is lost.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulab.course.content import Lesson
from gpulab.fsutil import (
    atomic_write_json,
    atomic_write_text,
    default_root,
    file_lock,
    is_within,
    write_problem,
)
from gpulab.lab.state import (
    STATE_VERSION,
    Attempt,
    ExerciseEntry,
    State,
    clean_attempt,
    empty_state,
    validate_state,
)
from gpulab.textsafe import visible, visible_tree
from gpulab.wire.result import CheckResult
from gpulab.wire.status import RECORDED, Status

__all__ = [
    "STATE_VERSION",
    "Workspace",
    "WorkspaceError",
    "default_root",
]

MAX_ATTEMPTS_KEPT = 100
# A backup's name after "<exercise>-": reset's time stamp (and a counter).
_BACKUP = re.compile(r"\d{8}-\d{6}(-\d+)?\.py")
# Warnings listed one by one for a repaired state; the rest are counted.
MAX_PROBLEMS_SHOWN = 10


class WorkspaceError(ValueError):
    """A workspace path is unusable (e.g. it would lead outside the workspace)."""


def _refuse_if_not_own(folder: Path) -> None:
    """WorkspaceError unless `folder` is this user's and others cannot write it.

    $GPULAB_HOME in a shared scratch folder: another user who made the folder
    first owns it, and could replace any file in it. Resetting an exercise
    there left the learner's copy 0666 (the mode of the file it replaced, one
    of theirs), for them to read and edit; progress was theirs to rewrite."""
    if not hasattr(os, "getuid"):  # pragma: no cover - Windows: no owners to compare
        return
    try:
        st = os.lstat(folder)
    except OSError as exc:
        raise WorkspaceError(f"{folder} cannot be used: {exc.strerror or exc}") from None
    if st.st_uid != os.getuid() or st.st_mode & 0o002:
        whose = _user_name(st.st_uid)
        raise WorkspaceError(
            f"{folder} belongs to {whose}"
            + (" and any user may write in it" if st.st_mode & 0o002 else "")
            + ": gpulab keeps your work only in a folder of your own that others cannot "
            "write. Set $GPULAB_HOME to a new path (or remove that folder)."
        )


def _user_name(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


@dataclass
class Workspace:
    root: Path
    created: bool = False
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, root: Path | str | None = None) -> Workspace:
        root = Path(root).expanduser().resolve() if root else default_root()
        created = not (root / ".gpulab").is_dir()
        # Solutions, progress and traces are the learner's alone. With the
        # usual umask (022) and a home others may enter (0755 is common) a
        # workspace made 0755 let every user of a shared box read its traces
        # and list its files. A new one is for its owner only; one that
        # exists keeps the mode its owner gave it.
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        _refuse_if_not_own(root)
        (root / ".gpulab").mkdir(mode=0o700, exist_ok=True)
        _refuse_if_not_own(root / ".gpulab")
        # gpulab's own folder (progress, results, backups, caches): its
        # owner's alone, one an older gpulab made 0755 too.
        with contextlib.suppress(OSError):
            (root / ".gpulab").chmod(0o700)
        (root / ".gpulab" / "backups").mkdir(parents=True, exist_ok=True)
        (root / "exercises").mkdir(parents=True, exist_ok=True)
        ws = cls(root=root, created=created)
        ws.load_state()  # surfaces a corrupt state file as a warning right away
        return ws

    # --- paths ---------------------------------------------------------------
    @property
    def state_dir(self) -> Path:
        return self.root / ".gpulab"

    @property
    def state_path(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def last_good_path(self) -> Path:
        return self.state_dir / "state.last-good.json"

    @property
    def backups_dir(self) -> Path:
        return self.state_dir / "backups"

    def exercise_path(self, lesson: Lesson) -> Path:
        path = self.root / "exercises" / f"{lesson.exercise}.py"
        # Exercise ids are validated as identifiers, so this holds; keep the
        # guard so a future change cannot make a manifest write outside.
        if not is_within(path, self.root):
            raise WorkspaceError(
                f"{path} leads outside the workspace {self.root} (a symbolic link?); "
                "gpulab only reads and writes exercise files inside the workspace"
            )
        return path

    def ensure_exercise(self, lesson: Lesson) -> Path:
        """The learner's copy, made from the starter the first time."""
        path = self.exercise_path(lesson)
        if not path.exists() and lesson.starter_path.is_file():
            atomic_write_text(path, lesson.starter_path.read_text(encoding="utf-8"))
        return path

    def unwritable(self) -> str | None:
        """What stops gpulab saving here (the exercise copies, then progress),
        in words that name the folder; None when both can be written."""
        for folder in (self.root / "exercises", self.state_dir):
            why = write_problem(folder)
            if why:
                return f"the folder {folder} cannot be written to ({why})"
        return None

    # --- state ---------------------------------------------------------------
    @property
    def lock_path(self) -> Path:
        return self.state_dir / "state.lock"

    def load_state(self) -> State:
        """The state, checked whole; repaired on disk (under the lock) if it must be."""
        return self._load(locked=False)

    def _load(self, *, locked: bool) -> State:
        try:
            data = self.state_path.read_bytes()
        except FileNotFoundError:
            return empty_state()
        try:
            checked = validate_state(json.loads(data.decode("utf-8")))
            why = checked.problems[0] if checked.unusable else ""
        except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, nested too deep
            checked, why = validate_state(None), f"{type(exc).__name__}: {exc}"
        if not checked.problems:
            return checked.state
        if not locked:
            # Repair under the lock, from the file as it is then: another
            # process may have repaired (or rewritten) it meanwhile.
            with file_lock(self.lock_path):
                return self._load(locked=True)
        return self._repair(data, checked.state, checked.problems if not why else [], why)

    def _repair(self, data: bytes, state: State, problems: list[str], why: str) -> State:
        """Keep `data` (the file as read) aside, write `state` in its place, say so.

        `why` set: nothing could be kept; otherwise `problems` lists what changed."""
        restored = self._last_good() if why else None
        if restored is not None:
            state = restored
        self._rebuild_from_results(state)
        try:
            aside = self._set_aside(data, "corrupt" if why else "before-repair")
            atomic_write_json(self.state_path, state)
            kept = f"kept the file as it was as {aside.name}"
        except OSError as exc:
            kept = f"could not save the repair ({exc.strerror or exc}); using it for this run"
        if why and restored is not None:
            self.warnings.append(
                f"{self.state_path} was unreadable ({visible(why)}); {kept} and restored the "
                f"last good copy ({self.last_good_path.name}): at most the last change to your "
                "progress is lost. Your exercise files are untouched."
            )
            return state
        if why:
            self.warnings.append(
                f"{self.state_path} was unreadable ({visible(why)}); {kept} and started a fresh "
                "progress file, rebuilt from your last results. Your exercise files are "
                "untouched."
            )
            return state
        listed = "; ".join(problems[:MAX_PROBLEMS_SHOWN])
        more = len(problems) - MAX_PROBLEMS_SHOWN
        self.warnings.append(
            f"{self.state_path} had {len(problems)} field(s) of the wrong shape, repaired: "
            f"{listed}" + (f"; and {more} more" if more > 0 else "") + f". The rest is "
            f"unchanged; {kept}."
        )
        return state

    def _set_aside(self, data: bytes, label: str) -> Path:
        """Write `data` to a new file beside state.json; its name is never reused.

        O_EXCL makes the name unique even when two processes (or two repairs in
        the same second) pick the same time stamp: the later one takes -2, -3..."""
        stem = f"state.json.{label}-{time.strftime('%Y%m%d-%H%M%S')}"
        for n in range(1, 10_000):
            aside = self.state_dir / (stem if n == 1 else f"{stem}-{n}")
            try:
                fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            return aside
        raise OSError(f"no free name for {stem}")

    def _last_good(self) -> State | None:
        """The last good copy, checked as state.json is; None if there is none usable."""
        try:
            raw = json.loads(self.last_good_path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        checked = validate_state(raw)
        return None if checked.unusable else checked.state

    def _rebuild_from_results(self, state: State) -> None:
        """Exercises the state lost but whose last result is on disk: passed or failed."""
        results = self.state_dir / "results"
        for f in sorted(results.glob("*.json")) if results.is_dir() else []:
            if f.stem in state["exercises"]:
                continue
            try:
                r = json.loads(f.read_text(encoding="utf-8"))
            except (ValueError, OSError, RecursionError):
                continue
            if isinstance(r, dict):
                passed = CheckResult.from_json(r).passed
                state["exercises"][f.stem] = {"status": Status.PASSED if passed else Status.FAILED}

    def update(self, change: Callable[[State], None]) -> State:
        """Read, change and write the state under the workspace lock."""
        with file_lock(self.lock_path):
            state = self._load(locked=True)
            # The state as read (checked, or repaired) is good: kept first, so a
            # state.json damaged later loses at most this change. A few KB.
            atomic_write_json(self.last_good_path, state)
            change(state)
            atomic_write_json(self.state_path, state)
            return state

    def exercise_state(self, exercise: str) -> ExerciseEntry:
        """The exercise's progress; empty when it has none (the state is
        checked as it is read, so an entry is always an ExerciseEntry)."""
        return self.load_state()["exercises"].get(exercise) or {}

    def status(self, exercise: str) -> Status:
        """PASSED or FAILED as its checks left it, else NOT_STARTED
        (gpulab.lab.state's schema checks the word as the state is read)."""
        status = self.exercise_state(exercise).get("status")
        return Status(status) if status in RECORDED else Status.NOT_STARTED

    # --- results -------------------------------------------------------------
    def record_result(self, exercise: str, result: CheckResult) -> None:
        """Keep the full last result and a short line per attempt."""
        atomic_write_json(self.state_dir / "results" / f"{exercise}.json", result.to_json())
        attempt: Attempt = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "passed": result.passed,
            "summary": result.summary,
            "device": result.device or "",
            # A timed check's numbers, those measured (after the rest, as always).
            **(result.timing.attempt() if result.timing is not None else {}),
        }
        # Only what the schema accepts (a nan time would be dropped, with a
        # warning, at the next read anyway).
        attempt = clean_attempt(attempt)

        def change(state: State) -> None:
            entry = state["exercises"].setdefault(exercise, {})
            entry.setdefault("attempts", []).append(attempt)
            entry["attempts"] = entry["attempts"][-MAX_ATTEMPTS_KEPT:]
            # Passing once is progress that a later failed attempt doesn't erase.
            if result.passed:
                entry["status"] = Status.PASSED
                if "grade" in attempt:
                    entry["grade"] = attempt["grade"]
            elif entry.get("status") != Status.PASSED:
                entry["status"] = Status.FAILED

        self.update(change)

    def last_result(self, exercise: str) -> CheckResult | None:
        """The last recorded result, checked field by field (the file is
        anyone's to edit) and its text made visible (gpulab.textsafe: what
        the screen shows of it is never sanitised again); None when there is
        none or it is not an object."""
        try:
            raw = json.loads((self.state_dir / "results" / f"{exercise}.json").read_text("utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        return CheckResult.from_json(visible_tree(raw)) if isinstance(raw, dict) else None

    # --- hints, settings, reset, solutions -----------------------------------
    def hint_level(self, exercise: str) -> int:
        level = self.exercise_state(exercise).get("hints", 0)
        return level if isinstance(level, int) else 0

    def reveal_hint(self, lesson: Lesson) -> int:
        """Reveal one more hint level; returns the number now revealed."""
        out = {}

        def change(state: State) -> None:
            entry = state["exercises"].setdefault(lesson.exercise, {})
            level = entry.get("hints", 0) if isinstance(entry.get("hints"), int) else 0
            entry["hints"] = out["level"] = min(level + 1, len(lesson.hints))

        self.update(change)
        return out["level"]

    def get_setting(self, key: str, default: Any = None) -> Any:
        return self.load_state().get("settings", {}).get(key, default)

    def set_setting(self, key: str, value: Any) -> None:
        self.update(lambda s: s.setdefault("settings", {}).__setitem__(key, value))

    def set_last_lesson(self, lesson_id: str) -> None:
        self.update(lambda s: s.__setitem__("last_lesson", lesson_id))

    def reset(self, lesson: Lesson) -> Path | None:
        """Back up the learner's file, then restore the starter. Returns the backup."""
        path = self.exercise_path(lesson)
        backup = self._back_up(lesson, path) if path.exists() else None
        atomic_write_text(path, lesson.starter_path.read_text(encoding="utf-8"))
        return backup

    def _back_up(self, lesson: Lesson, path: Path) -> Path:
        """A copy of `path` in the backups folder, named by the time."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        backup = self.backups_dir / f"{lesson.exercise}-{stamp}.py"
        n = 1
        while backup.exists():
            backup = self.backups_dir / f"{lesson.exercise}-{stamp}-{n}.py"
            n += 1
        shutil.copy2(path, backup)
        return backup

    def backups(self, lesson: Lesson) -> list[Path]:
        """The files `reset` backed up for this exercise, newest first."""
        found = self.backups_dir.glob(f"{lesson.exercise}-*.py")
        mine = [p for p in found if _BACKUP.fullmatch(p.name[len(lesson.exercise) + 1 :])]
        return sorted(mine, key=lambda p: (p.stat().st_mtime, p.name), reverse=True)

    def restore(self, lesson: Lesson, backup: Path) -> Path | None:
        """Put a backup back as the exercise's file; the file it replaces is
        backed up first (as `reset` does). Returns that new backup."""
        text = backup.read_text(encoding="utf-8")
        path = self.exercise_path(lesson)
        kept = None
        if path.exists() and path.read_text(encoding="utf-8", errors="replace") != text:
            kept = self._back_up(lesson, path)
        atomic_write_text(path, text)
        return kept

    def solution_text(self, lesson: Lesson) -> str | None:
        """The reference solution, only once the learner has passed the exercise."""
        if self.status(lesson.exercise) != Status.PASSED:
            return None
        try:
            return lesson.reference_path.read_text(encoding="utf-8")
        except OSError:
            return None
