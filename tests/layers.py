"""Where every gpulab module runs: the one list the import rules come from.

pyproject.toml's import-linter contracts and tests/test_import_hygiene.py
are both made from the lists below, so a module is protected the day it
lands: tests/test_layers.py fails while a module under gpulab/ is in no
list, or while pyproject.toml's contracts differ from what this file makes.
After editing a list, rewrite the contracts with

    python -m tests.layers

An entry is a module (a package's name alone is its __init__), or
`package.*`: the package and everything under it. Each module is in exactly
one of LAB, UI and CHILD.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The lab's own process (the CLI and the core under the TUI): never imports
# the UI, gpulab.judge, torch or triton, not even inside a function, and
# importing it loads nothing heavy. Whole folders: a new module is placed by
# the folder it is written in.
LAB = [
    "gpulab",
    "gpulab.__main__",
    "gpulab.fsutil",
    "gpulab.safetree",
    "gpulab.textsafe",
    "gpulab.wire.*",  # the messages, standard library only
    "gpulab.course.*",  # the course as data
    "gpulab.gpu.*",  # datasheets, roofline, cost model, NVML, ceilings
    "gpulab.explain.*",  # --explain's rules and rendering (its plug-ins are CHILD)
    "gpulab.lab.*",  # the check from the lab's side, the workspace
    "gpulab.gradebook.*",  # the instructor's side, grading through gpulab.lab
    "gpulab.cli.*",
]

# The UI: the lab's process too, and the only package that imports textual.
UI = ["gpulab.tui.*"]

# Child processes only (`python -m ...`: the judge, the sandbox, the bench,
# the microbenchmarks, the profile target, the torch probe): they may import
# torch, triton and the grader, and never the UI. Where a CHILD folder lies
# inside a LAB one (explain's plug-ins), the more specific entry places it.
CHILD = [
    "gpulab.measure.*",
    "gpulab.targets.*",
    "gpulab.explain.judge.*",
    "gpulab.explain.sandbox.*",
    "gpulab.judge.*",
    "gpulab.sandbox.*",
]

# The lab's side, top to bottom: a folder imports only the folders below it
# (import-linter's layers contract; the standard-library helpers gpulab.fsutil,
# gpulab.safetree and gpulab.textsafe sit under them all).
LAB_LAYERS = [
    "gpulab.cli",
    "gpulab.tui",
    "gpulab.gradebook",
    "gpulab.lab",
    "gpulab.explain",
    "gpulab.gpu",
    "gpulab.course",
    "gpulab.wire",
]

# Of CHILD, those that import torch, triton or jax as they are imported; every
# other module's import is proven light by tests/test_import_hygiene.py.
HEAVY = [
    "gpulab.measure.microbench_kernels",
    "gpulab.measure.timing",
    "gpulab.judge.*",
    "gpulab.sandbox.*",
]
# Of HEAVY's packages, the modules whose import is light all the same, and
# proven so: the judge's main starts before torch and CUDA (and with it what
# it imports as it starts: its channel, its set-up, the file's read, the
# crash's words), its package's __init__ is a docstring.
LIGHT = [
    "gpulab.judge",
    "gpulab.judge.main",
    "gpulab.judge.channel",
    "gpulab.judge.crash",
    "gpulab.judge.prepared",
    "gpulab.judge.submission",
]

# The machinery that drives the graders (gpulab.judge, but for its graders
# package) never imports one: gpulab.judge.loader loads a grader by a
# declared exercise's name, so no module of the machinery is an exercise and
# no grader is machinery.
GRADERS = "gpulab.judge.graders.*"

# The pure layers every process may import: they import nothing of the
# processes' own folders (the judge, the sandbox, the lab).
DEVICE = ["gpulab.gpu.*", "gpulab.course.*", "gpulab.wire.*"]

# Edges a contract allows, each with why.
CORE_EXCEPTIONS = {
    "gpulab.cli -> gpulab.tui.app": "`gpulab` with no arguments starts the TUI through a lazy import",
    "gpulab.cli.commands.grade -> gpulab.tui.gradebook_app": "`gpulab grade view` starts the "
    "gradebook's view through a lazy import",
}
LAB_EXCEPTIONS = {
    "gpulab.cli.commands.dev_compile -> gpulab.measure.compile_info": "`gpulab dev compile`, a maintainers' tool, compiles with Triton in its own "
    "process (no GPU, no learner code)",
    "gpulab.cli.commands.dev_compile -> gpulab.measure.compile_specs": "the same tool's kernel list",
}


def modules() -> list[str]:
    """Every module under gpulab/, dotted."""
    out = []
    for path in sorted((ROOT / "gpulab").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out.append(".".join(parts))
    return out


def machinery() -> list[str]:
    """The judge's modules that drive the graders: gpulab.judge's modules
    but its package's own __init__ and the graders."""
    return [m for m in modules() if m.startswith("gpulab.judge.") and not covers(GRADERS, m)]


