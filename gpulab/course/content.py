"""The course catalogue: the lesson manifest, lesson texts, starters and references.

Content is data. `lessons/manifest.toml` lists the nine lessons in the book's
order; each lesson's text is `lessons/<id>/lesson.md`. A lesson holds an
ordered list of exercises: its steps (`[[lesson.step]]`, graded stepping
stones), then its final exercise (the `[[lesson]]` table's own fields). For
each exercise the starter the learner edits is `exercises/<exercise>.py`, the
reference solution `kernels/<exercise>.py` and the grader
`gpulab.judge.graders.<exercise>`. The manifest's `exercise_folders` adds
exercises that are one folder each, anywhere on disk
(gpulab.course.exercise_folder): each is a lesson of its own, after the
manifest's; a `[[lesson.step]]` that names a folder (`folder = "path"`)
makes that folder's exercise a step of its lesson, with its own text.
Nothing here imports torch, triton or textual.

A broken entry never takes the course down: it is loaded as a lesson (or a
step) carrying an `error` that names the file and the field, and every other
exercise works.
"""

from __future__ import annotations

import ast
import dataclasses
import operator
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from gpulab.course import exercise_folder
from gpulab.fsutil import load_toml
from gpulab.wire.protocol import JsonObject

EXERCISE_KINDS = ("memory", "compute")
STATUSES = ("ready", "coming")
# What the sandbox records around the learner's file for an exercise: Dynamo's
# reports and JAX's exports are set up before the file loads; a profiler's
# trace is written where the judge reads it back.
RECORDS = ("dynamo", "jax", "trace")
# gpulab's commands beyond `check` that cover an exercise: `check --explain`,
# `gpulab bench` (its reference beside torch), `gpulab profile`, `gpulab dev
# compile` (its kernels, from the grader's COMPILE_SPECS) and `gpulab counters
# --ncu` (its reference counted again, from the grader's COUNTER_CASES).
TOOLS = ("explain", "bench", "profile", "compile", "counters")
# How `gpulab profile` sorts its table of operations: by self CPU time, or by
# total (the operator the learner's code calls, whose children do the work).
PROFILE_OPS = ("self", "total")


class ContentError(Exception):
    """The course content is unusable (e.g. the manifest itself cannot be read)."""


def content_root() -> Path:
    """Where lessons/, exercises/ and kernels/ live.

    `$GPULAB_CONTENT` wins (instructors point it at their own course). An
    installed wheel carries the content inside the package as `_content`; a
    source checkout (editable install, tests) has it beside the package.
    """
    env = os.environ.get("GPULAB_CONTENT")
    if env:
        return Path(env).expanduser().resolve()
    here = Path(__file__).resolve().parents[1]  # the gpulab package
    packaged = here / "_content"
    if (packaged / "lessons" / "manifest.toml").is_file():
        return packaged
    return here.parent


