"""An exercise is one unit (issue 45): declared in lessons/manifest.toml and
graded by its module in gpulab/judge/graders/; nothing else in gpulab names
it. What a tool needs to know of an exercise is in its manifest entry (a
field, read through gpulab.course.content) or in its grader (a hook, loaded
through gpulab.judge.loader), and the rest of gpulab finds it there by tool
or by field, never by the exercise's name.

This scans gpulab/ (the graders aside) for an exercise's name as a string of
its own (a literal, a dict key, a comparison), as a grader's module or file
(`gpulab.judge.graders.x`, `kernels/x.py`), and for a grader imported by
name. Prose (docstrings, messages, comments) is not scanned: it names
exercises to people, as the lessons do. A few words are an exercise's name
and something else too; ALLOWED lists where, and why.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from gpulab.course.content import load_course
from gpulab.judge import loader

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "gpulab"
GRADERS = PACKAGE / "judge" / "graders"

_BANDWIDTH = (
    "the GPU's memory bandwidth (a datasheet field, a roof, a measurement), not lesson 01's"
)
_MICROBENCH = "a microbenchmark's group (the copy and matmul ceilings of gpulab.measure.microbench)"
# (file, name): why this string is not the exercise. Keep it short: a new
# entry is a word that is also an exercise's name, never an exercise.
ALLOWED = {
    ("gpulab/cli/commands/hardware.py", "bandwidth"): _BANDWIDTH,
    ("gpulab/explain/judge/plugin.py", "bandwidth"): _BANDWIDTH,
    ("gpulab/explain/nsight.py", "bandwidth"): _BANDWIDTH,
    ("gpulab/explain/rules.py", "bandwidth"): _BANDWIDTH,
    ("gpulab/explain/traffic.py", "bandwidth"): _BANDWIDTH,
    ("gpulab/gpu/costmodel.py", "bandwidth"): "the roof a cost estimate is bound by",
    ("gpulab/gpu/hardware_doc.py", "bandwidth"): _BANDWIDTH,
    ("gpulab/gpu/hardware_model.py", "bandwidth"): _BANDWIDTH,
    ("gpulab/gpu/roadmap.py", "bandwidth"): _BANDWIDTH,
    ("gpulab/gpu/roofline.py", "bandwidth"): _BANDWIDTH,
    ("gpulab/lab/microbench_runner.py", "bandwidth"): _MICROBENCH,
    ("gpulab/lab/microbench_runner.py", "matmul"): _MICROBENCH,
    ("gpulab/measure/microbench.py", "bandwidth"): _MICROBENCH,
    ("gpulab/measure/microbench.py", "matmul"): _MICROBENCH,
    ("gpulab/measure/microbench_measure.py", "bandwidth"): _MICROBENCH,
    ("gpulab/measure/microbench_measure.py", "matmul"): _MICROBENCH,
    ("gpulab/gradebook/config.py", "softmax"): "the example in gradebook.toml's commented "
    "template, written only when the course has no ready exercise to name instead",
}


def exercise_names() -> set[str]:
    """Every exercise the course declares, and every grader's name."""
    return set(load_course(REPO).exercise_ids) | set(loader.grader_names())


def mentions(path: Path, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) for each place `path` names an exercise in code."""
    as_file = re.compile(r"(?:gpulab\.judge\.graders\.|graders/|kernels/|exercises/)(\w+)(?:\.py)?")
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            whole = as_file.fullmatch(node.value)
            name = whole.group(1) if whole else node.value
            if name in names:
                found.append((node.lineno, name))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(loader.PACKAGE):
            module = node.module or ""
            found += [
                (node.lineno, n)
                for n in (module.rpartition(".")[2], *(a.name for a in node.names))
                if n in names
            ]
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name.rpartition(".")[2])
                for a in node.names
                if a.name.startswith(f"{loader.PACKAGE}.")
            ]
    return found


def may_name(text: str, names: set[str]) -> bool:
    """Whether `text` could name an exercise in code (quoted, as a path, a
    grader's module): parsing every module costs seconds on a busy CI box,
    so only these are parsed."""
    alt = "|".join(sorted(names, key=len, reverse=True))
    return bool(
        re.search(
            rf"""[\"'/.](?:{alt})(?:[\"']|\.py\b)|judge\.graders(?:\.|\s+import\s+\(?\s*)(?:{alt})\b""",
            text,
        )
    )


def scan(names: set[str]) -> dict[tuple[str, str], list[int]]:
    """{(file, name): lines} over gpulab/, the graders aside."""
    out: dict[tuple[str, str], list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.is_relative_to(GRADERS) or not may_name(path.read_text(encoding="utf-8"), names):
            continue
        rel = path.relative_to(REPO).as_posix()
        for line, name in mentions(path, names):
            out.setdefault((rel, name), []).append(line)
    return out


def test_nothing_outside_the_manifest_and_the_graders_names_an_exercise():
    found = scan(exercise_names())
    named = sorted(
        f"{file}:{line}: '{name}'"
        for (file, name), lines in found.items()
        if (file, name) not in ALLOWED
        for line in lines
    )
    assert not named, (
        "these name an exercise: move what they know of it to the exercise's manifest "
        "entry (a field) or its grader (a hook the tool loads), and find it by tool or "
        "field (tests/test_exercise_names.py says why):\n" + "\n".join(named)
    )
    stale = sorted(f"{file}: '{name}'" for file, name in ALLOWED if (file, name) not in found)
    assert not stale, f"ALLOWED lists what gpulab no longer says; remove: {stale}"


def test_the_scan_finds_the_ways_code_names_an_exercise(tmp_path):
    code = tmp_path / "x.py"
    code.write_text(
        '"""softmax in prose is fine."""\n'
        "from gpulab.judge.graders import matmul\n"
        "import gpulab.judge.graders.rope\n"
        'if exercise == "softmax":  # a comment naming matmul is fine\n'
        '    path = "kernels/flash_attention.py"\n'
        'SECTIONS = {("extra_bytes", "bandwidth"): f"{x} rmsnorm"}\n'
        "print(f\"check {'triton_mask'}\")\n"
    )
    names = {"softmax", "matmul", "rope", "flash_attention", "bandwidth", "rmsnorm", "triton_mask"}
    lines = code.read_text().splitlines()
    assert [may_name(line, names) for line in lines] == [False] + [True] * 6
    assert sorted(mentions(code, names)) == [
        (2, "matmul"),
        (3, "rope"),
        (4, "softmax"),
        (5, "flash_attention"),
        (6, "bandwidth"),
        (7, "triton_mask"),
    ]
