"""Importing and calling the learner's code, with errors a learner can act on.

Tracebacks are trimmed to the learner's own frames: a learner needs the line
in their file, not thirty lines of torch and gpulab internals.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import io
import linecache
import re
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
    """The traceback of `exc`, keeping only frames from the learner's file.

    An error inside a Triton kernel surfaces at the launch line; the line in
    the kernel is added below it (see _kernel_frames), and the last line,
    the one a summary quotes, names the real error and that kernel line.
    """
    learner_file = str(Path(learner_file).resolve())
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if str(Path(f.filename).resolve()) == learner_file
    ]
    inner, last = _kernel_frames(exc, learner_file)
    frames += [f for f in inner if f not in frames]
    lines = []
    if frames:
        lines.append("Traceback (your code only):\n")
        lines.extend(traceback.format_list(frames))
    if last is None:
        last = "".join(traceback.format_exception_only(type(exc), exc)).rstrip()
    return scrub_internals(("".join(lines) + last).rstrip())


# `<gpulab.sandbox.guards._DispatchGuard object at 0x7f...>`, as torch's own
# errors print a mode: a name of the grader's insides and an address, neither
# of which a learner can act on.
_INTERNAL_OBJECT = re.compile(r"<gpulab\.[\w.]+ object at 0x[0-9a-fA-F]+>")


def scrub_internals(text: str) -> str:
    """`text` with the grader's own objects named as "gpulab's guard"."""
    return _INTERNAL_OBJECT.sub("gpulab's guard", text)


def _kernel_frames(
    exc: BaseException, learner_file: str
) -> tuple[list[traceback.FrameSummary], str | None]:
    """Frames inside the learner's Triton kernels, and a last line for them.

    Two shapes, both in Triton 3.x: the interpreter (CPU) raises
    InterpreterError from the kernel's own exception, whose traceback holds
    the kernel's frame; the compiler (GPU) raises CompilationError, which
    carries the kernel's source and the AST node, numbered from the `def`
    line. The CodeGenerator frames it passed through know the function
    (file and `def` line); a nested @jit helper's error is the __cause__.
    """
    frames: list[traceback.FrameSummary] = []
    cause = exc.__cause__
    if type(exc).__name__ == "InterpreterError" and cause is not None:
        frames = [
            f
            for f in traceback.extract_tb(cause.__traceback__)
            if str(Path(f.filename).resolve()) == learner_file
        ]
        last = "".join(traceback.format_exception_only(type(cause), cause)).strip()
        if frames:
            last += f" ({Path(learner_file).name} line {frames[-1].lineno}, in {frames[-1].name})"
        return frames, last
    # Triton's CompilationErrors, duck-typed (src, node): Triton has no types.
    chain: list[Any] = []
    err: Any = exc
    while err is not None and hasattr(err, "src") and hasattr(err, "node"):
        chain.append(err)  # a CompilationError, then its callees' errors
        err = err.__cause__
    if not chain:
        return [], None
    # The lines the module was imported from (load_module), else the disk's.
    source = [ln.rstrip("\r\n") for ln in linecache.getlines(learner_file)]
    for err in chain:
        lineno = getattr(err.node, "lineno", None)
        where = None
        for tb_frame, _ in traceback.walk_tb(err.__traceback__):
            fn = getattr(tb_frame.f_locals.get("self"), "jit_fn", None)
            if fn is not None and getattr(fn, "src", None) == err.src:
                where = (
                    str(getattr(fn, "file_name", "")),
                    getattr(fn, "def_file_line_number", 0),
                    getattr(fn, "__name__", "kernel"),
                )
        if where is None and err.src:  # no generator frame: find the source in the file
            first = err.src.splitlines()[0].strip()
            hits = [i + 1 for i, line in enumerate(source) if line.strip() == first]
            where = (learner_file, hits[0], first[4:].split("(")[0]) if len(hits) == 1 else None
        if where is None or lineno is None or str(Path(where[0]).resolve()) != learner_file:
            continue  # a kernel of Triton's own, or not found
        line_no = where[1] + lineno - 1
        text = source[line_no - 1] if 0 < line_no <= len(source) else ""
        frames.append(traceback.FrameSummary(learner_file, line_no, where[2], line=text.strip()))
    message = next(
        (m for e in reversed(chain) if (m := getattr(e, "error_message", None))),
        "the kernel does not compile",
    )
    # Triton stores repr(error): 'AttributeError("...")' reads better as 'AttributeError: ...'.
    plain = re.fullmatch(r"""(\w+)\((["'])(.*)\2\)""", message, re.S)
    if plain:
        message = f"{plain.group(1)}: {plain.group(3)}"
    last = f"{type(exc).__name__}: {message}"
    if frames:
        last += f" ({Path(learner_file).name} line {frames[-1].lineno}, in {frames[-1].name})"
    return frames, last


def _line_col(data: bytes | str, index: int) -> tuple[int, int]:
    """1-based line and column of position `index` in `data`."""
    if isinstance(data, bytes):
        line_start, line = data.rfind(b"\n", 0, index) + 1, data.count(b"\n", 0, index) + 1
    else:
        line_start, line = data.rfind("\n", 0, index) + 1, data.count("\n", 0, index) + 1
    return line, index - line_start + 1


