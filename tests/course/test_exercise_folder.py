"""A folder exercise, the lab's side (gpulab.course.exercise_folder): the
manifest's `exercise_folders` registers it, load_course makes it a lesson,
and every problem with its files is named, file and field, without taking
the course down. Nothing here runs a check (tests/judge/test_folder_exercise.py
does); nothing imports torch."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gpulab.course import exercise_template
from gpulab.course.content import ContentError, load_course

COMING = """
[[lesson]]
id = "01_first"
title = "A first lesson"
exercise = "first"
status = "coming"
"""


def course_with(tmp_path: Path, *folders: str, lessons: str = COMING) -> Path:
    """A course folder (its manifest alone) listing `folders`."""
    root = tmp_path / "course"
    (root / "lessons").mkdir(parents=True, exist_ok=True)
    listed = ", ".join(f'"{f}"' for f in folders)
    (root / "lessons" / "manifest.toml").write_text(f"exercise_folders = [{listed}]\n{lessons}")
    return root


def gelu(parent: Path, name: str = "gelu") -> Path:
    """The scaffold's own GELU folder, as `gpulab dev new-exercise` writes it."""
    exercise_template.write(parent / name, name)
    return parent / name


def test_a_folder_outside_the_course_is_a_lesson_of_its_own(tmp_path):
    folder = gelu(tmp_path / "instructor")
    root = course_with(tmp_path, str(folder.parent))  # a folder of exercise folders
    course = load_course(root)
    assert not course.warnings, course.warnings
    lesson = course.find("gelu")
    assert lesson is not None and lesson.ready and lesson.folder == folder
    # After the manifest's own lessons, numbered on from them.
    assert [le.exercise for le in course.lessons] == ["first", "gelu"]
    assert (lesson.id, lesson.index, lesson.number) == ("02_gelu", 1, "02")
    assert course.find("2") is lesson and course.find("02_gelu") is lesson
    assert (lesson.title, lesson.function, lesson.kind) == (
        "GELU, one element a lane",
        "gelu",
        "memory",
    )
    assert (lesson.bytes, lesson.flops, lesson.requires) == ("2*N*elt", "8*N", ("triton",))
    assert len(lesson.hints) == 3 and not lesson.is_step and lesson.step_label == ""
    assert lesson.starter_path == folder / "starter.py"
    assert lesson.reference_path == folder / "reference.py"
    assert lesson.text().startswith("# GELU")
    assert lesson.root == root  # the judge finds the course, and the folder, from it
    from gpulab.explain.kinds import explain_unavailable

    # A timed kernel: explained as the course's own are, unless it says `tools = []`.
    assert lesson.tools == ("explain",) and explain_unavailable(lesson) == ""
    toml = folder / TOML
    toml.write_text(toml.read_text().replace('status = "ready"', 'status = "ready"\ntools = []'))
    quiet = load_course(root).find("gelu")
    assert quiet is not None and quiet.tools == () and "tools = []" in explain_unavailable(quiet)


def test_the_workspace_copies_the_folders_starter(tmp_path, ws):
    folder = gelu(tmp_path / "instructor")
    course = load_course(course_with(tmp_path, str(folder)))  # the exercise folder itself
    copy = ws.ensure_exercise(course.find("gelu"))
    assert copy == ws.root / "exercises" / "gelu.py"
    assert copy.read_text() == (folder / "starter.py").read_text()
    assert ws.solution_text(course.find("gelu")) is None  # the reference: once passed


def test_a_relative_entry_is_read_from_the_course_folder_and_listed_once(tmp_path):
    root = tmp_path / "course"
    gelu(root / "extra", "gelu")
    gelu(root / "extra", "a_first")
    course = load_course(course_with(tmp_path, "extra", "extra/gelu", lessons=""))
    # A folder of folders gives each by name; one listed twice is one exercise.
    assert course.exercise_ids == ["a_first", "gelu"]
    assert [le.id for le in course.lessons] == ["01_a_first", "02_gelu"]