@dataclass(frozen=True)
class Lesson:
    """One graded exercise of the course, with the lesson it belongs to.

    Every exercise of a lesson (its steps, then its final exercise) is a
    Lesson value: they share the lesson's index, id, title and text, and
    differ in the exercise's own fields. `steps` lists the lesson's exercise
    ids in order (the final one last); `name` is a step's own title.
    """

    index: int
    id: str
    title: str
    exercise: str
    function: str = ""
    status: str = "coming"
    requires: tuple[str, ...] = ()
    kind: str = "memory"
    flops: str = ""
    bytes: str = ""
    hints: tuple[str, ...] = ()
    error: str = ""
    name: str = ""
    steps: tuple[str, ...] = ()
    # The compute roof the Roofline pane draws for this lesson ("fp32" for a
    # lesson whose maths is fp32 on CUDA cores); "" is the GPU's default
    # (bf16, the tensor cores'), which the triad lesson once showed.
    roof_dtype: str = ""
    # The manifest's declaration of what a check of this exercise needs and
    # which commands cover it (RECORDS, TOOLS): the judge, the bench and
    # --explain read these, so none of them lists exercises by name.
    records: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    # What those commands need to know of this exercise, so none of them
    # names it: the exponentials a case computes (a formula, as flops), the
    # sections of this lesson --explain's findings point at (finding kind or
    # cause, heading), how `gpulab profile` sorts its operations, and the NVTX
    # range `gpulab profile --ncu` counts inside ("" for every kernel).
    exps: str = ""
    explain_sections: tuple[tuple[str, str], ...] = ()
    profile_ops: str = "self"
    profile_range: str = ""
    root: Path = field(default_factory=content_root, compare=False, repr=False)
    # A folder exercise's folder (gpulab.course.exercise_folder): its text,
    # starter and reference are there, and its grader is its spec.py.
    folder: Path | None = None

    @property
    def number(self) -> str:
        return self.id[:2]

    @property
    def position(self) -> int:
        """0-based place of this exercise in its lesson (the final one is last)."""
        return self.steps.index(self.exercise) if self.exercise in self.steps else 0

    @property
    def step_count(self) -> int:
        """How many exercises the lesson has, steps and final together."""
        return max(len(self.steps), 1)

    @property
    def is_step(self) -> bool:
        """A stepping stone, not the lesson's final exercise."""
        return self.position < self.step_count - 1

    @property
    def exercise_title(self) -> str:
        """The exercise's own title: a step's name, else the lesson's title."""
        return self.name or self.title

    @property
    def step_label(self) -> str:
        """ "step 2 of 3" in a lesson with steps, "" otherwise."""
        if self.step_count == 1:
            return ""
        return f"step {self.position + 1} of {self.step_count}"

    @property
    def ready(self) -> bool:
        return self.status == "ready" and not self.error

    @property
    def lesson_path(self) -> Path:
        if self.folder is not None:
            return self.folder / "lesson.md"
        return self.root / "lessons" / self.id / "lesson.md"

    @property
    def starter_path(self) -> Path:
        if self.folder is not None:
            return self.folder / "starter.py"
        return self.root / "exercises" / f"{self.exercise}.py"

    @property
    def reference_path(self) -> Path:
        if self.folder is not None:
            return self.folder / "reference.py"
        return self.root / "kernels" / f"{self.exercise}.py"

    def text(self) -> str:
        """The lesson's Markdown; a readable note instead of an exception when missing."""
        try:
            return self.lesson_path.read_text(encoding="utf-8")
        except OSError as exc:
            return (
                f"# {self.title}\n\n> This lesson's text could not be read: "
                f"`{self.lesson_path}` ({exc.strerror or exc}).\n"
            )

    def missing_requirements(self) -> list[str]:
        """Optional modules this exercise needs that are not installed."""
        import importlib.util

        return [m for m in self.requires if importlib.util.find_spec(m) is None]


@dataclass(frozen=True)
class Course:
    # One entry per lesson: its final exercise (what a lesson is graded by).
    lessons: tuple[Lesson, ...]
    path: Path
    warnings: tuple[str, ...] = ()
    # Every exercise in course order: each lesson's steps, then its final one.
    # Empty means "the lessons alone" (a course built by hand, in tests).
    all_exercises: tuple[Lesson, ...] = ()
    # The manifest's top-level explain_sections: where --explain points each
    # kind of finding, course-wide, as (kind, lesson id, heading).
    explain_sections: tuple[tuple[str, str, str], ...] = ()

    @property
    def exercises(self) -> tuple[Lesson, ...]:
        return self.all_exercises or self.lessons

    def covered_by(self, tool: str) -> list[str]:
        """The exercises the manifest says `tool` (one of TOOLS) covers."""
        return [e.exercise for e in self.exercises if tool in e.tools]

    def find(self, key: str) -> Lesson | None:
        """An exercise by its id (steps included), or a lesson's final exercise by
        lesson id or lesson number ("2", "02")."""
        key = key.strip()
        for lesson in self.exercises:
            if key == lesson.exercise:
                return lesson
        for lesson in self.lessons:
            if key == lesson.id:
                return lesson
        if key.isdigit():
            for lesson in self.lessons:
                if lesson.number == f"{int(key):02d}":
                    return lesson
        return None

    def lesson_exercises(self, lesson: Lesson) -> tuple[Lesson, ...]:
        """The exercises of `lesson`'s lesson in order: its steps, then the final one."""
        return tuple(e for e in self.exercises if e.index == lesson.index)

    def next_exercise(self, lesson: Lesson) -> Lesson | None:
        """The exercise after `lesson` in course order (the next step, or the
        next lesson's first), None after the last."""
        order = self.exercises
        for i, e in enumerate(order):
            if e.exercise == lesson.exercise and e.index == lesson.index:
                return order[i + 1] if i + 1 < len(order) else None
        return None

    @property
    def exercise_ids(self) -> list[str]:
        return [lesson.exercise for lesson in self.exercises]


