"""Importing and calling the learner's code, with errors a learner can act on.

Tracebacks are trimmed to the learner's own frames: a learner needs the line
in their file, not thirty lines of torch and gpulab internals.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import io
import sys
import tokenize
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from gpulab.fsutil import unreadable_file


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


def _line_col(data: bytes | str, index: int) -> tuple[int, int]:
    """1-based line and column of position `index` in `data`."""
    newline = b"\n" if isinstance(data, bytes) else "\n"
    line_start = data.rfind(newline, 0, index) + 1
    return data.count(newline, 0, index) + 1, index - line_start + 1


def _read_source(file: Path) -> str:
    """The file's text, decoded as Python decodes a module (PEP 263, PEP 3120).

    A UTF-8 byte-order mark or a `# coding:` line in the first two lines names
    the encoding; UTF-8 otherwise. Bytes that don't decode, and NUL bytes
    (which Python refuses without a line), are reported at their line:column.
    """
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise LearnerError(f"{file} cannot be read: {exc.strerror or exc}") from None
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError as exc:
        if "invalid or missing encoding declaration" not in str(exc):
            # "unknown encoding: foo", a BOM beside a non-UTF-8 coding line...
            raise LearnerError(f"SyntaxError at {file}:1: {exc.msg}",
                               "A `# coding:` line must name an encoding Python knows, "
                               "and agree with a byte-order mark if the file has one.") from None
        encoding = "utf-8"  # undecodable bytes in line 1 or 2: found and placed below
    try:
        # What importlib.util.decode_source does, with the encoding found above
        # (it would re-detect, and fail on line 1 without saying where).
        text = io.IncrementalNewlineDecoder(None, True).decode(data.decode(encoding), final=True)
    except UnicodeDecodeError as exc:
        line, col = _line_col(data, exc.start)
        raise LearnerError(
            f"SyntaxError at {file}:{line}:{col}: byte 0x{data[exc.start]:02x} is not valid "
            f"{encoding} text",
            "Save the file as UTF-8, or declare its encoding in a first-line comment "
            "such as `# coding: latin-1`.") from None
    nul = text.find("\0")
    if nul >= 0:
        line, col = _line_col(text, nul)
        raise LearnerError(f"SyntaxError at {file}:{line}:{col}: the file contains a NUL byte",
                           "A NUL (zero) byte is not allowed in Python source; delete it "
                           "(it often comes from a binary file pasted or saved by mistake).")
    return text


def load_module(path: str, name: str = "learner_solution") -> ModuleType:
    """Import the file at `path` as a fresh module. Raises LearnerError."""
    file = Path(path)
    problem = unreadable_file(file)
    if problem:
        raise LearnerError(problem)
    source = _read_source(file)
    try:
        compile(source, str(file), "exec")
    except SyntaxError as exc:
        where = str(file) + "".join(f":{n}" for n in (exc.lineno, exc.offset) if n)
        detail = "".join(traceback.format_exception_only(type(exc), exc)).rstrip()
        raise LearnerError(f"SyntaxError at {where}: {exc.msg}", detail) from None
    except ValueError as exc:  # defensive: a source compile() refuses without a position
        raise LearnerError(f"SyntaxError in {file}: {exc}") from None
    # The loader named outright: a submission saved as .txt (or no suffix)
    # finds no loader by its name, and would import as nothing.
    loader = importlib.machinery.SourceFileLoader(name, str(file))
    spec = importlib.util.spec_from_file_location(name, file, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        loader.exec_module(module)
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