def covers(entry: str, module: str) -> bool:
    if entry == "gpulab.judge.*!":
        return (
            module.startswith("gpulab.judge.")
            and not covers(GRADERS, module)
            and (module != "gpulab.judge.main")
        )
    if entry.endswith(".*"):
        return module == entry[:-2] or module.startswith(entry[:-1])
    return module == entry


def _packages() -> set[str]:
    return {
        ".".join(p.relative_to(ROOT).parent.parts) for p in (ROOT / "gpulab").rglob("__init__.py")
    }


def contract_names(entries: list[str]) -> list[str]:
    """Entries as import-linter names: `package.*` is the package (import-linter
    counts its descendants in); a package named alone (its __init__) is left
    out, since import-linter would count its descendants in too."""
    packages = _packages()
    names: set[str] = set()
    for e in entries:
        whole = [m for m in modules() if covers(e, m)]
        if e.endswith(".*") and all(placed(entries, m) for m in whole):
            names.add(e[:-2])
        else:  # a folder with another list's folder inside: its own modules, one by one
            names.update(m for m in whole if placed(entries, m) and m not in packages)
    return sorted(names)


def _depth(entries: list[str], module: str) -> int:
    """How specific the most specific entry of `entries` covering `module` is
    (0: none covers it)."""
    return max((len(e.removesuffix(".*")) for e in entries if covers(e, module)), default=0)


def placed(entries: list[str], module: str) -> bool:
    """Whether the list `entries` (LAB, UI or CHILD) places `module`: it covers
    it, and no other list covers it more specifically (explain's plug-ins are
    CHILD inside a LAB folder)."""
    mine = _depth(entries, module)
    return mine > 0 and all(_depth(other, module) <= mine for other in (LAB, UI, CHILD))


def expand(entries: list[str]) -> list[str]:
    return [m for m in modules() if placed(entries, m)]


def light() -> list[str]:
    """Modules whose import must load nothing heavy (`__main__` runs the app)."""
    return [
        m
        for m in expand(LAB + CHILD)
        if (m in LIGHT or not any(covers(h, m) for h in HEAVY)) and not m.endswith("__main__")
    ]


def _toml_list(items: list[str], indent: str = "    ") -> str:
    return "[\n" + "".join(f'{indent}"{i}",\n' for i in items) + "]"


def contracts() -> str:
    """pyproject.toml's import-linter section, made from the lists above."""

    def ignored(exceptions: dict[str, str]) -> str:
        return (
            "[\n" + "".join(f'    "{edge}",  # {why}\n' for edge, why in exceptions.items()) + "]"
        )

    return f"""{BEGIN}
[tool.importlinter]
root_package = "gpulab"
include_external_packages = true

[[tool.importlinter.contracts]]
name = "The core never imports the UI"
type = "forbidden"
source_modules = {_toml_list(contract_names(LAB + CHILD))}
forbidden_modules = ["gpulab.tui", "textual", "textual_plotext"]
ignore_imports = {ignored(CORE_EXCEPTIONS)}

[[tool.importlinter.contracts]]
name = "The lab's process (UI, CLI, commands, runner, report, ...) never imports the grader, torch or triton"
type = "forbidden"
source_modules = {_toml_list(contract_names(LAB + UI))}
forbidden_modules = ["gpulab.judge", "gpulab.sandbox", "torch", "triton"]
ignore_imports = {ignored(LAB_EXCEPTIONS)}

[[tool.importlinter.contracts]]
name = "The lab's folders, top to bottom: none imports a folder above it"
type = "layers"
layers = {_toml_list(LAB_LAYERS)}
ignore_imports = {ignored(CORE_EXCEPTIONS)}

[[tool.importlinter.contracts]]
name = "The pure layers (datasheets and roofline, the course, the messages) never import the grader"
type = "forbidden"
source_modules = {_toml_list(contract_names(DEVICE))}
forbidden_modules = ["gpulab.judge", "gpulab.sandbox"]

[[tool.importlinter.contracts]]
name = "The grading machinery never imports a grader"
type = "forbidden"
source_modules = {_toml_list(machinery())}
forbidden_modules = ["gpulab.judge.graders"]
{END}"""


BEGIN = "# --- import-linter contracts: made by `python -m tests.layers` from tests/layers.py"
END = "# --- end of the contracts made by tests/layers.py"


def current_block(text: str) -> str | None:
    m = re.search(re.escape(BEGIN) + r".*?" + re.escape(END), text, re.S)
    return m.group(0) if m else None


def write() -> None:
    path = ROOT / "pyproject.toml"
    text = path.read_text(encoding="utf-8")
    old = current_block(text)
    if old is None:
        raise SystemExit(f"{path}: no block between\n{BEGIN}\nand\n{END}")
    path.write_text(text.replace(old, contracts()), encoding="utf-8")


if __name__ == "__main__":
    write()
    print("pyproject.toml: contracts rewritten", file=sys.stderr)
