"""Helpers shared by subcommands: course, workspace, exercise lookup, console."""

from __future__ import annotations

import sys
from typing import Any

from gpulab.content import ContentError, Course, Lesson, load_course
from gpulab.workspace import Workspace, WorkspaceError


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
        print(f"gpulab: created your workspace at {ws.root} (set $GPULAB_HOME to move it)",
              file=sys.stderr)
    for w in ws.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return ws


def find_lesson(course: Course, key: str, *, ready: bool = True) -> Lesson:
    lesson = course.find(key)
    if lesson is None:
        known = ", ".join(course.exercise_ids)
        raise UsageError(f"unknown exercise '{key}'. Known: {known}")
    if lesson.error:
        raise UsageError(f"lesson {lesson.id} cannot be used: {lesson.error}")
    if ready and not lesson.ready:
        raise UsageError(f"lesson {lesson.id} ({lesson.exercise}) is coming soon: "
                         "its exercise is not gradable yet")
    missing = lesson.missing_requirements()
    if ready and missing:
        from gpulab.install_hint import missing_message  # the TUI says the same

        raise UsageError(missing_message(lesson.exercise, missing))
    return lesson


def guarded(fn):
    """Turn UsageError into a one-line message and exit code 2."""

    def wrapper(args: Any) -> int:
        try:
            return fn(args)
        except (UsageError, WorkspaceError) as exc:
            print(f"gpulab: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            # A full disk, a read-only or unreachable workspace: say which file.
            print(f"gpulab: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
            return 2

    return wrapper
