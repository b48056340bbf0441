"""`gpulab debug | compare | restore`: after a check, in place.

- `debug EXERCISE [--case N]`: a wrong case of the last check, rerun in a
  Python REPL with your function, the case's inputs and the reference
  (gpulab.targets.debug_case, in a child process: never the lab's); `--script`
  writes a script that does the same, to run or edit.
- `compare EXERCISE`: once it has passed, your file beside the reference.
- `restore EXERCISE`: bring back a file `reset` backed up.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

from gpulab.cli.commands.common import (
    UsageError,
    console,
    find_lesson,
    guarded,
    open_course,
    open_workspace,
)


@guarded
def run(args: Any) -> int:
    return {"debug": _debug, "compare": _compare, "restore": _restore}[args._name](args)


# --- debug -------------------------------------------------------------------------------


class SavedCase(TypedDict):
    """A wrong case the judge saved: what this command reads of it (the
    child, gpulab.targets.debug_case, reads the rest)."""

    number: int
    name: NotRequired[object]  # shown as text, whatever it is


def saved(root: Path, exercise: str) -> list[SavedCase]:
    """The wrong cases the judge saved after the last check (plain JSON, checked)."""
    path = root / ".gpulab" / "debug" / exercise / "cases.json"
    try:
        meta = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return []
    cases = meta.get("cases") if isinstance(meta, dict) else None
    return [
        cast(SavedCase, c)  # its number checked; its name is shown through str()
        for c in (cases if isinstance(cases, list) else [])
        if isinstance(c, dict) and isinstance(c.get("number"), int)
    ]


def _debug(args: Any) -> int:
    lesson = find_lesson(open_course(), args.exercise)
    ws = open_workspace(args)
    cases = saved(ws.root, lesson.exercise)
    if not cases:
        raise UsageError(
            f"no wrong case of {lesson.exercise} is saved: `gpulab check {lesson.exercise}` "
            "saves the cases it finds wrong (up to 4), and a pass clears them"
        )
    if args.list:
        for c in cases:
            print(f"case {c['number']}: {str(c.get('name', ''))[:70]}")
        return 0
    number = args.case if args.case is not None else cases[0]["number"]
    if number not in [c["number"] for c in cases]:
        numbers = ", ".join(str(c["number"]) for c in cases)
        raise UsageError(f"case {number} is not saved; saved: {numbers} (see --list)")
    if args.script:
        from gpulab.fsutil import atomic_write_text

        path = ws.root / ".gpulab" / "debug" / lesson.exercise / f"debug_case_{number}.py"
        atomic_write_text(path, _script(ws.root, lesson.exercise, number))
        print(f"wrote {path}")
        print(f"run it:  {Path(sys.executable).name} {path}")
        print("or edit it: it imports your exercise file as it is now.")
        return 0
    # The case runs in a Python of its own (the lab never runs your code), which
    # stays open for you to explore: `python -i` after the module's set-up.
    command = [
        sys.executable,
        "-i",
        "-m",
        "gpulab.targets.debug_case",
        str(ws.root),
        lesson.exercise,
        str(number),
    ]
    return subprocess.call(command)


def _script(root: Path, exercise: str, number: int) -> str:
    # The same text as gpulab.targets.debug_case.script_text, written here so
    # the lab imports nothing heavy (that module is the child's).
    return f'''"""gpulab debug: case {number} of {exercise}, outside gpulab's sandbox.

Run it with python, or `python -i` to keep exploring. Your exercise file is
imported as it is now; print() and breakpoint() work.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # the CPU; delete this line to run on a GPU

from gpulab.targets.debug_case import load

case = load({str(root)!r}, {exercise!r}, {number})
out = case.run()  # your function on the case's inputs
case.check(out)  # against the reference: what is wrong, and where
case.load_map()  # which elements each program loaded and stored
'''


# --- compare -----------------------------------------------------------------------------


def _compare(args: Any) -> int:
    lesson = find_lesson(open_course(), args.exercise)
    ws = open_workspace(args)
    reference = ws.solution_text(lesson)
    if reference is None:
        print(
            f"The reference solution of {lesson.exercise} opens once your own passes "
            f"(gpulab check {lesson.exercise}).",
            file=sys.stderr,
        )
        return 1
    try:
        mine = ws.exercise_path(lesson).read_text("utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"cannot read your file: {exc}") from exc
    from gpulab.course.side_by_side import side_by_side

    con = console()
    con.print(side_by_side(mine, reference, width=con.width))
    return 0


# --- restore -----------------------------------------------------------------------------


def _restore(args: Any) -> int:
    lesson = find_lesson(open_course(), args.exercise)
    ws = open_workspace(args)
    found = ws.backups(lesson)
    if not found:
        print(f"no backup of {lesson.exercise}: `gpulab reset` makes one", file=sys.stderr)
        return 1
    if args.list:
        for i, path in enumerate(found, 1):
            print(f"{i}. {path.name}")
        return 0
    pick = args.pick or 1
    if not 1 <= pick <= len(found):
        raise UsageError(f"--pick takes 1 to {len(found)}")
    backup = found[pick - 1]
    if not args.yes:
        if not sys.stdin.isatty():
            raise UsageError("restore needs confirmation: add --yes")
        answer = input(
            f"Put {backup.name} back as {ws.exercise_path(lesson)}? "
            "Your current file is backed up first. [y/N] "
        )
        if answer.strip().lower() not in ("y", "yes"):
            print("not restored")
            return 1
    kept = ws.restore(lesson, backup)
    print(f"restored {backup.name} as {ws.exercise_path(lesson)}")
    if kept:
        print(f"the file it replaced is kept at {kept}")
    return 0