# The fields a [[lesson]] table and a [[lesson.step]] table may have: a
# misspelt field is an error that names it, never a silent default.
EXERCISE_FIELDS = (
    "exercise",
    "title",
    "function",
    "status",
    "requires",
    "kind",
    "flops",
    "bytes",
    "hints",
    "records",
    "tools",
    "exps",
    "explain_sections",
    "profile_ops",
    "profile_range",
)
LESSON_FIELDS = ("id", *EXERCISE_FIELDS, "step", "roof_dtype")


class _ExerciseFields(TypedDict):
    """A lesson's or a step's own fields, checked: Lesson's keyword arguments."""

    exercise: str
    function: str
    status: str
    requires: tuple[str, ...]
    kind: str
    flops: str
    bytes: str
    hints: tuple[str, ...]
    records: tuple[str, ...]
    tools: tuple[str, ...]
    exps: str
    explain_sections: tuple[tuple[str, str], ...]
    profile_ops: str
    profile_range: str


class _LessonFields(TypedDict):
    """The fields every exercise of one lesson shares."""

    index: int
    id: str
    title: str
    steps: tuple[str, ...]
    roof_dtype: str
    root: Path


def _str_field(entry: JsonObject, name: str, where: str, *, required: bool = True) -> str:
    value = entry.get(name, "")
    if not isinstance(value, str):
        raise ValueError(f"{where}: field '{name}' must be a string, got {type(value).__name__}")
    if required and not value:
        raise ValueError(f"{where}: field '{name}' is missing")
    return value


def _known_fields(entry: JsonObject, allowed: tuple[str, ...], where: str) -> None:
    for key in entry:
        if key not in allowed:
            raise ValueError(
                f"{where}: field '{key}' is not a field of this table (known: {', '.join(allowed)})"
            )


def _exercise_fields(
    entry: JsonObject, where: str, defaults: _ExerciseFields | None = None
) -> _ExerciseFields:
    """The per-exercise fields of a lesson or step table, checked; a step
    takes `status`, `requires` and `kind` from its lesson when it omits them."""
    exercise = _str_field(entry, "exercise", where)
    if not exercise.isidentifier():
        raise ValueError(f"{where}: field 'exercise' must be a Python identifier")
    status = _str_field(entry, "status", where, required=False) or (
        defaults["status"] if defaults else "coming"
    )
    if status not in STATUSES:
        raise ValueError(f"{where}: field 'status' must be one of {STATUSES}, got {status!r}")
    kind = _str_field(entry, "kind", where, required=False) or (
        defaults["kind"] if defaults else "memory"
    )
    if kind not in EXERCISE_KINDS:
        raise ValueError(f"{where}: field 'kind' must be one of {EXERCISE_KINDS}, got {kind!r}")
    hints = entry.get("hints", [])
    if not isinstance(hints, list) or not all(isinstance(h, str) for h in hints):
        raise ValueError(f"{where}: field 'hints' must be a list of strings")
    if status == "ready" and len(hints) != 3:
        raise ValueError(f"{where}: field 'hints' needs three levels, got {len(hints)}")
    requires = entry.get("requires", defaults["requires"] if defaults else [])
    if not isinstance(requires, (list, tuple)) or not all(isinstance(r, str) for r in requires):
        raise ValueError(f"{where}: field 'requires' must be a list of module names")
    formulas: dict[str, str] = {}
    for name in ("flops", "bytes", "exps"):
        formulas[name] = _str_field(entry, name, where, required=False)
        if formulas[name]:
            try:
                compile_formula(formulas[name])
            except ValueError as exc:
                raise ValueError(f"{where}: field '{name}': {exc}") from None
    declared: dict[str, tuple[str, ...]] = {}
    for name, allowed in (("records", RECORDS), ("tools", TOOLS)):
        value = entry.get(name, [])
        if not isinstance(value, list) or not all(v in allowed for v in value):
            raise ValueError(f"{where}: field '{name}' must be a list of {', '.join(allowed)}")
        declared[name] = tuple(value)
    sections = entry.get("explain_sections", {})
    if not isinstance(sections, dict) or not all(
        isinstance(k, str) and k.isidentifier() and isinstance(v, str) and v
        for k, v in sections.items()
    ):
        raise ValueError(
            f"{where}: field 'explain_sections' must be a table of finding kinds to "
            'headings of the lesson\'s text (kind = "heading")'
        )
    profile_ops = _str_field(entry, "profile_ops", where, required=False) or "self"
    if profile_ops not in PROFILE_OPS:
        raise ValueError(f"{where}: field 'profile_ops' must be one of {PROFILE_OPS}")
    profile_range = _str_field(entry, "profile_range", where, required=False)
    if profile_range and not profile_range.isidentifier():
        raise ValueError(f"{where}: field 'profile_range' must be an NVTX range's name")
    return _ExerciseFields(
        exercise=exercise,
        function=_str_field(entry, "function", where, required=status == "ready"),
        status=status,
        requires=tuple(requires),
        kind=kind,
        flops=formulas["flops"],
        bytes=formulas["bytes"],
        hints=tuple(hints),
        records=declared["records"],
        tools=declared["tools"],
        exps=formulas["exps"],
        explain_sections=tuple(sections.items()),
        profile_ops=profile_ops,
        profile_range=profile_range,
    )


