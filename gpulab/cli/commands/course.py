"""`gpulab list | lesson | hint | reset | solution | where | next`."""

from __future__ import annotations

import contextlib
import json
import sys
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from gpulab.cli.commands.common import (
    UsageError,
    console,
    find_lesson,
    guarded,
    open_course,
    open_workspace,
)
from gpulab.lab.state import lesson_status
from gpulab.wire.status import Status

if TYPE_CHECKING:
    from gpulab.course.content import Lesson
    from gpulab.lab.workspace import Workspace


# `gpulab list --json` and `gpulab next --json`, documented interfaces: the
# keys in the order they are printed.
class ExerciseRow(TypedDict):
    exercise: str
    title: str
    step: int  # its place in its lesson, from 1
    status: Status
    grade: str | None
    attempts: int
    error: str | None  # why its content could not be loaded


class LessonRow(TypedDict):
    """A lesson, as its final exercise, with every exercise of it (steps first)."""

    lesson: str
    title: str
    exercise: str
    status: Status
    grade: str | None
    attempts: int
    error: str | None
    exercises: list[ExerciseRow]


class NextJson(TypedDict):
    passed: int
    of: int
    # The exercise to do next; none when every exercise has passed.
    exercise: NotRequired[str]
    lesson: NotRequired[str]
    step: NotRequired[str | None]
    title: NotRequired[str]
    status: NotRequired[Status]
    file: NotRequired[str]


@guarded
def run(args: Any) -> int:
    return {
        "list": _list,
        "lesson": _lesson,
        "hint": _hint,
        "reset": _reset,
        "solution": _solution,
        "where": _where,
        "next": _next,
    }[args._name](args)


def _row(lesson: Lesson, ws: Workspace) -> ExerciseRow:
    st = ws.exercise_state(lesson.exercise)
    status = lesson_status(lesson, st)
    return {
        "exercise": lesson.exercise,
        "title": lesson.exercise_title,
        "step": lesson.position + 1,
        "status": status,
        "grade": st.get("grade"),
        "attempts": len(st.get("attempts", [])),
        "error": lesson.error or None,
    }


def _list(args: Any) -> int:
    course = open_course()
    ws = open_workspace(args)
    rows: list[LessonRow] = []
    for lesson in course.lessons:
        # One row per lesson, for its final exercise (as before steps), with
        # every exercise of the lesson, steps first, under "exercises".
        exercises = [_row(e, ws) for e in course.lesson_exercises(lesson)]
        final = exercises[-1]
        rows.append(
            {
                "lesson": lesson.id,
                "title": lesson.title,
                "exercise": lesson.exercise,
                "status": final["status"],
                "grade": final["grade"],
                "attempts": final["attempts"],
                "error": lesson.error or None,
                "exercises": exercises,
            }
        )
    if args.json:
        print(json.dumps({"workspace": str(ws.root), "lessons": rows}, indent=2))
        return 0
    from rich.markup import escape
    from rich.table import Table

    marks = {
        Status.PASSED: "[green]✔ passed[/]",
        Status.FAILED: "[red]✘ failed[/]",
        Status.NOT_STARTED: "[dim]· not started[/]",
        Status.COMING: "[dim]coming[/]",
        Status.BROKEN: "[red]! broken[/]",
    }
    table = Table(title=f"gpulab — workspace {ws.root}", title_justify="left")
    for col in ("#", "lesson", "exercise", "status", "grade", "tries"):
        table.add_column(col)
    for r, lesson in zip(rows, course.lessons, strict=True):
        steps = r["exercises"]
        if len(steps) == 1:
            table.add_row(
                lesson.number,
                escape(lesson.title),
                r["exercise"],
                marks[r["status"]],
                r["grade"] or "",
                str(r["attempts"] or ""),
            )
            continue
        done = sum(1 for e in steps if e["status"] == Status.PASSED)
        table.add_row(lesson.number, escape(lesson.title), "", f"[dim]{done} of {len(steps)}[/]")
        for e in steps:
            last = e is steps[-1]
            table.add_row(
                f"{lesson.number}.{e['step']}",
                f"{'└' if last else '├'} {escape(e['title'])}",
                e["exercise"],
                marks[e["status"]],
                e["grade"] or "",
                str(e["attempts"] or ""),
            )
    con = console()
    con.print(table)
    for r in rows:
        for e in r["exercises"]:
            if e["error"]:
                con.print(f"[red]{r['lesson']}: {escape(e['error'])}[/]")
    return 0


def _lesson(args: Any) -> int:
    lesson = find_lesson(open_course(), args.exercise, ready=False)
    from rich.markdown import Markdown

    from gpulab.course.sections import folded_text

    text = lesson.text()
    if not getattr(args, "deep", False):
        # The core path first; the deep dives stay folded, as in the Lesson pane.
        text = folded_text(text, f": `gpulab lesson {args.exercise} --deep` unfolds it")
    con = console()
    if con.is_terminal and not args.no_pager:
        # A lesson is 170-290 lines: in a terminal it scrolled past its own
        # start. Through the pager ($PAGER, else less), as git does, and with
        # git's LESS=FRX where LESS is unset: colours shown (R), a lesson that
        # fits one screen printed (F), the text left on screen after (X).
        import os

        os.environ.setdefault("LESS", "FRX")
        with con.pager(styles=True):
            con.print(Markdown(text))
        return 0
    con.print(Markdown(text))
    return 0


