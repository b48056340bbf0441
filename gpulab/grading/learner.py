"""Importing and calling the learner's code, with errors a learner can act on.

Tracebacks are trimmed to the learner's own frames: a learner needs the line
in their file, not thirty lines of torch and gpulab internals.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any


class LearnerError(Exception):
    """The learner's code failed; `summary` is one line, `message` the details."""

    def __init__(self, summary: str, message: str = "") -> None:
        super().__init__(summary)
        self.summary = summary
        self.message = message


def format_learner_traceback(exc: BaseException, learner_file: str) -> str:
    """The traceback of `exc`, keeping only frames from the learner's file."""
    learner_file = str(Path(learner_file).resolve())
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__)
        if str(Path(f.filename).resolve()) == learner_file
    ]
    lines = []
    if frames:
        lines.append("Traceback (your code only):")
        lines.extend(traceback.format_list(frames))
    text = "".join(lines) + "".join(traceback.format_exception_only(type(exc), exc))
    return text.rstrip()


def load_module(path: str, name: str = "learner_solution") -> ModuleType:
    """Import the file at `path` as a fresh module. Raises LearnerError."""
    file = Path(path)
    if not file.is_file():
        raise LearnerError(f"{file} does not exist")
    try:
        source = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LearnerError(f"{file} cannot be read: {exc}") from None
    try:
        compile(source, str(file), "exec")
    except SyntaxError as exc:
        where = f"{file}:{exc.lineno}" + (f":{exc.offset}" if exc.offset else "")
        detail = "".join(traceback.format_exception_only(type(exc), exc)).rstrip()
        raise LearnerError(f"SyntaxError at {where}: {exc.msg}", detail) from None
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - SystemExit from a learner too
        sys.modules.pop(name, None)
        tb = format_learner_traceback(exc, str(file))
        last = tb.splitlines()[-1] if tb else type(exc).__name__
        raise LearnerError(f"importing {file.name} failed: {last}", tb) from None
    return module


def get_function(module: ModuleType, name: str, file: str) -> Any:
    fn = getattr(module, name, None)
    if fn is None:
        raise LearnerError(f"{Path(file).name} does not define `{name}`",
                           f"The exercise asks for a function named `{name}`.")
    if not callable(fn):
        raise LearnerError(f"`{name}` in {Path(file).name} is not a function")
    return fn


def _sync_cuda() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def call(fn: Any, file: str, *args: Any, **kwargs: Any) -> Any:
    """Call the learner's function; any exception becomes a LearnerError."""
    try:
        out = fn(*args, **kwargs)
        _sync_cuda()  # an asynchronous CUDA fault surfaces here, as the learner's
        return out
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        tb = format_learner_traceback(exc, file)
        last = tb.splitlines()[-1] if tb else type(exc).__name__
        low = str(exc).lower()
        if "out of memory" in low:
            raise LearnerError(f"CUDA out of memory: {last}", tb) from None
        if "illegal memory access" in low or "misaligned address" in low:
            raise LearnerError(
                "CUDA illegal memory access (an out-of-bounds load or store; check your masks)",
                tb) from None
        raise LearnerError(f"your code raised {last}", tb) from None
