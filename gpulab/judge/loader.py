"""The one way a grader is loaded: by an exercise's name, from gpulab.judge.graders
or from the exercise's folder.

Every module in gpulab.judge.graders is one exercise's grader; the machinery that
drives them (this package) is never an exercise. A name is loaded only when
the course manifest declares it and gpulab.judge.graders holds a module of that
name, so a request for `speed` or `harness` is refused before anything is
imported, with words that say why. A folder exercise (the manifest's
`exercise_folders`, gpulab.course.exercise_folder) is declared by being
listed there, or named by a lesson's step (`folder = "path"`), and graded
from its own spec.py (gpulab.judge.folder_grader).

The tools beyond `check` reach a grader's hooks through here too: the
manifest's `tools` says which exercises a tool covers (Course.covered_by),
and the grader of each provides what interface.py lists for that tool.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, cast

from gpulab.judge.interface import Grader

if TYPE_CHECKING:
    from gpulab.course.content import Course
    from gpulab.measure.compile_specs import Spec

PACKAGE = "gpulab.judge.graders"
FOLDER = Path(__file__).resolve().parent / "graders"


class UnknownExercise(Exception):
    """A name the judge will not load a grader for; the message says why."""


def grader_names() -> list[str]:
    """The exercises gpulab.judge.graders has a module for."""
    return sorted(p.stem for p in FOLDER.glob("*.py") if p.stem != "__init__")


def _course(content_root: str) -> Course:
    from gpulab.course.content import ContentError, load_course

    try:
        return load_course(Path(content_root) if content_root else None)
    except ContentError as exc:
        raise UnknownExercise(f"the course manifest cannot be read: {exc}") from None


def declared(content_root: str = "") -> list[str]:
    """The exercise ids the course manifest declares (steps included)."""
    return list(_course(content_root).exercise_ids)


def _folder(course: Course, exercise: str) -> Path | None:
    lesson = course.find(exercise)
    return lesson.folder if lesson is not None and lesson.exercise == exercise else None


def folder_of(exercise: str, content_root: str = "") -> Path | None:
    """The folder of a declared folder exercise, or None (a grader module's)."""
    try:
        return _folder(_course(content_root), exercise)
    except UnknownExercise:
        return None


def records(exercise: str, content_root: str = "") -> tuple[str, ...]:
    """What the manifest says the sandbox records around this exercise's file
    (gpulab.course.content.RECORDS); () for a name the course lacks, which
    `check` refuses anyway."""
    try:
        found = _course(content_root).find(exercise)
    except UnknownExercise:
        return ()
    return found.records if found is not None and found.exercise == exercise else ()


def check(exercise: str, content_root: str = "", *, course: Course | None = None) -> Path | None:
    """Raise UnknownExercise unless `exercise` is a declared exercise with a
    grader; the exercise's folder where it is a folder exercise. `course`:
    the manifest already read (a caller loading several graders reads it once)."""
    course = course or _course(content_root)
    if exercise not in course.exercise_ids:
        raise UnknownExercise(
            f"'{exercise}' is not an exercise of this course "
            "(lessons/manifest.toml declares no such exercise), so no grader is loaded for it"
        )
    folder = _folder(course, exercise)
    if folder is None and exercise not in grader_names():
        raise UnknownExercise(f"no grader for exercise '{exercise}' yet")
    return folder


def load(exercise: str, content_root: str = "", *, course: Course | None = None) -> Grader:
    """The grader of a declared exercise: its module, or a folder exercise's
    grader made from its spec.py. Raises UnknownExercise (a spec.py that
    cannot be used says why), or ModuleNotFoundError where the grader needs
    a package that is missing. `course`: as check's."""
    folder = check(exercise, content_root, course=course)
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


def compile_specs(
    root: Path, exercises: set[str] | None = None
) -> tuple[tuple[Spec, ...], list[tuple[str, str, str]]]:
    """(specs, errors): every spec of the graders the manifest at `root`
    says `gpulab dev compile` covers (only `exercises`, if given), each
    with its exercise filled in (and a folder exercise's folder, whose
    reference.py and starter.py it compiles); a (name, role, error) triple
    per grader that cannot be loaded."""
    from gpulab.course.content import load_course

    course = load_course(root)
    specs: list[Spec] = []
    errors: list[tuple[str, str, str]] = []
    for name in course.covered_by("compile"):
        if exercises and name not in exercises:
            continue
        try:
            grader = load(name, str(root), course=course)
        except Exception as exc:  # noqa: BLE001 - reported as a failed row
            errors.append((f"{name} (its grader)", "reference", f"{type(exc).__name__}: {exc}"))
            continue
        listed: tuple[Spec, ...] = getattr(grader, "COMPILE_SPECS", ())
        folder = _folder(course, name)
        specs += [dataclasses.replace(spec, exercise=name, folder=folder) for spec in listed]
    return tuple(specs), errors
