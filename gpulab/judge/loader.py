"""The one way a grader is loaded: by an exercise's name, from gpulab.judge.graders
or from the exercise's folder.

Every module in gpulab.judge.graders is one exercise's grader; the machinery that
drives them (this package) is never an exercise. A name is loaded only when
the course manifest declares it and gpulab.judge.graders holds a module of that
name, so a request for `speed` or `harness` is refused before anything is
imported, with words that say why. A folder exercise (the manifest's
`exercise_folders`, gpulab.course.exercise_folder) is declared by being
listed there, and graded from its own spec.py (gpulab.judge.folder_grader).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import cast

from gpulab.judge.interface import Grader

PACKAGE = "gpulab.judge.graders"
FOLDER = Path(__file__).resolve().parent / "graders"


class UnknownExercise(Exception):
    """A name the judge will not load a grader for; the message says why."""


def grader_names() -> list[str]:
    """The exercises gpulab.judge.graders has a module for."""
    return sorted(p.stem for p in FOLDER.glob("*.py") if p.stem != "__init__")


def declared(content_root: str = "") -> list[str]:
    """The exercise ids the course manifest declares (steps included)."""
    from gpulab.course.content import ContentError, load_course

    try:
        course = load_course(Path(content_root) if content_root else None)
    except ContentError as exc:
        raise UnknownExercise(f"the course manifest cannot be read: {exc}") from None
    return list(course.exercise_ids)


def folder_of(exercise: str, content_root: str = "") -> Path | None:
    """The folder of a declared folder exercise, or None (a grader module's)."""
    from gpulab.course.content import ContentError, load_course

    try:
        course = load_course(Path(content_root) if content_root else None)
    except ContentError:
        return None
    lesson = course.find(exercise)
    return lesson.folder if lesson is not None and lesson.exercise == exercise else None


def records(exercise: str, content_root: str = "") -> tuple[str, ...]:
    """What the manifest says the sandbox records around this exercise's file
    (gpulab.course.content.RECORDS); () for a name the course lacks, which
    `check` refuses anyway."""
    from gpulab.course.content import ContentError, load_course

    try:
        found = load_course(Path(content_root) if content_root else None).find(exercise)
    except ContentError:
        return ()
    return found.records if found is not None and found.exercise == exercise else ()


def check(exercise: str, content_root: str = "") -> Path | None:
    """Raise UnknownExercise unless `exercise` is a declared exercise with a
    grader; the exercise's folder where it is a folder exercise."""
    if exercise not in declared(content_root):
        raise UnknownExercise(
            f"'{exercise}' is not an exercise of this course "
            "(lessons/manifest.toml declares no such exercise), so no grader is loaded for it"
        )
    folder = folder_of(exercise, content_root)
    if folder is None and exercise not in grader_names():
        raise UnknownExercise(f"no grader for exercise '{exercise}' yet")
    return folder


def load(exercise: str, content_root: str = "") -> Grader:
    """The grader of a declared exercise: its module, or a folder exercise's
    grader made from its spec.py. Raises UnknownExercise (a spec.py that
    cannot be used says why), or ModuleNotFoundError where the grader needs
    a package that is missing."""
    folder = check(exercise, content_root)
    if folder is not None:
        from gpulab.judge import folder_grader
        from gpulab.judge.folder_spec import SpecError

        try:
            return folder_grader.load(folder)
        except SpecError as exc:
            raise UnknownExercise(str(exc)) from None
    module = importlib.import_module(f"{PACKAGE}.{exercise}")
    if not callable(getattr(module, "grade", None)):
        raise UnknownExercise(f"{PACKAGE}.{exercise} defines no grade(ctx) (a gpulab bug)")
    return cast(Grader, module)