def _hint(args: Any) -> int:
    lesson = find_lesson(open_course(), args.exercise, ready=False)
    if not lesson.hints:
        raise UsageError(f"{lesson.exercise} has no hints yet")
    ws = open_workspace(args)
    level = ws.hint_level(lesson.exercise) if args.all else ws.reveal_hint(lesson)
    from rich.markdown import Markdown

    con = console()
    names = ("nudge", "approach", "near-solution")
    start = 0 if args.all else max(level - 1, 0)
    for i in range(start, max(level, 1) if args.all else level):
        con.print(f"[bold]Hint {i + 1} of {len(lesson.hints)} ({names[i]})[/]")
        con.print(Markdown(lesson.hints[i]))
    if level >= len(lesson.hints) and not args.all:
        if ws.status(lesson.exercise) == Status.PASSED:
            con.print(
                f"[dim]That was the last hint. You have passed: `gpulab solution "
                f"{lesson.exercise}` shows the reference solution.[/]"
            )
        else:
            con.print(
                f"[dim]That was the last hint. `gpulab solution {lesson.exercise}` "
                "shows the reference solution once your exercise passes.[/]"
            )
    return 0


def _reset(args: Any) -> int:
    lesson = find_lesson(open_course(), args.exercise)
    ws = open_workspace(args)
    path = ws.exercise_path(lesson)
    if not args.yes:
        if not sys.stdin.isatty():
            raise UsageError("reset needs confirmation: add --yes")
        answer = input(
            f"Restore the starter of {lesson.exercise} over {path}? "
            "Your file is backed up first. [y/N] "
        )
        if answer.strip().lower() not in ("y", "yes"):
            print("not reset")
            return 1
    backup = ws.reset(lesson)
    print(f"restored the starter at {path}")
    if backup:
        print(f"your previous file is kept at {backup}")
    return 0


def _solution(args: Any) -> int:
    lesson = find_lesson(open_course(), args.exercise)
    ws = open_workspace(args)
    text = ws.solution_text(lesson)
    if text is None:
        print(
            f"The reference solution of {lesson.exercise} opens once your own passes "
            f"(gpulab check {lesson.exercise}).",
            file=sys.stderr,
        )
        return 1
    print_source(text)
    return 0


def print_source(text: str, con: Any = None) -> None:
    """Source code, never cut at the terminal's width.

    Piped or redirected (`gpulab solution x > x.py`), the raw text, byte for
    byte as the file holds it. On a terminal, highlighted with line numbers
    and long lines wrapped under their number (rich crops them otherwise).
    """
    con = con or console()
    if not con.is_terminal:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    from rich.syntax import Syntax

    con.print(Syntax(text, "python", line_numbers=True, word_wrap=True))


def _where(args: Any) -> int:
    ws = open_workspace(args)
    if args.exercise:
        lesson = find_lesson(open_course(), args.exercise)
        print(ws.ensure_exercise(lesson))
    else:
        print(ws.root)
    return 0


def where_now(course: Any, ws: Any) -> Any:
    """The exercise a learner is on: the first gradable one in the course's
    order not passed yet; None when every one has passed."""
    for lesson in course.exercises:
        if lesson.ready and ws.status(lesson.exercise) != Status.PASSED:
            return lesson
    return None


def _next(args: Any) -> int:
    """Where am I, what is next, open it (rustlings' `next`, gpulab's words)."""
    course = open_course()
    ws = open_workspace(args)
    gradable = [e for e in course.exercises if e.ready]
    passed = sum(1 for e in gradable if ws.status(e.exercise) == Status.PASSED)
    lesson = where_now(course, ws)
    if args.json:
        out: NextJson = {"passed": passed, "of": len(gradable)}
        if lesson is not None:
            out["exercise"] = lesson.exercise
            out["lesson"] = lesson.id
            out["step"] = lesson.step_label or None
            out["title"] = lesson.exercise_title
            out["status"] = ws.status(lesson.exercise)
            out["file"] = str(ws.exercise_path(lesson))
        print(json.dumps(out, indent=2))
        return 0
    con = console()
    if lesson is None:
        con.print(
            f"Every exercise has passed ({passed} of {len(gradable)}). `gpulab list` shows "
            "your grades; `gpulab check EXERCISE` on a GPU times any of them again.",
            markup=False,
        )
        return 0
    path = ws.ensure_exercise(lesson)
    with contextlib.suppress(OSError):  # the lab, started next, opens it (as its own n does)
        ws.set_last_lesson(lesson.exercise if lesson.step_count > 1 else lesson.id)
    status = ws.status(lesson.exercise)
    tries = len(ws.exercise_state(lesson.exercise).get("attempts", []))
    step = f", {lesson.step_label}" if lesson.step_label else ""
    said = status if not tries else f"{status}, {tries} attempt{'s' if tries != 1 else ''}"
    con.print(
        f"You are on lesson {lesson.number}{step}: {lesson.exercise_title} "
        f"({lesson.exercise}), {said}. {passed} of {len(gradable)} exercises passed.",
        markup=False,
        highlight=False,
    )
    last = ws.last_result(lesson.exercise)
    if last is not None and last.summary:
        con.print(f"Last check: {last.summary}", markup=False, highlight=False, style="dim")
    for label, line in (
        ("read it", f"gpulab lesson {lesson.exercise}"),
        ("edit it", str(path)),
        ("check it", f"gpulab check {lesson.exercise}   (or gpulab watch {lesson.exercise})"),
        ("a hint", f"gpulab hint {lesson.exercise}"),
        ("in the lab", "gpulab   (it opens this exercise; n goes on to the next)"),
    ):
        # soft_wrap: a path or a command is never broken across lines (copied whole).
        con.print(f"  {label:<10} {line}", markup=False, highlight=False, soft_wrap=True)
    if args.edit:
        import os
        import shlex
        import subprocess

        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        if not editor:
            raise UsageError(f"set $VISUAL or $EDITOR to open {path} with --edit")
        return subprocess.call([*shlex.split(editor), str(path)])
    return 0
