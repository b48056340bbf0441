"""An exercise that is one folder: the kind an instructor adds (docs/new-exercise.md).

A folder exercise holds every file of one exercise, and nothing outside it
names it:

    exercise.toml   its fields: the manifest's fields for one exercise, and its kind
    lesson.md       the text the learner reads
    starter.py      the file the learner starts from (with a TODO)
    reference.py    a solution that passes
    spec.py         the judge's side, trusted Python: the torch reference, the
                    inputs and cases, tolerances, bans and baseline
                    (gpulab.judge.folder_grader reads it)

The course's manifest lists folders in `exercise_folders`: each entry an
exercise folder, or a folder of them, absolute or relative to the course's
folder (the one holding lessons/), anywhere on disk. gpulab.course.content
makes each one a lesson of its own after the manifest's lessons, so the
workspace, the CLI, the lab's sidebar, the judge's loader and the gradebook
find it as they find the others. A manifest lesson's `[[lesson.step]]` may
instead name one folder (`folder = "path"`, read the same way): the folder
exercise is then that step of that lesson.

Here exercise.toml is read with tomllib and spec.py only parsed (ast, never
run): the lab never runs an instructor's Python, the judge does. A problem
is a FolderError whose message names the file and the field.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from gpulab.fsutil import load_toml
from gpulab.wire.protocol import JsonObject

MANIFEST_KEY = "exercise_folders"
STEP_KEY = "folder"  # a [[lesson.step]] that is one exercise folder
TOML = "exercise.toml"
# Every file of a ready folder exercise, and what it is (said when one is missing).
FILES = {
    TOML: "the exercise's fields",
    "lesson.md": "the lesson text",
    "starter.py": "the learner's starting file",
    "reference.py": "a solution that passes",
    "spec.py": "the judge's side: reference, inputs, cases",
}
KINDS = ("kernel",)  # the kinds a folder may be; more may come (trace, compile, ...)
BOUNDS = ("memory", "compute")
FIELDS = (
    "exercise",
    "title",
    "kind",
    "function",
    "status",
    "requires",
    "bound",
    "flops",
    "bytes",
    "hints",
    "roof_dtype",
    "tools",
)
# What a folder exercise's `tools` may name: the commands that cover a
# kernel folder as they cover the course's own kernels. A timed kernel is
# explained unless its exercise.toml says `tools = []`; it is benched and
# compiled only where it says so, since those need more of spec.py.
FOLDER_TOOLS = ("explain", "bench", "compile")
DEFAULT_TOOLS = ("explain",)
# What spec.py must define for each tool beyond what any check needs.
TOOL_NEEDS = {
    "bench": {
        "TIMING_CASES": "the cases `gpulab bench` times",
        "baseline": "torch's own op, timed beside the reference",
    },
    "compile": {"COMPILE_SPECS": "the kernels `gpulab dev compile` compiles"},
}
# What spec.py must define at its top level (gpulab.judge.folder_grader reads
# the rest, all optional), and what each is, for the message that says it is missing.
SPEC_NEEDS = {
    "reference": "the function that computes the right answer with torch",
    "make_inputs": "the function that draws one case's inputs",
    "CASES": "the list of correctness cases",
}


class FolderError(ValueError):
    """A folder exercise that cannot be used; the message names the file and field."""


@dataclass(frozen=True)
class FolderEntry:
    """exercise.toml, checked: what the course makes a lesson of."""

    folder: Path
    title: str
    roof_dtype: str
    # The manifest's per-exercise fields, as a [[lesson]] table would give them
    # (the folder's `bound` as the manifest's `kind`): the TOML as read, its
    # values unchecked until gpulab.course.content checks them as it checks
    # the manifest's own (one checker for both).
    fields: JsonObject


def listed(data: JsonObject, root: Path, manifest: Path) -> tuple[list[Path], list[str]]:
    """The exercise folders the manifest's `exercise_folders` names, in its
    order (a folder of exercise folders gives each, by name), and what is
    wrong with the list, naming the manifest and the entry."""
    raw = data.get(MANIFEST_KEY, [])
    if not isinstance(raw, list) or not all(isinstance(e, str) and e for e in raw):
        return [], [f"{manifest}: field '{MANIFEST_KEY}' must be a list of folder paths"]
    folders: list[Path] = []
    problems: list[str] = []
    for entry in raw:
        where = f"{manifest}: {MANIFEST_KEY} entry {entry!r}"
        try:
            path = resolve(entry, root)
        except UNRESOLVABLE as exc:
            problems.append(f"{where}: not a path ({exc})")
            continue
        try:
            if not path.is_dir():
                problems.append(f"{where}: no folder at {path}")
            elif (path / TOML).is_file():
                folders.append(path)
            else:
                found = sorted(p for p in path.iterdir() if (p / TOML).is_file())
                if not found:
                    problems.append(f"{where}: {path} holds no {TOML}, nor do its folders")
                folders += found
        except OSError as exc:
            problems.append(f"{where}: {path} cannot be read ({exc.strerror or exc})")
    return list(dict.fromkeys(folders)), problems


# What resolving a path the manifest names may raise: a link that loops
# (RuntimeError before Python 3.13, OSError after) or a NUL in it (ValueError).
UNRESOLVABLE = (OSError, RuntimeError, ValueError)


def resolve(entry: str, root: Path) -> Path:
    """A folder the manifest names: absolute, or read from the course's folder.
    Raises one of UNRESOLVABLE for a path that cannot be resolved."""
    path = Path(entry).expanduser()
    return (path if path.is_absolute() else root / path).resolve()


def step_folders(data: JsonObject, root: Path) -> list[Path]:
    """The folders the manifest's lessons name as steps (`folder = "path"` in
    a [[lesson.step]]), in its order, whether or not they are there."""
    lessons = data.get("lesson", [])
    steps = [
        step
        for lesson in (lessons if isinstance(lessons, list) else [])
        if isinstance(lesson, dict) and isinstance(lesson.get("step"), list)
        for step in lesson["step"]
        if isinstance(step, dict)
    ]
    folders: list[Path] = []
    for step in steps:
        entry = step.get(STEP_KEY)
        if isinstance(entry, str) and entry:
            try:
                folders.append(resolve(entry, root))
            except UNRESOLVABLE:
                pass  # the step is broken, and says why (read_step)
    return folders


def registered(root: Path) -> list[Path]:
    """Every exercise folder the course at `root` lists or names as a step,
    read from its manifest alone (none where the manifest cannot be read):
    what the judge hides from the learner's sandbox, references and specs
    included."""
    manifest = root / "lessons" / "manifest.toml"
    try:
        data = load_toml(manifest, FolderError, "missing")
    except FolderError:
        return []
    steps = [p for p in step_folders(data, root) if _is_dir(p)]
    return list(dict.fromkeys([*listed(data, root, manifest)[0], *steps]))


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a folder it may not look into: nothing there to hide
        return False


def read(folder: Path) -> FolderEntry:
    """The folder's exercise.toml checked, and its files where it is ready.
    Raises FolderError naming the file and the field."""
    path = folder / TOML
    data = load_toml(path, FolderError, f"missing ({FILES[TOML]})")
    where = str(path)
    for key in data:
        if key not in FIELDS:
            raise FolderError(
                f"{where}: field '{key}' is not a field of {TOML} (known: {', '.join(FIELDS)})"
            )
    kind = _text(data, "kind", where, required=True)
    if kind not in KINDS:
        raise FolderError(f"{where}: field 'kind' must be one of {KINDS}, got {kind!r}")
    bound = _text(data, "bound", where) or "memory"
    if bound not in BOUNDS:
        raise FolderError(f"{where}: field 'bound' must be one of {BOUNDS}, got {bound!r}")
    function = _text(data, "function", where, required=True)
    if not function.isidentifier():
        raise FolderError(f"{where}: field 'function' must be a Python name, got {function!r}")
    title = _text(data, "title", where, required=True)
    fields = {k: v for k, v in data.items() if k not in ("title", "kind", "bound", "roof_dtype")}
    fields["kind"] = bound
    fields.setdefault("status", "ready")
    fields.setdefault("requires", ["triton"])  # a kernel exercise's kernels are Triton's
    tools = fields.setdefault("tools", list(DEFAULT_TOOLS))
    if not isinstance(tools, list) or not all(t in FOLDER_TOOLS for t in tools):
        raise FolderError(
            f"{where}: field 'tools' must be a list of {', '.join(FOLDER_TOOLS)} "
            f"(what covers a folder exercise beyond `gpulab check`), got {tools!r}"
        )
    if fields["status"] == "ready":
        for name, what in FILES.items():
            try:
                there = (folder / name).is_file()
            except OSError as exc:  # a folder it may not look into
                raise FolderError(f"{folder}: {name} cannot be read ({exc.strerror})") from None
            if not there:
                raise FolderError(f"{folder}: {name} is missing ({what})")
        spec_problem(folder / "spec.py", tools)
    return FolderEntry(folder, title, _text(data, "roof_dtype", where), fields)


@dataclass(frozen=True)
class FolderStep:
    """A [[lesson.step]] that names an exercise folder: the folder's
    exercise.toml read, or what is wrong with the step."""

    folder: Path | None
    entry: FolderEntry | None = None
    error: str = ""

    @property
    def exercise(self) -> str | None:
        """The step's exercise id: the folder's, or its name where unreadable."""
        if self.entry is not None:
            exercise = self.entry.fields.get("exercise")
            return exercise if isinstance(exercise, str) else None
        name = self.folder.name if self.folder is not None else ""
        return name if name.isidentifier() else None

    @property
    def title(self) -> str:
        return self.entry.title if self.entry is not None else ""


def read_step(raw: object, root: Path, where: str) -> FolderStep | None:
    """The folder a step names (`folder = "path"`, absolute or read from the
    course's folder), read; None for a step whose fields are written out.
    A step that names a folder names nothing else: its fields are the folder's."""
    if not isinstance(raw, dict) or STEP_KEY not in raw:
        return None
    value = raw[STEP_KEY]
    if not isinstance(value, str) or not value:
        return FolderStep(
            None, error=f"{where}: field '{STEP_KEY}' must be an exercise folder's path"
        )
    try:
        folder = resolve(value, root)
    except UNRESOLVABLE as exc:
        return FolderStep(None, error=f"{where}: field '{STEP_KEY}': {value!r} is no path ({exc})")
    other = next((k for k in raw if k != STEP_KEY), None)
    if other is not None:
        return FolderStep(
            folder,
            error=f"{where}: field '{other}' cannot be given with '{STEP_KEY}' (a folder step's "
            f"fields are its {TOML}'s)",
        )
    try:
        if not folder.is_dir():
            return FolderStep(folder, error=f"{where}: field '{STEP_KEY}': no folder at {folder}")
        return FolderStep(folder, read(folder))
    except FolderError as exc:
        return FolderStep(folder, error=str(exc))
    except OSError as exc:
        why = exc.strerror or exc
        return FolderStep(
            folder, error=f"{where}: field '{STEP_KEY}': {folder} cannot be read ({why})"
        )


def spec_problem(path: Path, tools: list[str] | tuple[str, ...] = ()) -> None:
    """spec.py parsed (never run): valid Python that defines what the judge
    needs, and what each of `tools` (exercise.toml's) needs. Raises
    FolderError naming the file, and the line of a syntax error."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except SyntaxError as exc:
        raise FolderError(f"{path}:{exc.lineno}: not valid Python: {exc.msg}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FolderError(f"{path}: cannot be read: {exc}") from None
    defined = top_level_names(tree)
    for name, what in SPEC_NEEDS.items():
        if name not in defined:
            raise FolderError(f"{path}: `{name}` is missing ({what})")
    for tool in tools:
        for name, what in TOOL_NEEDS.get(tool, {}).items():
            if name not in defined:
                raise FolderError(
                    f"{path}: `{name}` is missing ({what}): {TOML}'s field 'tools' names {tool}"
                )


def top_level_names(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level: functions, classes,
    assignments and imports."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _text(data: JsonObject, key: str, where: str, *, required: bool = False) -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise FolderError(f"{where}: field '{key}' must be a string, got {type(value).__name__}")
    if required and not value:
        raise FolderError(f"{where}: field '{key}' is missing")
    return value
