"""A lesson's steps: the manifest schema, the course model, the CLI and the
state, on a copy of the course with a made-up step (no grading: cheap)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpulab.course.content import load_course

REPO = Path(__file__).resolve().parents[2]

STEP = """
[[lesson.step]]
exercise = "triad_first"
title = "A first triad"
function = "triad"
hints = ["one", "two", "three"]
"""


def _content(tmp_path: Path, after: str = 'id = "01_gpu_architecture_tour"', step: str = STEP):
    """A copy of the course whose lesson 01 has one step before its exercise:
    `step` is inserted at the end of lesson 01's table."""
    root = tmp_path / "content"
    for d in ("lessons", "exercises", "kernels"):
        shutil.copytree(REPO / d, root / d)
    manifest = root / "lessons" / "manifest.toml"
    text = manifest.read_text()
    start = text.index(after)
    end = text.index("[[lesson]]", start)
    # The lesson's own steps left out: `step` is its only one here.
    own = text.find("[[lesson.step]]", start, end)
    keep = text[:own] if own >= 0 else text[:end]
    manifest.write_text(keep + step.lstrip("\n") + "\n" + text[end:])
    (root / "exercises" / "triad_first.py").write_text("# TODO\ndef triad(x, y, a):\n    pass\n")
    return root


def test_steps_come_before_the_final_exercise(tmp_path):
    root = _content(tmp_path)
    course = load_course(root)
    assert not course.warnings, course.warnings
    first = course.find("triad_first")
    final = course.find("bandwidth")
    assert [e.exercise for e in course.lesson_exercises(final)] == ["triad_first", "bandwidth"]
    # Then lesson 02's first exercise (a step of its own, or softmax).
    lesson02 = course.lesson_exercises(course.find("softmax"))[0].exercise
    assert course.exercise_ids[:3] == ["triad_first", "bandwidth", lesson02]
    # One entry per lesson still: its final exercise.
    assert len(course.lessons) == 9 and course.lessons[0] is final
    assert course.find("1") is final and course.find("01_gpu_architecture_tour") is final
    assert first.id == final.id and first.index == final.index and first.text() == final.text()
    assert first.is_step and not final.is_step
    assert (first.step_label, final.step_label) == ("step 1 of 2", "step 2 of 2")
    assert (first.exercise_title, final.exercise_title) == ("A first triad", final.title)
    # Inherited from the lesson when a step leaves them out.
    assert first.requires == final.requires and first.kind == final.kind and first.ready
    assert first.starter_path == root / "exercises" / "triad_first.py"
    assert first.reference_path == root / "kernels" / "triad_first.py"
    assert course.next_exercise(first) is final
    assert course.next_exercise(final).exercise == lesson02
    assert course.next_exercise(course.exercises[-1]) is None


def test_a_lesson_without_steps_is_its_one_exercise(course):
    lesson = course.find("serving_roofline")
    assert course.lesson_exercises(lesson) == (lesson,)
    assert lesson.step_label == "" and not lesson.is_step and lesson.step_count == 1


@pytest.mark.parametrize(
    "step,words",
    [
        (STEP.replace('title = "A first triad"\n', ""), ["step #1 ('triad_first')", "'title'"]),
        (STEP.replace("hints = [", 'hintz = ["x"]\nhints = ['), ["field 'hintz'"]),
        (STEP.replace('"one", ', ""), ["'hints' needs three levels"]),
        (STEP.replace('function = "triad"\n', 'kind = "gpu"\n'), ["'kind'", "'gpu'"]),
        (STEP.replace('"triad_first"', '"../x"'), ["'exercise'", "identifier"]),
    ],
)
def test_a_broken_step_is_named_and_the_rest_works(tmp_path, step, words):
    course = load_course(_content(tmp_path, step=step))
    assert course.warnings
    broken = course.lesson_exercises(course.find("bandwidth"))[0]
    assert broken.error and not broken.ready, broken
    for w in words:
        assert w in broken.error, broken.error
    assert "manifest.toml lesson '01_gpu_architecture_tour'" in broken.error
    assert course.find("bandwidth").ready and not course.find("bandwidth").error
    assert course.find("softmax").ready


def test_an_exercise_id_listed_twice_is_named(tmp_path):
    course = load_course(_content(tmp_path, step=STEP.replace('"triad_first"', '"softmax"')))
    first, second = (e for e in course.exercises if e.exercise == "softmax")
    assert not first.error and first.id == "01_gpu_architecture_tour"
    assert "exercise 'softmax' is listed twice" in second.error and not second.ready
    assert course.find("bandwidth").ready


def test_a_steps_missing_starter_is_named(tmp_path):
    root = _content(tmp_path)
    (root / "exercises" / "triad_first.py").unlink()
    broken = load_course(root).find("triad_first")
    assert "starter" in broken.error and "triad_first.py is missing" in broken.error


