"""The learner's workspace: their copies of the exercises, progress and backups.

Layout under the workspace root ($GPULAB_HOME, else ~/gpulab):

    exercises/<exercise>.py      the learner's copy (never the pristine starter)
    .gpulab/state.json           progress, attempts, settings (atomic JSON)
    .gpulab/state.lock           serialises writers across gpulab processes
    .gpulab/backups/             the learner's file before each reset
    .gpulab/results/             the full result of the last check per exercise

State is always read-modify-written under the lock and written atomically. A
state file that cannot be parsed is moved aside (never deleted) and rebuilt,
with a warning for the learner.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulab.content import Lesson
from gpulab.fsutil import atomic_write_json, atomic_write_text, file_lock, is_within

STATE_VERSION = 1
MAX_ATTEMPTS_KEPT = 100

NOT_STARTED = "not started"
FAILED = "failed"
PASSED = "passed"


class WorkspaceError(ValueError):
    """A workspace path is unusable (e.g. it would lead outside the workspace)."""


def default_root() -> Path:
    env = os.environ.get("GPULAB_HOME")
    if env:
        return Path(env).expanduser().resolve()
    return (Path.home() / "gpulab").resolve()


def _empty_state() -> dict[str, Any]:
    return {"version": STATE_VERSION, "exercises": {}, "settings": {}, "last_lesson": None}


@dataclass
class Workspace:
    root: Path
    created: bool = False
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, root: Path | str | None = None) -> Workspace:
        root = Path(root).expanduser().resolve() if root else default_root()
        created = not (root / ".gpulab").is_dir()
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
    def backups_dir(self) -> Path:
        return self.state_dir / "backups"

    def exercise_path(self, lesson: Lesson) -> Path:
        path = self.root / "exercises" / f"{lesson.exercise}.py"
        # Exercise ids are validated as identifiers, so this holds; keep the
        # guard so a future change cannot make a manifest write outside.
        if not is_within(path, self.root):
            raise WorkspaceError(
                f"{path} leads outside the workspace {self.root} (a symbolic link?); "
                "gpulab only reads and writes exercise files inside the workspace")
        return path

    def ensure_exercise(self, lesson: Lesson) -> Path:
        """The learner's copy, made from the starter the first time."""
        path = self.exercise_path(lesson)
        if not path.exists() and lesson.starter_path.is_file():
            atomic_write_text(path, lesson.starter_path.read_text(encoding="utf-8"))
        return path

    # --- state ---------------------------------------------------------------
    def load_state(self) -> dict[str, Any]:
        try:
            text = self.state_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return _empty_state()
        try:
            state = json.loads(text)
            if not isinstance(state, dict) or not isinstance(state.get("exercises", {}), dict):
                raise ValueError("top level must be an object with an 'exercises' object")
        except ValueError as exc:
            return self._quarantine(exc)
        base = _empty_state()
        base.update(state)
        return base

    def _quarantine(self, exc: Exception) -> dict[str, Any]:
        aside = self.state_path.with_name(f"state.json.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            os.replace(self.state_path, aside)
        except OSError:
            aside = self.state_path
        self.warnings.append(
            f"{self.state_path} was unreadable ({exc}); kept it as {aside.name} and started "
            "a fresh progress file. Your exercise files are untouched."
        )
        state = _empty_state()
        # Rebuild what can be rebuilt: last results on disk say what passed.
        results = self.state_dir / "results"
        for f in sorted(results.glob("*.json")) if results.is_dir() else []:
            try:
                r = json.loads(f.read_text(encoding="utf-8"))
                state["exercises"][f.stem] = {"status": PASSED if r.get("passed") else FAILED}
            except (ValueError, OSError):
                continue
        atomic_write_json(self.state_path, state)
        return state

    def update(self, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Read, change and write the state under the workspace lock."""
        with file_lock(self.state_dir / "state.lock"):
            state = self.load_state()
            change(state)
            atomic_write_json(self.state_path, state)
            return state

    def exercise_state(self, exercise: str) -> dict[str, Any]:
        entry = self.load_state()["exercises"].get(exercise)
        return entry if isinstance(entry, dict) else {}

    def status(self, exercise: str) -> str:
        return self.exercise_state(exercise).get("status", NOT_STARTED)

    # --- results -------------------------------------------------------------
    def record_result(self, exercise: str, result: dict[str, Any]) -> None:
        """Keep the full last result and a short line per attempt."""
        atomic_write_json(self.state_dir / "results" / f"{exercise}.json", result)
        attempt = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "passed": bool(result.get("passed")),
            "summary": result.get("summary", ""),
            "device": result.get("device", ""),
        }
        timing = result.get("timing") or {}
        for key in ("ms", "throughput", "unit", "roofline_fraction", "speedup", "grade"):
            if key in timing:
                attempt[key] = timing[key]

        def change(state: dict[str, Any]) -> None:
            entry = state["exercises"].setdefault(exercise, {})
            entry.setdefault("attempts", []).append(attempt)
            entry["attempts"] = entry["attempts"][-MAX_ATTEMPTS_KEPT:]
            # Passing once is progress that a later failed attempt doesn't erase.
            if result.get("passed"):
                entry["status"] = PASSED
                if "grade" in timing:
                    entry["grade"] = timing["grade"]
            elif entry.get("status") != PASSED:
                entry["status"] = FAILED

        self.update(change)

    def last_result(self, exercise: str) -> dict[str, Any] | None:
        try:
            return json.loads((self.state_dir / "results" / f"{exercise}.json").read_text("utf-8"))
        except (OSError, ValueError):
            return None

    # --- hints, settings, reset, solutions -----------------------------------
    def hint_level(self, exercise: str) -> int:
        level = self.exercise_state(exercise).get("hints", 0)
        return level if isinstance(level, int) else 0

    def reveal_hint(self, lesson: Lesson) -> int:
        """Reveal one more hint level; returns the number now revealed."""
        out = {}

        def change(state: dict[str, Any]) -> None:
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
        backup = None
        if path.exists():
            stamp = time.strftime("%Y%m%d-%H%M%S")
            backup = self.backups_dir / f"{lesson.exercise}-{stamp}.py"
            n = 1
            while backup.exists():
                backup = self.backups_dir / f"{lesson.exercise}-{stamp}-{n}.py"
                n += 1
            shutil.copy2(path, backup)
        atomic_write_text(path, lesson.starter_path.read_text(encoding="utf-8"))
        return backup

    def solution_text(self, lesson: Lesson) -> str | None:
        """The reference solution, only once the learner has passed the exercise."""
        if self.status(lesson.exercise) != PASSED:
            return None
        try:
            return lesson.reference_path.read_text(encoding="utf-8")
        except OSError:
            return None