def _check_files(lesson: Lesson, where: str) -> None:
    if lesson.status == "ready":
        for label, p in (("lesson text", lesson.lesson_path), ("starter", lesson.starter_path)):
            if not p.is_file():
                raise ValueError(f"{where}: {label} {p} is missing")
    if lesson.explain_sections:
        # --explain names these headings to the learner: each must be there.
        text = lesson.text()
        for kind, heading in lesson.explain_sections:
            if not re.search(rf"^##+ {re.escape(heading)}$", text, re.M):
                raise ValueError(
                    f"{where}: field 'explain_sections': {kind} = {heading!r} is not a "
                    f"heading (## or ###) of {lesson.lesson_path}"
                )


def _parse_lesson(entry: object, index: int, path: Path, root: Path) -> list[Lesson]:
    """The lesson's exercises in order: its steps, then its final exercise.
    Raises ValueError when the lesson's own fields are wrong; a broken step
    is returned as a broken exercise and the others still work."""
    where = f"{path} [[lesson]] #{index + 1}"
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected a table")
    lesson_id = _str_field(entry, "id", where)
    where = f"{path} lesson '{lesson_id}'"
    if "/" in lesson_id or "\\" in lesson_id or lesson_id.startswith("."):
        raise ValueError(f"{where}: field 'id' must be a plain folder name")
    _known_fields(entry, LESSON_FIELDS, where)
    own = _exercise_fields(entry, where)
    title = _str_field(entry, "title", where)
    raw_steps = entry.get("step", [])
    if not isinstance(raw_steps, list):
        raise ValueError(f"{where}: field 'step' must be an array of tables ([[lesson.step]])")
    # A step that names a folder is read first: its exercise id is the folder's.
    found = [
        exercise_folder.read_step(s, root, f"{where} step #{n + 1}")
        for n, s in enumerate(raw_steps)
    ]
    raw_ids = [
        f.exercise if f is not None else s.get("exercise") if isinstance(s, dict) else None
        for s, f in zip(raw_steps, found, strict=True)
    ]
    ids = [
        i if isinstance(i, str) and i else f"{own['exercise']}_step{n + 1}"
        for n, i in enumerate(raw_ids)
    ]
    steps = (*ids, own["exercise"])
    roof_dtype = _str_field(entry, "roof_dtype", where, required=False)
    common = _LessonFields(
        index=index, id=lesson_id, title=title, steps=steps, roof_dtype=roof_dtype, root=root
    )
    final = Lesson(**common, **own)
    _check_files(final, where)
    out: list[Lesson] = []
    for n, raw in enumerate(raw_steps):
        at = f"{where} step #{n + 1}"
        folder_step = found[n]
        try:
            if not isinstance(raw, dict):
                raise ValueError(f"{at}: expected a table")
            at = f"{where} step #{n + 1} ('{ids[n]}')"
            if folder_step is not None:
                step = _folder_step(folder_step, common)
            else:
                _known_fields(raw, EXERCISE_FIELDS, at)
                fields = _exercise_fields(raw, at, own)
                step = Lesson(**common, **fields, name=_str_field(raw, "title", at))
                _check_files(step, at)
        except ValueError as exc:
            raw_title = raw.get("title") if isinstance(raw, dict) else None
            name = raw_title if isinstance(raw_title, str) else ""
            folder = folder_step.folder if folder_step is not None else None
            if folder_step is not None:  # named as well as the folder allows
                name = folder_step.title or (folder.name if folder else "")
            step = Lesson(**common, exercise=ids[n], name=name, error=str(exc), folder=folder)
        out.append(step)
    return [*out, final]