def test_step_must_be_an_array_of_tables(tmp_path):
    root = _content(tmp_path, step='step = "no"\n', after='id = "01_gpu_architecture_tour"')
    manifest = root / "lessons" / "manifest.toml"
    text = manifest.read_text().replace('step = "no"\n', "")
    # a plain key must sit with the lesson's own fields, before any sub-table
    text = text.replace(
        'id = "01_gpu_architecture_tour"\n', 'id = "01_gpu_architecture_tour"\nstep = "no"\n'
    )
    manifest.write_text(text)
    lesson = load_course(root).lessons[0]
    assert "field 'step' must be an array of tables" in lesson.error


def test_an_unknown_lesson_field_is_named(tmp_path):
    root = _content(tmp_path, step="")
    manifest = root / "lessons" / "manifest.toml"
    manifest.write_text(
        manifest.read_text().replace(
            'id = "02_triton_101_softmax"\n', 'id = "02_triton_101_softmax"\nfuncion = "x"\n'
        )
    )
    lesson = load_course(root).lessons[1]
    assert "field 'funcion' is not a field" in lesson.error


def test_list_shows_steps_under_their_lesson(tmp_path, run_gpulab):
    from tests.conftest import gpulab_env

    root = _content(tmp_path)
    env = gpulab_env(tmp_path / "ws", GPULAB_CONTENT=str(root), COLUMNS="200")
    r = run_gpulab("list", "--json", env=env)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["lessons"]
    first = rows[0]
    assert first["exercise"] == "bandwidth"  # the lesson's row: its final exercise
    assert [e["exercise"] for e in first["exercises"]] == ["triad_first", "bandwidth"]
    assert first["exercises"][0]["title"] == "A first triad"
    assert first["exercises"][0]["status"] == "not started"
    r = run_gpulab("list", env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    i = next(n for n, line in enumerate(lines) if "01.1" in line)
    assert "A first triad" in lines[i] and "triad_first" in lines[i]
    assert "01.2" in lines[i + 1] and "bandwidth" in lines[i + 1]
    assert "0 of 2" in lines[i - 1]


def test_old_progress_keeps_working_with_steps(tmp_path, run_gpulab):
    """A state.json written before lessons had steps: nothing in it is lost
    or repaired, the final exercises keep their progress and the new steps
    start not started."""
    from tests.conftest import gpulab_env

    root = _content(tmp_path)
    ws = tmp_path / "ws"
    (ws / ".gpulab").mkdir(parents=True)
    old = {
        "version": 1,
        "exercises": {
            "bandwidth": {
                "attempts": [{"time": "2026-01-01T00:00:00", "passed": True, "summary": "ok"}],
                "status": "passed",
                "hints": 2,
                "grade": "B",
            },
            "softmax": {"status": "failed", "attempts": []},
        },
        "settings": {"watch": True},
        "last_lesson": "01_gpu_architecture_tour",
    }
    (ws / ".gpulab" / "state.json").write_text(json.dumps(old))
    env = gpulab_env(ws, GPULAB_CONTENT=str(root))
    r = run_gpulab("list", "--json", env=env)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    row = json.loads(r.stdout)["lessons"][0]
    assert (row["status"], row["grade"], row["attempts"]) == ("passed", "B", 1)
    assert [(e["exercise"], e["status"]) for e in row["exercises"]] == [
        ("triad_first", "not started"),
        ("bandwidth", "passed"),
    ]
    r = run_gpulab("hint", "triad_first", env=env)
    assert r.returncode == 0 and "one" in r.stdout, r.stderr
    state = json.loads((ws / ".gpulab" / "state.json").read_text())
    assert state["exercises"]["bandwidth"] == old["exercises"]["bandwidth"]
    assert state["exercises"]["softmax"] == old["exercises"]["softmax"]
    assert state["exercises"]["triad_first"] == {"hints": 1}
    assert state["settings"] == old["settings"] and state["last_lesson"] == old["last_lesson"]
    r = run_gpulab("where", "triad_first", env=env)
    assert r.returncode == 0 and Path(r.stdout.strip()) == ws / "exercises" / "triad_first.py"
    assert "TODO" in Path(r.stdout.strip()).read_text()


def test_a_pass_names_the_next_exercise(course):
    from gpulab.cli.commands.check import next_step

    assert next_step(course, course.find("softmax_row")) == (
        "Next: Rows longer than a block (step 2 of 3 of lesson 02): gpulab check softmax_wide"
    )
    assert next_step(course, course.find("softmax")) == (
        "Next: One tile (lesson 03, step 1 of 3): gpulab check matmul_tile"
    )
    assert next_step(course, course.exercises[-1]) == ""
