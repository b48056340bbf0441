"""The judge loads a grader only for an exercise the course manifest
declares, from gpulab.judge.graders; the machinery beside it (gpulab.judge) is
never an exercise, however a request names it."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import sys
from pathlib import Path

import pytest

from gpulab.course.content import load_course
from gpulab.judge import loader

REPO = Path(__file__).resolve().parents[2]
MACHINERY = sorted(p.stem for p in (REPO / "gpulab" / "judge").glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("name", ["speed", "harness", "kernel", "learner", "loader", "interface"])
def test_a_module_of_the_machinery_is_refused_not_loaded(name, monkeypatch):
    def never(module: str, *args: object) -> None:
        raise AssertionError(f"{module} was imported")

    monkeypatch.setattr(importlib, "import_module", never)
    with pytest.raises(loader.UnknownExercise, match=f"'{name}' is not an exercise of this course"):
        loader.load(name)


@pytest.mark.parametrize("name", ["", "__init__", "../speed", "graders.softmax", "softmax.py"])
def test_names_that_are_no_exercise_are_refused(name):
    with pytest.raises(loader.UnknownExercise, match="not an exercise of this course"):
        loader.load(name)


def test_a_check_of_speed_is_refused_with_words(tmp_path):
    from gpulab.judge.harness import grade_request
    from gpulab.wire.check_request import CheckRequest

    before = set(sys.modules)
    file = tmp_path / "speed.py"
    file.write_text("def speed(x):\n    return x\n")
    request = CheckRequest(exercise="speed", function="speed", file=str(file))
    result = grade_request(request, "cpu", channel=None, sandbox=None)  # type: ignore[arg-type]
    assert result.status == "error"
    assert "'speed' is not an exercise of this course" in result.summary
    assert "gpulab.judge.graders.speed" not in set(sys.modules) - before


def test_a_declared_exercise_without_a_grader_is_refused():
    course = load_course()
    made_up = dataclasses.replace(course.exercises[0], exercise="made_up")
    course = dataclasses.replace(course, all_exercises=(*course.exercises, made_up))
    with pytest.raises(loader.UnknownExercise, match="no grader for exercise 'made_up' yet"):
        loader.load("made_up", course=course)


def test_the_graders_are_exactly_the_manifests_exercises():
    declared = set(load_course().exercise_ids)
    assert set(loader.grader_names()) == declared
    # No module is both an exercise's grader and machinery.
    assert not declared & set(MACHINERY)


def test_every_grader_defines_grade_and_the_kernel_ones_their_cases_and_spec():
    from gpulab.explain.kinds import explained

    for name in loader.grader_names():
        tree = ast.parse((loader.FOLDER / f"{name}.py").read_text(encoding="utf-8"))
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert "grade" in defined, name
        if name in explained():  # gpulab.judge.interface.TimedGrader
            assert {"timing_cases", "kernel_spec"} <= defined, name


# For the tools of the manifest that reach into a grader, the hook each
# covered grader provides (gpulab.judge.interface).
HOOKS = {"compile": "COMPILE_SPECS", "counters": "COUNTER_CASES", "profile": "profile_step"}


def test_a_grader_has_a_tools_hook_exactly_when_the_manifest_names_the_tool():
    course = load_course()
    for name in loader.grader_names():
        tree = ast.parse((loader.FOLDER / f"{name}.py").read_text(encoding="utf-8"))
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)} | {
            t.id
            for n in tree.body
            if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Name)
        }
        tools = course.find(name).tools
        for tool, hook in HOOKS.items():
            assert (hook in defined) == (tool in tools), (
                f"{name}: the manifest's tools {'name' if tool in tools else 'omit'} "
                f"{tool!r}, its grader {'lacks' if hook not in defined else 'has'} {hook}"
            )


def test_a_declared_exercise_loads_its_grader():
    grader = loader.load("serving_roofline")
    assert grader.__name__ == "gpulab.judge.graders.serving_roofline"  # type: ignore[attr-defined]
