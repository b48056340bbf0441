"""`gpulab dev check`: prove the course itself (rustlings' `dev check`).
`gpulab dev compile`: compile every kernel for every target (dev_compile.py).
`gpulab dev new-exercise NAME`: a new exercise folder; `gpulab dev check
NAME`: that exercise alone (dev_new.py).

For every exercise marked ready (each lesson's steps and its final exercise):
the lesson text and starter exist, the starter has a TODO, the starter FAILS
its grader and the reference PASSES it. Coming
lessons are listed; broken manifest entries fail the check. Then every file
the lessons, glossary, docs, starters and gpulab's modules cite must be in
the repo (gpulab.course.citations); a citation of a document still being written is
listed as pending.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from gpulab.cli.commands.common import UsageError, console, guarded, open_course
from gpulab.course.content import Course, Lesson
from gpulab.wire.status import Status


def check_lesson(lesson: Lesson, device: str = "auto") -> list[str]:
    """Problems with one ready lesson (empty when it is sound)."""
    from gpulab.lab.runner import run_check

    problems = []
    if not lesson.reference_path.is_file():
        return [f"reference {lesson.reference_path} is missing"]
    starter = lesson.starter_path.read_text(encoding="utf-8")
    if "TODO" not in starter:
        problems.append(f"starter {lesson.starter_path} has no TODO")
    missing = lesson.missing_requirements()
    if missing:
        return [f"skipped: needs {', '.join(missing)}"]
    s = run_check(lesson, lesson.starter_path, device=device, timing=False)
    if s.passed:
        problems.append("the starter PASSES its grader (it must fail until solved)")
    elif s.status == Status.ERROR:
        problems.append(f"the grader could not run on the starter: {s.summary}")
    r = run_check(lesson, lesson.reference_path, device=device, timing=False)
    if not r.passed:
        problems.append(f"the reference FAILS its grader: {r.summary}")
    return problems


def check_citations(root: Path, out: Any = None) -> int:
    """Report citations of files that are not in the repo; the number of problems."""
    from gpulab.course import citations

    problems, pending = citations.check(root)
    for p in problems:
        _say(out, f"✘ citations: {p}")
    for p in pending:
        _say(out, f"· citations: {p}")
    if not problems:
        _say(
            out,
            f"✔ citations: every cited file is in the repo"
            f"{f' ({len(pending)} pending)' if pending else ''}",
        )
    return len(problems)


def check_course(course: Course, device: str = "auto", out: Any = None) -> int:
    failures = sum(_check_exercise(lesson, device, out) for lesson in course.exercises)
    # course.path is <root>/lessons/manifest.toml
    return failures + check_citations(course.path.parent.parent, out)


def check_named(course: Course, key: str, device: str = "auto", out: Any = None) -> int:
    """`gpulab dev check NAME`: one exercise (a folder exercise's first
    proof), without the course's citations; the number of problems."""
    lesson = course.find(key)
    if lesson is None:
        raise UsageError(
            f"no exercise '{key}' in the course ({course.path}); a folder exercise is "
            "one once the manifest's exercise_folders lists it or the folder it is in, "
            "or a lesson's [[lesson.step]] names it (docs/new-exercise.md)"
        )
    return _check_exercise(lesson, device, out)


def _check_exercise(lesson: Lesson, device: str, out: Any) -> int:
    """One exercise's line(s); 1 where it has a problem, else 0."""
    name = f"{lesson.id} ({lesson.exercise})" if lesson.is_step else lesson.id
    if lesson.error:
        _say(out, f"✘ {name}: {lesson.error}")
        return 1
    if not lesson.ready:
        _say(out, f"· {name}: coming (not checked)")
        return 0
    problems = check_lesson(lesson, device)
    if problems and all(p.startswith("skipped") for p in problems):
        _say(out, f"- {name}: {problems[0]}")
        return 0
    for p in problems:
        _say(out, f"✘ {name}: {p}")
    if not problems:
        _say(out, f"✔ {name}: starter fails, reference passes")
    return 1 if problems else 0


def _say(out: Any, text: str) -> None:
    (out or console()).print(text, markup=False, highlight=False)


@guarded
def run(args: Any) -> int:
    if args.action == "compile":
        from gpulab.cli.commands import dev_compile

        return dev_compile.run(args)
    if args.action == "new-exercise":
        from gpulab.cli.commands import dev_new

        return dev_new.run(args)
    course = open_course()
    if args.name:
        failures = check_named(course, args.name, args.device)
        print(f"{failures} problem(s)" if failures else "exercise OK", file=sys.stderr)
        return 1 if failures else 0
    failures = check_course(course, args.device)
    print(f"{failures} problem(s)" if failures else "course OK", file=sys.stderr)
    return 1 if failures else 0


__all__ = ["check_citations", "check_course", "check_lesson", "check_named"]