def test_a_manifest_needs_lessons_or_folders(tmp_path):
    with pytest.raises(ContentError, match="no \\[\\[lesson\\]\\] entries"):
        load_course(course_with(tmp_path, lessons=""))


def test_a_listed_path_that_is_no_exercise_is_named_and_the_rest_still_work(tmp_path):
    (tmp_path / "empty").mkdir()
    root = course_with(tmp_path, "nowhere", str(tmp_path / "empty"))
    course = load_course(root)
    manifest = root / "lessons" / "manifest.toml"
    assert course.exercise_ids == ["first"]
    assert course.warnings == (
        f"{manifest}: exercise_folders entry 'nowhere': no folder at {root / 'nowhere'}",
        f"{manifest}: exercise_folders entry '{tmp_path / 'empty'}': {tmp_path / 'empty'} "
        "holds no exercise.toml, nor do its folders",
    )
    (root / "lessons" / "manifest.toml").write_text('exercise_folders = "extra"\n' + COMING)
    assert load_course(root).warnings == (
        f"{manifest}: field 'exercise_folders' must be a list of folder paths",
    )


TOML = "exercise.toml"


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        # exercise.toml's own fields: missing, mistyped, misspelt, out of range.
        (('function = "gelu"', ""), f"{TOML}: field 'function' is missing"),
        (("title = ", "title = 3 #"), f"{TOML}: field 'title' must be a string, got int"),
        (('kind = "kernel"', 'kind = "trace"'), "field 'kind' must be one of ('kernel',)"),
        (('kind = "kernel"', ""), f"{TOML}: field 'kind' is missing"),
        (('bound = "memory"', 'bound = "latency"'), "field 'bound' must be one of"),
        (('status = "ready"', 'statuss = "ready"'), "field 'statuss' is not a field of"),
        (('function = "gelu"', 'function = "my gelu"'), "field 'function' must be a Python"),
        # The manifest's fields, checked by the manifest's own rules.
        (('bytes = "2*N*elt"', "bytes = \"open('x')\""), f"{TOML}: field 'bytes': Call is"),
        (("hints = [", "hints = 3\nold = ["), "field 'old' is not a field"),
        (('exercise = "gelu"', 'exercise = "ge-lu"'), "field 'exercise' must be a Python"),
        (('status = "ready"', 'tools = ["profile"]'), "field 'tools' must be a list of explain"),
    ],
)
def test_exercise_toml_problems_name_the_file_and_field(tmp_path, change, expect):
    folder = gelu(tmp_path / "instructor")
    path = folder / TOML
    old, new = change
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    course = load_course(course_with(tmp_path, str(folder)))
    broken = course.find("gelu")
    assert broken is not None and not broken.ready and broken.folder == folder
    assert str(folder) in broken.error and expect in broken.error, broken.error
    assert broken.error in course.warnings
    assert course.find("first") is not None  # the rest of the course still works


def test_hints_of_the_wrong_type_are_named(tmp_path):
    folder = gelu(tmp_path / "instructor")
    text = (folder / TOML).read_text()
    start = text.index("hints = [")
    (folder / TOML).write_text(text[:start] + 'hints = "read the lesson"\n')
    error = load_course(course_with(tmp_path, str(folder))).find("gelu").error
    assert error == f"{folder / TOML}: field 'hints' must be a list of strings"


@pytest.mark.parametrize(
    ("file", "text", "expect"),
    [
        ("spec.py", None, "spec.py is missing (the judge's side: reference, inputs, cases)"),
        ("reference.py", None, "reference.py is missing (a solution that passes)"),
        ("lesson.md", None, "lesson.md is missing (the lesson text)"),
        (
            "spec.py",
            "import torch\n\ndef reference(x)\n    return x\n",
            "spec.py:3: not valid Python",
        ),
        (
            "spec.py",
            "def reference(x):\n    return x\n\nCASES = [{'N': 1, 'dtype': 'fp32'}]\n",
            "spec.py: `make_inputs` is missing (the function that draws one case's inputs)",
        ),
        (TOML, "exercise = [", f"{TOML}: not valid TOML"),
    ],
)
def test_a_missing_or_broken_file_is_named(tmp_path, file, text, expect):
    folder = gelu(tmp_path / "instructor")
    if text is None:
        (folder / file).unlink()
    else:
        (folder / file).write_text(text)
    lesson = load_course(course_with(tmp_path, str(folder))).find("gelu")
    assert expect in lesson.error and str(folder) in lesson.error, lesson.error


