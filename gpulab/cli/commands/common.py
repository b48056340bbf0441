"""Helpers shared by subcommands: course, workspace, exercise lookup, console."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from gpulab.course.content import ContentError, Course, Lesson, load_course
from gpulab.fsutil import unreadable_file
from gpulab.gpu.hardware import HardwareDataError
from gpulab.lab.workspace import Workspace, WorkspaceError
from gpulab.textsafe import visible
from gpulab.wire.status import Status

# The longest a single check may run. A limit is what keeps a hung kernel
# from holding the GPU (and the GPU lock) forever: "inf" would mean none.
MAX_TIMEOUT_S = 3600.0


class UsageError(Exception):
    """gpulab cannot do what was asked (exit 2)."""


def console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def open_course() -> Course:
    try:
        course = load_course()
    except ContentError as exc:
        raise UsageError(str(exc)) from None
    for w in course.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return course


def open_workspace(args: Any) -> Workspace:
    ws = Workspace.open(getattr(args, "workspace", None))
    if ws.created:
        print(
            f"gpulab: created your workspace at {ws.root} (set $GPULAB_HOME to move it)",
            file=sys.stderr,
        )
    for w in ws.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return ws


def find_lesson(course: Course, key: str, *, ready: bool = True) -> Lesson:
    lesson = course.find(key)
    if lesson is None:
        import difflib

        known = ", ".join(course.exercise_ids)
        close = difflib.get_close_matches(key.strip().lower(), course.exercise_ids, n=2)
        guess = f" Did you mean {' or '.join(close)}?" if close else ""
        raise UsageError(f"unknown exercise '{key}'.{guess} Known: {known}")
    if lesson.error:
        raise UsageError(f"lesson {lesson.id} cannot be used: {lesson.error}")
    if ready and not lesson.ready:
        raise UsageError(
            f"lesson {lesson.id} ({lesson.exercise}) is coming soon: "
            "its exercise is not gradable yet"
        )
    missing = lesson.missing_requirements()
    if ready and missing:
        from gpulab.course.install_hint import missing_message  # the TUI says the same

        raise UsageError(missing_message(lesson.exercise, missing))
    return lesson


def exercise_file(args: Any, ws: Workspace, lesson: Lesson) -> tuple[Path, bool]:
    """(the file to run, whether it is the workspace's own copy).

    `--file PATH` names the learner's own file (resolved; a UsageError says why
    it can't be read); without it, the workspace's copy, made from the starter
    the first time. Only the workspace's copy has its results recorded.
    """
    if getattr(args, "file", None):
        path = Path(args.file).expanduser()
        problem = unreadable_file(path)
        if problem:
            raise UsageError(problem)
        return path.resolve(), False
    return ws.ensure_exercise(lesson), True


def parse_timeout(text: str | None, default: float) -> float:
    """Seconds from --timeout: a finite number in (0, MAX_TIMEOUT_S], else UsageError."""
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"--timeout must be a number of seconds, got {visible(text)!r}") from None
    # nan compares false with everything, so test finiteness first.
    if not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_S:
        raise UsageError(
            f"--timeout must be more than 0 and at most {MAX_TIMEOUT_S:g} seconds, "
            f"got {visible(text)}"
        )
    return value


def print_json_error(summary: str) -> None:
    """The one JSON object `--json` promises, for a run that could not happen (exit 2)."""
    print(json.dumps({"status": Status.ERROR, "summary": summary}, indent=2))


# Errors only a write gives (a read-only file system, a full disk or quota).
UNWRITABLE = (errno.EROFS, errno.ENOSPC, errno.EDQUOT)


def os_error_message(exc: OSError) -> str:
    """A full disk, a read-only or unreachable workspace: say which file, or,
    when it could not be written, which folder (the file is often a
    temporary one) and what to do."""
    if exc.errno in UNWRITABLE and exc.filename:
        folder = Path(exc.filename).parent
        return (
            f"cannot write in the folder {folder} ({exc.strerror}). Use a folder "
            "you can write: --workspace DIR or $GPULAB_HOME."
        )
    return f"{exc.filename or ''}: {exc.strerror or exc}"


def guarded(fn):
    """Turn UsageError (and a broken workspace or hardware table) into a
    one-line message and exit code 2.

    With `--json` the same message also goes to stdout as a JSON error object:
    a script reading stdout gets an answer, not an empty string.
    """

    def wrapper(args: Any) -> int:
        try:
            return fn(args)
        except BrokenPipeError:
            # The reader went away (`gpulab list --json | head`): nothing more
            # to say to it, and nothing to say about it. Python would flush
            # stdout again at exit and print a traceback: point it at devnull.
            with contextlib.suppress(OSError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            return 1
        except (UsageError, WorkspaceError, HardwareDataError) as exc:
            message = str(exc)
        except OSError as exc:
            message = os_error_message(exc)
        print(f"gpulab: {message}", file=sys.stderr)
        if getattr(args, "json", None) is True:  # `bench --json PATH` is a file, not this
            print_json_error(message)
        return 2

    return wrapper
