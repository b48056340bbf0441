"""The course catalogue: the lesson manifest, lesson texts, starters and references.

Content is data. `lessons/manifest.toml` lists the nine lessons in the book's
order; each lesson's text is `lessons/<id>/lesson.md`; the starter the learner
edits is `exercises/<exercise>.py` and the reference solution
`kernels/<exercise>.py`. Nothing here imports torch, triton or textual.

A broken entry never takes the course down: it is loaded as a lesson carrying
an `error` that names the file and the field, and every other lesson works.
"""

from __future__ import annotations

import ast
import operator
import os
from dataclasses import dataclass, field
from pathlib import Path

from gpulab.fsutil import load_toml

EXERCISE_KINDS = ("memory", "compute")
STATUSES = ("ready", "coming")


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
    here = Path(__file__).resolve().parent
    packaged = here / "_content"
    if (packaged / "lessons" / "manifest.toml").is_file():
        return packaged
    return here.parent


@dataclass(frozen=True)
class Lesson:
    """One lesson of the course and its exercise."""

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
    root: Path = field(default_factory=content_root, compare=False, repr=False)

    @property
    def number(self) -> str:
        return self.id[:2]

    @property
    def ready(self) -> bool:
        return self.status == "ready" and not self.error

    @property
    def lesson_path(self) -> Path:
        return self.root / "lessons" / self.id / "lesson.md"

    @property
    def starter_path(self) -> Path:
        return self.root / "exercises" / f"{self.exercise}.py"

    @property
    def reference_path(self) -> Path:
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
    lessons: tuple[Lesson, ...]
    path: Path
    warnings: tuple[str, ...] = ()

    def find(self, key: str) -> Lesson | None:
        """A lesson by exercise id, lesson id, or lesson number ("2", "02")."""
        key = key.strip()
        for lesson in self.lessons:
            if key in (lesson.exercise, lesson.id):
                return lesson
        if key.isdigit():
            for lesson in self.lessons:
                if lesson.number == f"{int(key):02d}":
                    return lesson
        return None

    @property
    def exercise_ids(self) -> list[str]:
        return [lesson.exercise for lesson in self.lessons]


def _str_field(entry: dict, name: str, where: str, *, required: bool = True) -> str:
    value = entry.get(name, "")
    if not isinstance(value, str):
        raise ValueError(f"{where}: field '{name}' must be a string, got {type(value).__name__}")
    if required and not value:
        raise ValueError(f"{where}: field '{name}' is missing")
    return value


def _parse_lesson(entry: object, index: int, path: Path, root: Path) -> Lesson:
    where = f"{path} [[lesson]] #{index + 1}"
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected a table")
    lesson_id = _str_field(entry, "id", where)
    where = f"{path} lesson '{lesson_id}'"
    if "/" in lesson_id or "\\" in lesson_id or lesson_id.startswith("."):
        raise ValueError(f"{where}: field 'id' must be a plain folder name")
    exercise = _str_field(entry, "exercise", where)
    if not exercise.isidentifier():
        raise ValueError(f"{where}: field 'exercise' must be a Python identifier")
    status = _str_field(entry, "status", where, required=False) or "coming"
    if status not in STATUSES:
        raise ValueError(f"{where}: field 'status' must be one of {STATUSES}, got {status!r}")
    kind = _str_field(entry, "kind", where, required=False) or "memory"
    if kind not in EXERCISE_KINDS:
        raise ValueError(f"{where}: field 'kind' must be one of {EXERCISE_KINDS}, got {kind!r}")
    hints = entry.get("hints", [])
    if not isinstance(hints, list) or not all(isinstance(h, str) for h in hints):
        raise ValueError(f"{where}: field 'hints' must be a list of strings")
    if status == "ready" and len(hints) != 3:
        raise ValueError(f"{where}: field 'hints' needs three levels, got {len(hints)}")
    requires = entry.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise ValueError(f"{where}: field 'requires' must be a list of module names")
    formulas = {}
    for name in ("flops", "bytes"):
        formulas[name] = _str_field(entry, name, where, required=False)
        if formulas[name]:
            try:
                compile_formula(formulas[name])
            except ValueError as exc:
                raise ValueError(f"{where}: field '{name}': {exc}") from None
    lesson = Lesson(
        index=index,
        id=lesson_id,
        title=_str_field(entry, "title", where),
        exercise=exercise,
        function=_str_field(entry, "function", where, required=status == "ready"),
        status=status,
        requires=tuple(requires),
        kind=kind,
        flops=formulas["flops"],
        bytes=formulas["bytes"],
        hints=tuple(hints),
        root=root,
    )
    if status == "ready":
        for label, p in (("lesson text", lesson.lesson_path), ("starter", lesson.starter_path)):
            if not p.is_file():
                raise ValueError(f"{where}: {label} {p} is missing")
    return lesson


def load_course(root: Path | None = None) -> Course:
    """Read the manifest. Raises ContentError only if the manifest as a whole is unusable."""
    root = Path(root) if root else content_root()
    path = root / "lessons" / "manifest.toml"
    data = load_toml(path, ContentError, "the lesson manifest is missing")
    entries = data.get("lesson")
    if not isinstance(entries, list) or not entries:
        raise ContentError(f"{path}: no [[lesson]] entries")
    lessons: list[Lesson] = []
    warnings: list[str] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        try:
            lesson = _parse_lesson(entry, i, path, root)
            if lesson.exercise in seen:
                raise ValueError(
                    f"{path} lesson '{lesson.id}': exercise '{lesson.exercise}' is listed twice"
                )
            seen.add(lesson.exercise)
        except ValueError as exc:
            raw = entry if isinstance(entry, dict) else {}
            lid = raw.get("id") if isinstance(raw.get("id"), str) else f"lesson-{i + 1}"
            ex = raw.get("exercise") if isinstance(raw.get("exercise"), str) else f"lesson{i + 1}"
            title = raw.get("title") if isinstance(raw.get("title"), str) else lid
            lesson = Lesson(index=i, id=lid, title=title, exercise=ex, error=str(exc), root=root)
            warnings.append(str(exc))
        lessons.append(lesson)
    return Course(lessons=tuple(lessons), path=path, warnings=tuple(warnings))


# --- FLOPs and bytes formulas -------------------------------------------------
# The manifest's formulas are tiny arithmetic expressions over a case's sizes.
# They are evaluated with a whitelist of AST nodes, never with eval(), so a
# manifest cannot run code.

_BINOPS = {
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
        if isinstance(node, ast.Constant):
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
