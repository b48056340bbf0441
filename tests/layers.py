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
# importing it loads nothing heavy.
LAB = [
    "gpulab",
    "gpulab.__main__",
    "gpulab.check",
    "gpulab.course",
    "gpulab.perf",
    "gpulab.check.result",
    "gpulab.check.child",
    "gpulab.course.citations",
    "gpulab.cli",
    "gpulab.cli.options",
    "gpulab.cli.grade_options",
    "gpulab.cli.webserve",
    "gpulab.cli.commands.*",
    "gpulab.course.content",
    "gpulab.course.exercise_folder",
    "gpulab.course.exercise_template",
    "gpulab.check.crashes",
    "gpulab.device",
    "gpulab.device.ceilings",
    "gpulab.device.devinfo",
    "gpulab.device.gpulock",
    "gpulab.device.microbench_runner",
    "gpulab.device.nvml",
    "gpulab.device.probe",
    "gpulab.diagnosis",
    "gpulab.diagnosis.candidates",
    "gpulab.diagnosis.findings",
    "gpulab.diagnosis.kinds",
    "gpulab.diagnosis.nsight",
    "gpulab.diagnosis.render",
    "gpulab.diagnosis.rules",
    "gpulab.diagnosis.traffic",
    "gpulab.diagnosis.ttir",
    "gpulab.check.events",
    "gpulab.check.frames",
    "gpulab.check.frames_other",
    "gpulab.check.kernel_binary",
    "gpulab.fsutil",
    "gpulab.course.glossary",
    "gpulab.perf.hardware",
    "gpulab.perf.hardware_doc",
    "gpulab.perf.hardware_model",
    "gpulab.check.install_hint",
    "gpulab.course.known_gaps",
    "gpulab.course.sections",
    "gpulab.check.plan",
    "gpulab.check.protocol",
    "gpulab.check.report",
    "gpulab.perf.costmodel",
    "gpulab.perf.loadmap",
    "gpulab.perf.counters",
    "gpulab.perf.roadmap",
    "gpulab.perf.roofline",
    "gpulab.perf.roofline_plot",
    "gpulab.check.runner",
    "gpulab.safetree",
    "gpulab.perf.serving",
    "gpulab.perf.serving_models",
    "gpulab.perf.serving_view",
    "gpulab.course.side_by_side",
    "gpulab.course.state",
    "gpulab.check.status",
    "gpulab.textsafe",
    "gpulab.perf.traces",
    "gpulab.perf.units",
    "gpulab.check.watcher",
    "gpulab.course.workspace",
    # The instructor's side: the gradebook, its workers (which grade through
    # gpulab.check.runner, the judge in a child process) and executors.
    "gpulab.gradebook.*",
]

# The UI: the lab's process too, and the only package that imports textual.
UI = ["gpulab.tui.*"]

# Child processes only (`python -m ...`: the judge, the sandbox, the bench,
# the microbenchmarks, the profile target, the torch probe): they may import
# torch, triton and the grader, and never the UI.
CHILD = [
    "gpulab.perf.bench",
    "gpulab.perf.compile_info",
    "gpulab.perf.debug_case",
    "gpulab.perf.counter_cases",
    "gpulab.course.compile_specs",
    "gpulab.device.microbench",
    "gpulab.device.microbench_kernels",
    "gpulab.device.microbench_measure",
    "gpulab.device.timing",
    "gpulab.device.torch_probe",
    "gpulab.device.vmm",
    "gpulab.diagnosis.case_facts",
    "gpulab.diagnosis.cases",
    "gpulab.diagnosis.judge_side",
    "gpulab.diagnosis.nsight_step",
    "gpulab.diagnosis.sandbox_profile",
    "gpulab.diagnosis.sandbox_side",
    "gpulab.diagnosis.trace",
    "gpulab.judge.*",
    "gpulab.perf.profiling",
    "gpulab.sandbox.*",
]

# Of CHILD, those that import torch, triton or jax as they are imported; every
# other module's import is proven light by tests/test_import_hygiene.py.
HEAVY = [
    "gpulab.device.microbench_kernels",
    "gpulab.device.timing",
    "gpulab.judge.*",
    "gpulab.sandbox.*",
]
# Of HEAVY's packages, the modules whose import is light all the same, and
# proven so: the judge's main starts before torch and CUDA, its package's
# __init__ is a docstring.
LIGHT = ["gpulab.judge", "gpulab.judge.main"]

# The machinery that drives the graders (gpulab.judge, but for its graders
# package) never imports one: gpulab.judge.loader loads a grader by a
# declared exercise's name, so no module of the machinery is an exercise and
# no grader is machinery.
GRADERS = "gpulab.judge.graders.*"

# The grader depends on the device wing (timing, ceilings, the GPU lock),
# never the other way round.
DEVICE = ["gpulab.device.*"]

# Edges a contract allows, each with why.
CORE_EXCEPTIONS = {
    "gpulab.cli -> gpulab.tui.app": "`gpulab` with no arguments starts the TUI through a lazy import",
    "gpulab.cli.commands.grade -> gpulab.tui.gradebook_app": "`gpulab grade view` starts the "
    "gradebook's view through a lazy import",
}
LAB_EXCEPTIONS = {
    "gpulab.cli.commands.dev_compile -> gpulab.perf.compile_info": "`gpulab dev compile`, a maintainers' tool, compiles with Triton in its own "
    "process (no GPU, no learner code)",
    "gpulab.cli.commands.dev_compile -> gpulab.course.compile_specs": "the same tool's kernel list",
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
    return sorted(
        e[:-2] if e.endswith(".*") else e for e in entries if e.endswith(".*") or e not in packages
    )


def expand(entries: list[str]) -> list[str]:
    return [m for m in modules() if any(covers(e, m) for e in entries)]


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
name = "The device wing never imports the grader"
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