def load_course(root: Path | None = None) -> Course:
    """Read the manifest. Raises ContentError only if the manifest as a whole is unusable."""
    root = Path(root) if root else content_root()
    path = root / "lessons" / "manifest.toml"
    data = load_toml(path, ContentError, "the lesson manifest is missing")
    entries = data.get("lesson", [])
    folders, warnings = exercise_folder.listed(data, root, path)
    # A folder a step names is that step, not a lesson of its own as well
    # (where `exercise_folders` lists it, or the folder it is in).
    steps = set(exercise_folder.step_folders(data, root))
    folders = [f for f in folders if f not in steps]
    if not isinstance(entries, list) or not (entries or folders):
        raise ContentError(f"{path}: no [[lesson]] entries")
    lessons: list[Lesson] = []
    exercises: list[Lesson] = []
    seen: set[str] = set()
    for i, entry in enumerate([*entries, *folders]):
        try:
            if isinstance(entry, Path):
                parsed = [_folder_lesson(entry, i, root)]
            else:
                parsed = _parse_lesson(entry, i, path, root)
        except ValueError as exc:
            parsed = [_broken(entry, i, root, str(exc))]
        for n, lesson in enumerate(parsed):
            if lesson.exercise in seen and not lesson.error:
                problem = (
                    f"{path} lesson '{lesson.id}': exercise '{lesson.exercise}' is listed twice"
                )
                parsed[n] = lesson = dataclasses.replace(lesson, error=problem)
            seen.add(lesson.exercise)
            if lesson.error:
                warnings.append(lesson.error)
        exercises.extend(parsed)
        lessons.append(parsed[-1])
    sections = _course_sections(data.get("explain_sections", {}), path, lessons, warnings)
    return Course(
        lessons=tuple(lessons),
        path=path,
        warnings=tuple(warnings),
        all_exercises=tuple(exercises),
        explain_sections=sections,
    )


def _course_sections(
    raw: object, path: Path, lessons: list[Lesson], warnings: list[str]
) -> tuple[tuple[str, str, str], ...]:
    """The manifest's top-level explain_sections, checked entry by entry: an
    entry that names no lesson of the course, or no heading of its text, is
    a warning naming it, and is left out (its kind then points nowhere)."""
    where = f"{path}: field 'explain_sections'"
    if not isinstance(raw, dict):
        warnings.append(f'{where} must be a table (kind = ["lesson id", "heading"])')
        return ()
    by_id = {lesson.id: lesson for lesson in lessons}
    out: list[tuple[str, str, str]] = []
    for kind, value in raw.items():
        ok = isinstance(value, list) and len(value) == 2
        if not (ok and kind.isidentifier() and all(isinstance(v, str) and v for v in value)):
            warnings.append(f'{where}: {kind} must be ["lesson id", "heading"], got {value!r}')
            continue
        lesson_id, heading = value
        lesson = by_id.get(lesson_id)
        if lesson is None:
            warnings.append(f"{where}: {kind} names lesson {lesson_id!r}, not one of the course's")
        elif not re.search(rf"^##+ {re.escape(heading)}$", lesson.text(), re.M):
            warnings.append(
                f"{where}: {kind} = {heading!r} is not a heading (## or ###) of "
                f"{lesson.lesson_path}"
            )
        else:
            out.append((kind, lesson_id, heading))
    return tuple(out)


