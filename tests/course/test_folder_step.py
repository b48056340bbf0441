"""A folder exercise as a step of a manifest lesson (issue 45): a
[[lesson.step]] that says `folder = "..."` takes its fields from the
folder's exercise.toml, its text from its lesson.md, its starter and
reference from its files; the judge declares it, hides it from the
sandbox and grades it from its spec.py, as it does a listed folder.

Two real checks in all (the last test: `gpulab dev check`'s starter and
reference); the rest reads the course without a sandbox."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from gpulab.course.content import load_course
from tests.conftest import gpulab_env

# Lesson 01: a written-out step, the folder step, then the lesson's own
# exercise. Nothing here is ready but the folder: no starters to write.
MANIFEST = """
[[lesson]]
id = "01_first"
title = "A first lesson"
exercise = "first"
status = "coming"

[[lesson.step]]
exercise = "warmup"
title = "A warm-up"
status = "coming"

[[lesson.step]]
__FOLDER_STEP__

[[lesson]]
id = "02_second"
title = "A second lesson"
exercise = "second"
status = "coming"
"""


def course_with(tmp_path: Path, folder_step: str = 'folder = "exercises/gelu"') -> Path:
    """A course (its manifest, lesson 01's text) whose lesson 01 has
    `folder_step` as its second step; the folder made as `gpulab dev
    new-exercise gelu --dir <course>/exercises` makes it."""
    from gpulab.cli.commands import dev_new

    root = tmp_path / "course"
    (root / "lessons" / "01_first").mkdir(parents=True)
    (root / "lessons" / "01_first" / "lesson.md").write_text("# A first lesson\n")
    manifest = MANIFEST.replace("__FOLDER_STEP__", folder_step)
    (root / "lessons" / "manifest.toml").write_text(manifest)
    args = argparse.Namespace(name="gelu", dir=str(root / "exercises"))
    assert dev_new.run(args) == 0
    return root


def test_a_folder_is_a_step_of_its_lesson(tmp_path, capsys):
    root = course_with(tmp_path)
    folder = root / "exercises" / "gelu"
    course = load_course(root)
    assert not course.warnings, course.warnings
    gelu, first = course.find("gelu"), course.find("first")
    assert gelu is not None and first is not None
    # Step 2 of its lesson, in the manifest's order; the lessons are still two.
    assert course.exercise_ids == ["warmup", "gelu", "first", "second"]
    assert [e.exercise for e in course.lesson_exercises(first)] == ["warmup", "gelu", "first"]
    assert [le.exercise for le in course.lessons] == ["first", "second"]
    assert (gelu.id, gelu.index, gelu.title) == ("01_first", 0, "A first lesson")
    assert gelu.is_step and gelu.step_label == "step 2 of 3" and gelu.position == 1
    assert course.next_exercise(course.find("warmup")) is gelu
    assert course.next_exercise(gelu) is first
    # Its fields are the folder's exercise.toml's, checked as a folder lesson's.
    assert gelu.ready and not gelu.error and gelu.folder == folder
    assert (gelu.exercise_title, gelu.function, gelu.kind) == (
        "GELU, one element a lane",
        "gelu",
        "memory",
    )
    assert (gelu.bytes, gelu.flops, gelu.requires, gelu.tools) == (
        "2*N*elt",
        "8*N",
        ("triton",),
        ("explain",),
    )
    assert len(gelu.hints) == 3
    # Its text, starter and reference are the folder's; the other steps' text is the lesson's.
    assert gelu.text() == (folder / "lesson.md").read_text()
    assert course.find("warmup").text() == first.text() == "# A first lesson\n"
    assert (gelu.starter_path, gelu.reference_path) == (
        folder / "starter.py",
        folder / "reference.py",
    )
    # The lab's sidebar and Lesson pane show it as step 2 of the lesson, with its text.
    from gpulab.tui.lesson_pane import lesson_markdown
    from gpulab.tui.sidebar import step_prompt
    from gpulab.wire.status import Status

    assert step_prompt(gelu, Status.NOT_STARTED, "").plain.endswith("2. GELU, one element a lane")
    shown = lesson_markdown(gelu)
    assert shown.startswith("> **Step 2 of 3: GELU, one element a lane** (`gelu`).")
    assert shown.endswith((folder / "lesson.md").read_text())
    # The judge declares it, grades it from its folder and hides the folder
    # from the sandbox; the gradebook grades it as the course declares it.
    from gpulab.course.exercise_folder import registered
    from gpulab.gradebook.config import load_config
    from gpulab.judge import loader

    assert loader.check("gelu", str(root)) == folder
    assert registered(root) == [folder]
    from gpulab.judge.policy import policy_for
    from gpulab.wire.check_request import CheckRequest

    request = CheckRequest(
        exercise="gelu",
        function="gelu",
        file=str(tmp_path / "ws" / "gelu.py"),
        content_root=str(root),
    )
    assert str(folder) in policy_for(request, "cpu", tmp_path / "p", tmp_path / "c").hidden
    book = tmp_path / "gradebook.toml"
    book.write_text('[[assignment]]\nexercise = "gelu"\npoints = 10\n')
    assert load_config(book, course.exercise_ids).assignment("gelu") is not None


@pytest.mark.parametrize(
    ("step", "expect"),
    [
        # A folder step names nothing but its folder: the rest is exercise.toml's.
        (
            'folder = "exercises/gelu"\ntitle = "GELU"',
            "manifest.toml lesson '01_first' step #2: field 'title' cannot be given with "
            "'folder' (a folder step's fields are its exercise.toml's)",
        ),
        (
            'folder = "exercises/nowhere"',
            "manifest.toml lesson '01_first' step #2: field 'folder': no folder at ",
        ),
        ("folder = 3", "step #2: field 'folder' must be an exercise folder's path"),
        ('folder = "a\\u0000b"', "step #2: field 'folder': 'a\\x00b' is no path"),
    ],
)
def test_a_broken_folder_step_is_named_and_the_rest_works(tmp_path, step, expect):
    course = load_course(course_with(tmp_path, step))
    first = course.find("first")
    warmup, broken, final = course.lesson_exercises(first)
    assert broken.error and not broken.ready and expect in broken.error, broken.error
    assert broken.error in course.warnings and len(course.warnings) == 1
    assert broken.step_label == "step 2 of 3"
    assert not warmup.error and not final.error and not course.find("second").error


def test_a_folder_a_step_names_is_not_a_lesson_as_well(tmp_path):
    from gpulab.course import exercise_template
    from gpulab.course.exercise_folder import registered

    root = course_with(tmp_path)
    manifest = root / "lessons" / "manifest.toml"
    # The course's folder of exercise folders is listed: gelu, a step, and relu.
    manifest.write_text('exercise_folders = ["exercises"]\n' + manifest.read_text())
    exercise_template.write(root / "exercises" / "relu", "relu")
    course = load_course(root)
    assert not course.warnings, course.warnings
    assert course.exercise_ids == ["warmup", "gelu", "first", "second", "relu"]
    assert course.find("gelu").is_step and course.find("relu").id == "03_relu"
    assert registered(root) == [root / "exercises" / "gelu", root / "exercises" / "relu"]


def test_exercise_toml_problems_name_the_file_and_field(tmp_path):
    root = course_with(tmp_path)
    toml = root / "exercises" / "gelu" / "exercise.toml"
    toml.write_text(toml.read_text().replace('bound = "memory"', 'bound = "latency"'))
    course = load_course(root)
    broken = course.lesson_exercises(course.find("first"))[1]
    # As a folder lesson's: the file and the field, the step named by its folder.
    assert broken.error.startswith(f"{toml}: field 'bound' must be one of"), broken.error
    assert (broken.exercise, broken.name, broken.folder) == ("gelu", "gelu", toml.parent)
    assert not course.find("first").error


def test_dev_check_where_and_list_see_the_folder_step(run_gpulab, tmp_path):
    root = tmp_path / "course"
    env = gpulab_env(tmp_path / "ws", GPULAB_CONTENT=str(root))
    (root / "lessons" / "01_first").mkdir(parents=True)
    (root / "lessons" / "01_first" / "lesson.md").write_text("# A first lesson\n")
    manifest = MANIFEST.replace("__FOLDER_STEP__", 'folder = "exercises/gelu"')
    (root / "lessons" / "manifest.toml").write_text(manifest)
    exercises = root / "exercises"
    made = run_gpulab("dev", "new-exercise", "gelu", "--dir", str(exercises), env=env)
    assert made.returncode == 0, made.stderr
    assert "lists it already" in made.stdout
    # Two real checks on the CPU (the Triton interpreter): starter, reference.
    proved = run_gpulab("dev", "check", "gelu", "--device", "cpu", env=env)
    assert proved.returncode == 0, (proved.stdout, proved.stderr)
    assert "✔ 01_first (gelu): starter fails, reference passes" in proved.stdout
    assert "exercise OK" in proved.stderr
    where = run_gpulab("where", "gelu", env=env)
    assert where.returncode == 0, where.stderr
    mine = Path(where.stdout.strip())
    assert mine == tmp_path / "ws" / "exercises" / "gelu.py"
    assert mine.read_text() == (exercises / "gelu" / "starter.py").read_text()
    listed = run_gpulab("list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    row = json.loads(listed.stdout)["lessons"][0]
    assert [(e["step"], e["exercise"], e["title"]) for e in row["exercises"]] == [
        (1, "warmup", "A warm-up"),
        (2, "gelu", "GELU, one element a lane"),
        (3, "first", "A first lesson"),
    ]


def test_a_path_that_cannot_be_resolved_is_named_not_a_crash(tmp_path):
    root = course_with(tmp_path)
    manifest = root / "lessons" / "manifest.toml"
    (root / "loop").symlink_to(root / "loop")
    manifest.write_text('exercise_folders = ["loop/x"]\n' + manifest.read_text())
    course = load_course(root)
    # A link that loops: a warning naming the entry (it raised out of load_course once).
    assert len(course.warnings) == 1, course.warnings
    assert course.warnings[0].startswith(f"{manifest}: exercise_folders entry 'loop/x': not a")
    assert course.find("gelu").ready
