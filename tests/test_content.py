"""The course manifest: order, ids, validation, isolation of broken entries."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpulab.content import ContentError, compile_formula, eval_formula, load_course

LESSON_IDS = [
    "01_gpu_architecture_tour", "02_triton_101_softmax", "03_triton_tiled_matmul",
    "04_triton_flashattention", "05_fused_rope_rmsnorm", "06_torch_compile_deep_dive",
    "07_nsight_profiling", "08_jax_sharding_pipeline", "09_roofline_analysis_serving",
]
EXERCISES = ["bandwidth", "softmax", "matmul", "flash_attention", "rope_rmsnorm",
             "graph_breaks", "nvtx_profile", "sharded_mlp", "serving_roofline"]


def test_nine_lessons_in_the_books_order(course):
    assert [lesson.id for lesson in course.lessons] == LESSON_IDS
    assert [lesson.exercise for lesson in course.lessons] == EXERCISES
    assert not course.warnings, course.warnings


def test_ready_lessons_are_complete(course):
    ready = [lesson for lesson in course.lessons if lesson.ready]
    assert course.find("softmax") in ready
    for lesson in ready:
        assert len(lesson.hints) == 3, lesson.id
        assert lesson.lesson_path.is_file() and lesson.starter_path.is_file()
        assert lesson.reference_path.is_file(), lesson.id
        assert lesson.function, lesson.id
        assert f"def {lesson.function}(" in lesson.starter_path.read_text()
        assert f"def {lesson.function}(" in lesson.reference_path.read_text()


def test_find_by_exercise_id_number_and_lesson_id(course):
    assert course.find("softmax").id == "02_triton_101_softmax"
    assert course.find("2").exercise == "softmax"
    assert course.find("02").exercise == "softmax"
    assert course.find("04_triton_flashattention").exercise == "flash_attention"
    assert course.find("nope") is None


def _copy_content(tmp_path: Path) -> Path:
    root = tmp_path / "content"
    src = Path(__file__).resolve().parent.parent
    for d in ("lessons", "exercises", "kernels"):
        shutil.copytree(src / d, root / d)
    return root


def test_a_broken_entry_names_file_and_field_and_the_rest_still_work(tmp_path):
    root = _copy_content(tmp_path)
    manifest = root / "lessons" / "manifest.toml"
    text = manifest.read_text()
    text = text.replace('id = "03_triton_tiled_matmul"\ntitle = "Grouped-order tiled matmul"',
                        'id = "03_triton_tiled_matmul"\ntitle = 42', 1)
    manifest.write_text(text)
    course = load_course(root)
    broken = course.find("03_triton_tiled_matmul")
    assert broken.error and "title" in broken.error and "manifest.toml" in broken.error
    assert not broken.ready
    assert course.find("softmax").ready
    assert len(course.lessons) == 9 and course.warnings


def test_a_missing_lesson_file_is_named(tmp_path):
    root = _copy_content(tmp_path)
    (root / "lessons" / "02_triton_101_softmax" / "lesson.md").unlink()
    course = load_course(root)
    lesson = course.find("softmax")
    assert "lesson.md is missing" in lesson.error
    assert "could not be read" in lesson.text()


@pytest.mark.parametrize("field,value,expect", [
    ("status", '"maybe"', "status"),
    ("kind", '"gpu"', "kind"),
    ("exercise", '"../../etc"', "exercise"),
    ("flops", '"__import__(1)"', "flops"),
])
def test_bad_field_values_are_named(tmp_path, field, value, expect):
    root = _copy_content(tmp_path)
    manifest = root / "lessons" / "manifest.toml"
    lines = manifest.read_text().splitlines()
    start = lines.index('id = "02_triton_101_softmax"')
    for i in range(start, len(lines)):
        if lines[i].startswith(f"{field} = "):
            lines[i] = f"{field} = {value}"
            break
    manifest.write_text("\n".join(lines) + "\n")
    lesson = load_course(root).lessons[1]
    assert expect in lesson.error and "02_triton_101_softmax" in lesson.error


def test_unreadable_manifest_is_a_content_error(tmp_path):
    root = _copy_content(tmp_path)
    (root / "lessons" / "manifest.toml").write_text("[[lesson]\nid = ")
    with pytest.raises(ContentError, match="manifest.toml: not valid TOML"):
        load_course(root)
    (root / "lessons" / "manifest.toml").unlink()
    with pytest.raises(ContentError, match="missing"):
        load_course(root)


def test_formulas_are_arithmetic_only():
    assert eval_formula("2*M*N*elt", {"M": 3, "N": 4, "elt": 2}) == 48
    assert eval_formula("4*B*S*S / (2 if causal else 1)", {"B": 1, "S": 2, "causal": 1}) == 8
    for bad in ("__import__('os')", "x.y", "[1]", "'a'", "f(1)"):
        with pytest.raises(ValueError):
            compile_formula(bad)
    with pytest.raises(ValueError, match="unknown name"):
        eval_formula("M*K", {"M": 1})
