"""What to run when a module an exercise needs is missing: one answer for the
CLI (`gpulab check`), the TUI's notice and the grader's message.

The answer follows gpulab's own installed metadata rather than a table kept
by hand: a module that gpulab lists as a dependency is missing because the
install is incomplete or stale (reinstall gpulab), one that an extra brings
needs that extra (`pip install 'gpulab[jax]'`), anything else is a plain
`pip install`. So moving a package between the extras and the dependencies
in pyproject.toml changes the advice with no edit here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

# Modules whose package has another name, or that arrive with another package.
PACKAGE_OF = {"jaxlib": "jax", "yaml": "pyyaml", "pynvml": "nvidia-ml-py"}
REINSTALL = "reinstall gpulab: `pip install .` in the gpulab folder"
# Extras for development, never the advice to a learner.
NOT_FOR_LEARNERS = {"test", "dev"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def gpulab_requirements() -> list[str] | None:
    """gpulab's declared requirements (PEP 508 strings), None when gpulab runs
    from a source folder without being installed."""
    from importlib import metadata

    try:
        return list(metadata.requires("gpulab") or [])
    except metadata.PackageNotFoundError:
        return None


def install_hint(module: str, requires: Iterable[str] | None = None) -> str:
    """The command (and why) that brings `module`; `requires` defaults to
    gpulab's installed metadata."""
    package = PACKAGE_OF.get(module, module)
    reqs = gpulab_requirements() if requires is None else list(requires)
    if reqs is None:  # a source checkout: `pip install .` installs what it lists
        return "install gpulab with its dependencies: `pip install .` in the gpulab folder"
    extras = []
    for req in reqs:
        name, _, marker = req.partition(";")
        m = re.match(r"\s*([A-Za-z0-9._-]+)", name)
        if not m or _norm(m.group(1)) != _norm(package):
            continue
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", marker)
        if extra is None:
            return f"{package} is one of gpulab's dependencies; {REINSTALL}"
        if extra.group(1) not in NOT_FOR_LEARNERS:
            extras.append(extra.group(1))
    if extras:
        return f"`pip install 'gpulab[{extras[0]}]'`"
    return f"`pip install {package}`"


def missing_message(
    exercise: str, missing: Sequence[str], requires: Iterable[str] | None = None
) -> str:
    """One line: what the exercise needs and how to get it."""
    reqs = None if requires is None else list(requires)
    hints = list(dict.fromkeys(install_hint(m, reqs) for m in missing))
    return f"exercise '{exercise}' needs {', '.join(missing)}: {'; '.join(hints)}"
