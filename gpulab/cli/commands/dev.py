"""`gpulab dev check`: prove the course itself (rustlings' `dev check`).
`gpulab dev compile`: compile every kernel for every target (dev_compile.py).

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

from gpulab.cli.commands.common import console, guarded, open_course
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
    failures = 0
    for lesson in course.exercises:
        name = f"{lesson.id} ({lesson.exercise})" if lesson.is_step else lesson.id
        if lesson.error:
            failures += 1
            _say(out, f"✘ {name}: {lesson.error}")
            continue
        if not lesson.ready:
            _say(out, f"· {name}: coming (not checked)")
            continue
        problems = check_lesson(lesson, device)
        if problems and all(p.startswith("skipped") for p in problems):
            _say(out, f"- {name}: {problems[0]}")
        elif problems:
            failures += 1
            for p in problems:
                _say(out, f"✘ {name}: {p}")
        else:
            _say(out, f"✔ {name}: starter fails, reference passes")
    # course.path is <root>/lessons/manifest.toml
    return failures + check_citations(course.path.parent.parent, out)


def _say(out: Any, text: str) -> None:
    (out or console()).print(text, markup=False, highlight=False)


@guarded
def run(args: Any) -> int:
    if args.action == "compile":
        from gpulab.cli.commands import dev_compile

        return dev_compile.run(args)
    course = open_course()
    failures = check_course(course, args.device)
    print(f"{failures} problem(s)" if failures else "course OK", file=sys.stderr)
    return 1 if failures else 0


__all__ = ["check_citations", "check_course", "check_lesson"]