def _read_source(file: Path, data: bytes | None = None) -> str:
    """The file's text (or `data`, the bytes the judge read from it), decoded
    as Python decodes a module (PEP 263, PEP 3120).

    A UTF-8 byte-order mark or a `# coding:` line in the first two lines names
    the encoding; UTF-8 otherwise. Bytes that don't decode, and NUL bytes
    (which Python refuses without a line), are reported at their line:column.
    """
    if data is None:
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise LearnerError(f"{file} cannot be read: {exc.strerror or exc}") from None
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError as exc:
        if "invalid or missing encoding declaration" not in str(exc):
            # "unknown encoding: foo", a BOM beside a non-UTF-8 coding line...
            raise LearnerError(
                f"SyntaxError at {file}:1: {exc.msg}",
                "A `# coding:` line must name an encoding Python knows, "
                "and agree with a byte-order mark if the file has one.",
            ) from None
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
            "such as `# coding: latin-1`.",
        ) from None
    nul = text.find("\0")
    if nul >= 0:
        line, col = _line_col(text, nul)
        raise LearnerError(
            f"SyntaxError at {file}:{line}:{col}: the file contains a NUL byte",
            "A NUL (zero) byte is not allowed in Python source; delete it "
            "(it often comes from a binary file pasted or saved by mistake).",
        )
    return text


class _SentSource(importlib.machinery.SourceFileLoader):
    """The learner's file as the judge read it when the check began: the
    sandbox imports these bytes under the file's name, never what is on disk
    (a sandbox started ahead of the check would see an older copy of a file
    saved by renaming a new one over it). No bytecode is read or written."""

    def __init__(self, name: str, path: str, data: bytes) -> None:
        super().__init__(name, path)
        self.data = data

    def get_data(self, path: str) -> bytes:
        if path == self.path:
            return self.data
        return super().get_data(path)

    def path_stats(self, path: str) -> Any:
        raise OSError("no bytecode for a sent source")


def load_module(path: str, name: str = "learner_solution", data: bytes | None = None) -> ModuleType:
    """Import the file at `path` as a fresh module, from `data` where the
    judge sent the file's bytes. Raises LearnerError."""
    file = Path(path)
    if data is None:
        problem = unreadable_file(file)
        if problem:
            raise LearnerError(problem)
    source = _read_source(file, data)
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
    loader: importlib.machinery.SourceFileLoader
    if data is None:
        loader = importlib.machinery.SourceFileLoader(name, str(file))
    else:
        loader = _SentSource(name, str(file), data)
        # Tracebacks and inspect.getsource (Triton's @jit reads its kernel's
        # source so) find these lines; an entry without an mtime is never
        # checked against the disk.
        linecache.cache[str(file)] = (len(source), None, source.splitlines(True), str(file))
    spec = importlib.util.spec_from_file_location(name, file, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - SystemExit from a learner too
        sys.modules.pop(name, None)
        tb, last, _ = described(exc, str(file))
        raise LearnerError(f"importing {file.name} failed: {last}", tb) from None
    return module


def described(exc: BaseException, file: str) -> tuple[str, str, str]:
    """(traceback, the line that says what went wrong, the message in lower
    case) of the learner's exception. Its __str__ and attributes are the
    learner's code: one that raises (an exception whose __str__ raises
    ValueError) escaped from here, and the check said "the sandbox failed"
    (a call) or "the sandbox could not load your file", as gpulab's error
    (an import). Then it is named by its type alone."""
    tb = ""
    try:
        tb = format_learner_traceback(exc, file)
        return tb, error_line(exc, tb), str(exc).lower()
    except Exception as err:  # noqa: BLE001 - any error of the learner's object
        try:
            kind = type(exc).__name__
        except Exception:  # noqa: BLE001 - a hostile metaclass
            kind = "an exception"
        return tb, f"{kind} (reading its message raised {type(err).__name__})", ""


def error_line(exc: BaseException, tb: str) -> str:
    """The line that says what went wrong: the traceback's last line, before
    any notes the library appended (JAX adds one about its filtered frames,
    which would otherwise replace the message). A message of several lines
    (Dynamo's end with a source line and its carets) gives its first."""
    lines = tb.splitlines() if tb else []
    notes = [n for n in getattr(exc, "__notes__", None) or [] if isinstance(n, str)]
    drop = sum(len(n.splitlines()) for n in notes)
    if notes and len(lines) > drop:
        lines = lines[:-drop]
    message = str(exc).strip()
    if "\n" in message:
        head = re.compile(rf"^[\w.]*\b{re.escape(type(exc).__name__)}(:|$)")
        starts = [ln for ln in lines if head.match(ln)]
        if starts:
            return starts[-1]
    return lines[-1] if lines else type(exc).__name__


def get_function(module: ModuleType, name: str, file: str) -> Any:
    fn = getattr(module, name, None)
    if fn is None:
        raise LearnerError(
            f"{Path(file).name} does not define `{name}`",
            f"The exercise asks for a function named `{name}`.",
        )
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
        tb, last, low = described(exc, file)
        if "out of memory" in low:
            raise LearnerError(f"CUDA out of memory: {last}", tb) from None
        if "illegal memory access" in low or "misaligned address" in low:
            raise LearnerError(
                "CUDA illegal memory access (an out-of-bounds load or store; check your masks)", tb
            ) from None
        raise LearnerError(f"your code raised {last}", tb) from None