def test_a_coming_folder_needs_only_its_toml(tmp_path):
    folder = tmp_path / "later"
    folder.mkdir()
    (folder / TOML).write_text(
        'exercise = "later"\ntitle = "Later"\nkind = "kernel"\nfunction = "later"\n'
        'status = "coming"\n'
    )
    lesson = load_course(course_with(tmp_path, str(folder))).find("later")
    assert not lesson.error and not lesson.ready and lesson.status == "coming"


def test_the_judges_loader_declares_a_registered_folder_and_refuses_the_rest(tmp_path):
    from gpulab.judge import loader

    folder = gelu(tmp_path / "instructor")
    root = str(course_with(tmp_path, str(folder)))
    assert loader.check("gelu", root) == folder
    assert loader.folder_of("first", root) is None
    with pytest.raises(loader.UnknownExercise, match="'softmax' is not an exercise of this course"):
        loader.check("softmax", root)  # the built-in course's, not this one's
    with pytest.raises(loader.UnknownExercise, match="'speed' is not an exercise"):
        loader.check("speed", root)


def test_the_gradebook_knows_the_folder_exercise_and_regrades_when_its_spec_changes(tmp_path):
    from gpulab.gradebook.config import load_config
    from gpulab.gradebook.plan import reference_sha

    folder = gelu(tmp_path / "instructor")
    course = load_course(course_with(tmp_path, str(folder)))
    book = tmp_path / "gradebook.toml"
    book.write_text('[[assignment]]\nexercise = "gelu"\npoints = 10\n')
    assert load_config(book, course.exercise_ids).assignment("gelu") is not None
    before = reference_sha(course, "gelu")
    (folder / "spec.py").write_text((folder / "spec.py").read_text() + "\n# tighter\n")
    assert reference_sha(course, "gelu") != before


def test_new_exercise_writes_a_folder_and_says_how_to_register_it(tmp_path, monkeypatch, capsys):
    from gpulab.cli.commands import dev_new
    from gpulab.cli.commands.common import UsageError

    root = course_with(tmp_path, "extra")
    monkeypatch.setenv("GPULAB_CONTENT", str(root))

    def new(name: str, where: Path) -> int:
        return dev_new.run(argparse.Namespace(name=name, dir=str(where)))

    assert new("layernorm", tmp_path / "elsewhere") == 0
    said = capsys.readouterr().out
    folder = tmp_path / "elsewhere" / "layernorm"
    assert sorted(p.name for p in folder.iterdir()) == sorted(exercise_template.FILES)
    assert 'function = "layernorm"' in (folder / TOML).read_text()
    assert "def layernorm(x" in (folder / "starter.py").read_text()
    assert f'exercise_folders = ["{folder.parent}"]' in said
    assert "gpulab dev check layernorm" in said
    # Made where the course looks already: nothing to register.
    assert new("gelu", root / "extra") == 0
    said = capsys.readouterr().out
    assert "lists it already" in said and "exercise_folders =" not in said
    assert load_course(root).find("gelu").ready
    with pytest.raises(UsageError, match="already exists"):
        new("gelu", root / "extra")
    for bad in ("my-gelu", "class", ""):
        with pytest.raises(UsageError, match="NAME"):
            new(bad, tmp_path)


def test_dev_check_of_a_name_the_course_lacks_says_how_to_register(tmp_path, monkeypatch, capsys):
    from gpulab.cli.commands import dev

    monkeypatch.setenv("GPULAB_CONTENT", str(course_with(tmp_path)))
    args = argparse.Namespace(action="check", name="gelu", device="cpu")
    assert dev.run(args) == 2
    said = capsys.readouterr().err
    assert "no exercise 'gelu' in the course" in said and "exercise_folders" in said
