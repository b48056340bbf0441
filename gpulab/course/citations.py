"""Every file the course cites must ship with it (a check of `gpulab dev check`).

A learner who reads "see docs/hardware.md" must find that file: a lesson that
cites a document left behind in the authors' notes teaches a number nobody
can trace. This module finds the path-looking references in the lessons, the
manifest's hints, the glossary, the docs, the starters and (in a source
checkout) gpulab's own modules and data, and names each one that is not in the repo.

What counts as a citation (so `args.json`, `config.json` or `trace.json` in
prose do not): a path ending in .md, .py, .json or .toml that starts with one
of the repo's top-level folders (`docs/hardware.md`, `benchmarks/h200.json`),
one that climbs out of its folder (`../shared/guide/GRADING.md`), or a bare
document name in capitals (`BENCHMARKS.md`, `HARDWARE.md`), which is resolved
at the repo root as the project writes them.

No heavy imports, no UI: this is core.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# Top-level folders of the repo a citation may start with.
TOP = ("docs", "lessons", "exercises", "kernels", "gpulab", "benchmarks", "scripts", "tests")

# Documents promised but not written yet: a citation of one is reported as
# pending, not as a failure, until the file lands. Remove the entry then (a
# test fails while an entry names a file that exists).
PENDING: dict[str, str] = {}

_REF = re.compile(r"(?<![\w/.<>-])((?:\.\./)*(?:[\w.-]+/)*[\w.-]+\.(?:md|py|json|toml))(?![\w/])")
_CAPS_DOC = re.compile(r"[A-Z][A-Z0-9_]*\.md")


@dataclass(frozen=True)
class Citation:
    source: Path  # the citing file, relative to the root
    line: int
    ref: str  # as written
    target: Path | None  # resolved, relative to the root; None if outside the repo

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


def _is_citation(ref: str) -> bool:
    if ref.startswith("../"):
        return True
    if "/" in ref:
        return ref.split("/", 1)[0] in TOP
    return bool(_CAPS_DOC.fullmatch(ref))


def _resolve(ref: str, source: Path, root: Path) -> Path | None:
    base = (root / source).parent if ref.startswith("../") else root
    target = (base / ref).resolve()
    try:
        return target.relative_to(root.resolve())
    except ValueError:
        return None  # climbs out of the repo


def citing_files(root: Path) -> list[Path]:
    """The files whose citations are checked, relative to `root`."""
    patterns = [
        "lessons/*/lesson.md",
        "lessons/glossary.toml",
        "lessons/manifest.toml",
        "docs/*.md",
        "exercises/*.py",
    ]
    if (root / "gpulab").is_dir():  # a source checkout; a wheel's content has no modules
        patterns += ["gpulab/**/*.py", "gpulab/data/*.toml"]  # the hardware table cites too
    found: list[Path] = []
    for pattern in patterns:
        found += sorted(p.relative_to(root) for p in root.glob(pattern) if p.is_file())
    # This module's own docstring shows examples of citations, not citations.
    return [p for p in found if p != Path("gpulab/course/citations.py")]


def citations(root: Path, files: list[Path] | None = None) -> list[Citation]:
    """Every citation in the checked files, in file and line order."""
    out = []
    for rel in files if files is not None else citing_files(root):
        try:
            text = (root / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            for m in _REF.finditer(line):
                ref = m.group(1)
                if _is_citation(ref):
                    out.append(Citation(rel, n, ref, _resolve(ref, rel, root)))
    return out


def _suggest(ref: str, root: Path) -> str:
    name = Path(ref).name.lower()
    for candidate in (*PENDING, *(str(p.relative_to(root)) for p in (root / "docs").glob("*.md"))):
        if Path(candidate).name.lower() == name:
            return candidate
    return ""


def check(root: Path) -> tuple[list[str], list[str]]:
    """(problems, pending): a line for each citation of a file that is not in the repo.

    A citation of a pending document (PENDING), or of an old name whose
    replacement is pending (GRADING.md for docs/grading.md), is pending
    rather than a problem.
    """
    root = Path(root)
    problems, pending = [], []
    for c in citations(root):
        if c.target is not None and (root / c.target).exists():
            continue
        target = str(c.target) if c.target is not None else ""
        better = _suggest(c.ref, root)
        if target in PENDING or better in PENDING:
            key = target if target in PENDING else better
            hint = "" if c.ref == key else f" (should cite {key})"
            pending.append(f"{c.where}: cites {c.ref}{hint}, pending: {PENDING[key]}")
            continue
        why = "outside the repo" if c.target is None else "not in the repo"
        hint = f"; the shipped document is {better}" if better else ""
        problems.append(f"{c.where}: cites {c.ref}, {why}{hint}")
    return problems, pending


__all__ = ["PENDING", "TOP", "Citation", "check", "citations", "citing_files"]