def _folder_lesson(folder: Path, index: int, root: Path) -> Lesson:
    """A folder exercise as a lesson of its own (gpulab.course.exercise_folder):
    its exercise.toml checked as the manifest's own fields are."""
    entry = exercise_folder.read(folder)
    where = str(folder / exercise_folder.TOML)
    own = _exercise_fields(entry.fields, where)
    lesson = Lesson(
        index=index,
        id=f"{index + 1:02d}_{own['exercise']}",
        title=entry.title,
        steps=(own["exercise"],),
        roof_dtype=entry.roof_dtype,
        root=root,
        folder=folder,
        **own,
    )
    _check_files(lesson, where)
    return lesson


def _folder_step(found: exercise_folder.FolderStep, common: _LessonFields) -> Lesson:
    """A folder exercise as a step of a manifest lesson: its exercise.toml
    checked as a folder lesson's is, its own text, starter and reference."""
    if found.entry is None:
        raise ValueError(found.error)
    entry = found.entry
    where = str(entry.folder / exercise_folder.TOML)
    own = _exercise_fields(entry.fields, where)
    step = Lesson(**common, **own, name=entry.title, folder=entry.folder)
    step = dataclasses.replace(step, roof_dtype=entry.roof_dtype)  # its own, as a folder lesson's
    _check_files(step, where)
    return step


def _broken(entry: object, index: int, root: Path, error: str) -> Lesson:
    """A lesson (or a folder exercise) that cannot be used, named as well as
    its entry allows, carrying what is wrong."""
    if isinstance(entry, Path):  # a folder exercise: named by its folder
        name = entry.name if entry.name.isidentifier() else f"lesson{index + 1}"
        return Lesson(
            index=index,
            id=f"{index + 1:02d}_{name}",
            title=entry.name,
            exercise=name,
            error=error,
            root=root,
            folder=entry,
        )
    raw = entry if isinstance(entry, dict) else {}
    lid, ex, title = raw.get("id"), raw.get("exercise"), raw.get("title")
    lid = lid if isinstance(lid, str) else f"lesson-{index + 1}"
    ex = ex if isinstance(ex, str) else f"lesson{index + 1}"
    title = title if isinstance(title, str) else lid
    return Lesson(index=index, id=lid, title=title, exercise=ex, error=error, root=root)


# --- FLOPs and bytes formulas -------------------------------------------------
# The manifest's formulas are tiny arithmetic expressions over a case's sizes.
# They are evaluated with a whitelist of AST nodes, never with eval(), so a
# manifest cannot run code.

_BINOPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}


def compile_formula(text: str) -> ast.Expression:
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {text!r} ({exc.msg})") from None
    for node in ast.walk(tree):
        if not isinstance(
            node,
            (
                ast.Expression,
                ast.BinOp,
                ast.UnaryOp,
                ast.USub,
                ast.Constant,
                ast.Name,
                ast.Load,
                ast.IfExp,
                ast.Compare,
                ast.Eq,
                ast.NotEq,
                *_BINOPS,
            ),
        ):
            raise ValueError(f"{type(node).__name__} is not allowed in a formula: {text!r}")
        if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, bool)):
            raise ValueError(f"only numbers are allowed in a formula: {text!r}")
    return tree


def eval_formula(text: str, names: dict[str, float]) -> float:
    """Evaluate a manifest formula such as `2*M*N*elt` with the given sizes."""

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        # compile_formula let only numbers through (bool is an int).
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise ValueError(f"unknown name {node.id!r} in formula {text!r}")
            return names[node.id]
        if isinstance(node, ast.UnaryOp):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp):
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.IfExp):
            return ev(node.body) if ev(node.test) else ev(node.orelse)
        if isinstance(node, ast.Compare):
            left, right = ev(node.left), ev(node.comparators[0])
            return left == right if isinstance(node.ops[0], ast.Eq) else left != right
        raise ValueError(f"bad formula {text!r}")

    return float(ev(compile_formula(text)))
