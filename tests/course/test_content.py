"""The course manifest: order, ids, validation, isolation of broken entries."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpulab.course.content import ContentError, compile_formula, eval_formula, load_course

REPO = Path(__file__).resolve().parents[2]

LESSON_IDS = [
    "01_gpu_architecture_tour",
    "02_triton_101_softmax",
    "03_triton_tiled_matmul",
    "04_triton_flashattention",
    "05_fused_rope_rmsnorm",
    "06_torch_compile_deep_dive",
    "07_nsight_profiling",
    "08_jax_sharding_pipeline",
    "09_roofline_analysis_serving",
]
EXERCISES = [
    "bandwidth",
    "softmax",
    "matmul",
    "flash_attention",
    "rope_rmsnorm",
    "compile_once",
    "nvtx_profile",
    "choose_specs",
    "serving_roofline",
]


def test_nine_lessons_in_the_books_order(course):
    assert [lesson.id for lesson in course.lessons] == LESSON_IDS
    assert [lesson.exercise for lesson in course.lessons] == EXERCISES
    assert not course.warnings, course.warnings


def test_kernel_lessons_climb_in_steps(course):
    """Issue 29: the kernel lessons (02-05) reach their exercise through graded steps."""
    import re

    steps = {
        lesson.exercise: [e.exercise for e in course.lesson_exercises(lesson)]
        for lesson in course.lessons
    }
    assert steps["softmax"] == ["softmax_row", "softmax_wide", "softmax"]
    assert steps["matmul"] == ["matmul_tile", "matmul_kloop", "matmul"]
    assert steps["flash_attention"] == ["attention_tile", "attention_online", "flash_attention"]
    assert steps["rope_rmsnorm"] == [
        "rope",
        "rmsnorm",
        "rope_rmsnorm_fwd",
        "rope_rmsnorm_bwd",
        "rope_rmsnorm",
    ]
    for lesson in course.exercises:
        if lesson.is_step:
            assert lesson.ready and lesson.name, lesson.exercise
            grader = REPO / "gpulab" / "judge" / "graders" / f"{lesson.exercise}.py"
            assert grader.is_file(), f"{lesson.exercise} has no grader at {grader}"
            # Each step is named in its lesson's text, by its id, as code
            # (`softmax_row`, or `gpulab check softmax_row`).
            named = re.search(rf"`[^`\n]*\b{lesson.exercise}\b[^`\n]*`", lesson.text())
            assert named, f"{lesson.id}'s lesson.md never names its step {lesson.exercise}"


def test_every_triton_step_has_compile_specs(course):
    """`gpulab dev compile` (and its GPU session) compiles each Triton step's
    reference and starter kernels: a step added without specs would go unchecked."""
    from gpulab.judge.loader import compile_specs

    specs, errors = compile_specs(REPO)
    assert not errors
    for lesson in course.exercises:
        if lesson.is_step and "triton" in lesson.requires:
            mine = [s for s in specs if s.exercise == lesson.exercise]
            assert mine and any(s.starter for s in mine), f"{lesson.exercise}: no compile spec"


def test_ready_lessons_are_complete(course):
    ready = [lesson for lesson in course.exercises if lesson.ready]
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
    src = Path(__file__).resolve().parents[2]
    for d in ("lessons", "exercises", "kernels"):
        shutil.copytree(src / d, root / d)
    return root


def test_a_broken_entry_names_file_and_field_and_the_rest_still_work(tmp_path):
    root = _copy_content(tmp_path)
    manifest = root / "lessons" / "manifest.toml"
    text = manifest.read_text()
    text = text.replace(
        'id = "03_triton_tiled_matmul"\ntitle = "Grouped-order tiled matmul"',
        'id = "03_triton_tiled_matmul"\ntitle = 42',
        1,
    )
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


@pytest.mark.parametrize(
    "field,value,expect",
    [
        ("status", '"maybe"', "status"),
        ("kind", '"gpu"', "kind"),
        ("exercise", '"../../etc"', "exercise"),
        ("flops", '"__import__(1)"', "flops"),
        ("exps", '"open(1)"', "exps"),
        ("tools", '["explain", "lint"]', "tools"),
        # A heading --explain would send the learner to, which the lesson lacks.
        ("tail_wave", '"No such section"', "explain_sections"),
    ],
)
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


@pytest.mark.parametrize(
    "field,value",
    [
        ("explain_sections", ["tail_wave"]),
        ("explain_sections", {"tail-wave": "One program per row"}),
        ("profile_ops", "fastest"),
        ("profile_range", "train_step/"),
    ],
)
def test_the_tools_fields_are_checked(field, value):
    from gpulab.course.content import _exercise_fields

    with pytest.raises(ValueError, match=f"^manifest.toml lesson 'x': field '{field}'"):
        _exercise_fields({"exercise": "x", field: value}, "manifest.toml lesson 'x'")


def test_unreadable_manifest_is_a_content_error(tmp_path):
    root = _copy_content(tmp_path)
    (root / "lessons" / "manifest.toml").write_text("[[lesson]\nid = ")
    with pytest.raises(ContentError, match="manifest.toml: not valid TOML"):
        load_course(root)
    (root / "lessons" / "manifest.toml").unlink()
    with pytest.raises(ContentError, match="missing"):
        load_course(root)
    # Not UTF-8 (a manifest saved as Latin-1): a ContentError naming the file,
    # as the glossary says, not a UnicodeDecodeError out of gpulab.
    (root / "lessons" / "manifest.toml").write_bytes(b'[[lesson]]\nid = "caf\xe9"\n')
    with pytest.raises(ContentError, match="manifest.toml: cannot be read"):
        load_course(root)


def test_formulas_are_arithmetic_only():
    assert eval_formula("2*M*N*elt", {"M": 3, "N": 4, "elt": 2}) == 48
    assert eval_formula("4*B*S*S / (2 if causal else 1)", {"B": 1, "S": 2, "causal": 1}) == 8
    for bad in ("__import__('os')", "x.y", "[1]", "'a'", "f(1)"):
        with pytest.raises(ValueError):
            compile_formula(bad)
    with pytest.raises(ValueError, match="unknown name"):
        eval_formula("M*K", {"M": 1})


# --- every cited file ships (issue 18) -------------------------------------------


def test_every_cited_file_is_in_the_repo():
    from gpulab.course import citations

    problems, pending = citations.check(REPO)
    assert not problems, "cited but not in the repo:\n" + "\n".join(problems)
    # Only the documents PENDING names may be waited for.
    assert all("pending:" in p for p in pending)


def test_pending_documents_are_still_missing():
    """A PENDING entry whose file has landed must go: its citations are then checked."""
    from gpulab.course.citations import PENDING

    landed = [p for p in PENDING if (REPO / p).exists()]
    assert not landed, f"{landed} now exist: remove them from gpulab.course.citations.PENDING"


def test_the_citation_check_names_file_line_and_the_shipped_document(tmp_path):
    from gpulab.course import citations

    root = _copy_content(tmp_path)
    (root / "docs").mkdir()
    (root / "docs" / "hardware.md").write_text("# figures\n", encoding="utf-8")
    (root / "docs" / "grading.md").write_text("# protocol\n", encoding="utf-8")
    lesson = root / "lessons" / "02_triton_101_softmax" / "lesson.md"
    lesson.write_text(
        lesson.read_text() + "\nSee HARDWARE.md and docs/missing.md, not "
        "args.json or path/to/config.json.\nAlso `../shared/guide/GRADING.md`.\n"
    )
    problems, pending = citations.check(root)
    n = len(lesson.read_text().splitlines())
    where = "lessons/02_triton_101_softmax/lesson.md"
    assert (
        f"{where}:{n - 1}: cites HARDWARE.md, not in the repo; the shipped document is "
        "docs/hardware.md" in problems
    )
    assert f"{where}:{n - 1}: cites docs/missing.md, not in the repo" in problems
    assert not any("args.json" in p or "config.json" in p for p in problems)
    assert (
        f"{where}:{n}: cites ../shared/guide/GRADING.md, not in the repo; the shipped "
        "document is docs/grading.md" in problems
    )


def test_dev_check_reports_citations(tmp_path, course):
    import io

    from rich.console import Console

    from gpulab.cli.commands.dev import check_citations

    out = Console(file=io.StringIO(), width=200)
    assert check_citations(REPO, out) == 0
    text = out.file.getvalue()
    assert "✔ citations: every cited file is in the repo" in text
    root = _copy_content(tmp_path)
    (root / "lessons" / "glossary.toml").write_text("# see HARDWARE.md\n", encoding="utf-8")
    out = Console(file=io.StringIO(), width=200)
    assert check_citations(root, out) >= 1  # the copy has no docs/ either
    assert "✘ citations: lessons/glossary.toml:1: cites HARDWARE.md" in out.file.getvalue()


# --- hints: the starter's names, a real gradient ---------------------------------


def test_hints_use_the_starters_names(course):
    import re

    for lesson in course.exercises:
        starter = lesson.starter_path.read_text(encoding="utf-8")
        for i, hint in enumerate(lesson.hints, 1):
            for name in set(re.findall(r"\b\w+_kernel\b", hint)):
                assert f"def {name}(" in starter, (
                    f"{lesson.id} hint {i} names {name}, which the starter does not define"
                )


def test_hint_levels_are_a_gradient(course):
    """Level 1 and 2 are words (no code blocks, little inline code); level 3 has the code."""
    import re

    for lesson in course.exercises:
        nudge, approach, near = lesson.hints
        for level, hint in ((1, nudge), (2, approach)):
            assert "```" not in hint, f"{lesson.id} hint {level} has a code block"
        code = sum(len(m) for m in re.findall(r"`[^`]*`", approach))
        assert code <= 0.25 * len(approach), (
            f"{lesson.id} hint 2 is {code / len(approach):.0%} inline code: "
            "near-complete code belongs in hint 3"
        )
        assert len(near) > len(nudge), lesson.id


def test_rope_hints_describe_the_lessons_design(course):
    lesson = course.find("rope_rmsnorm")
    text = lesson.text()
    assert "BLOCK_H = 16" in text and "528" in text
    hints = "\n".join(lesson.hints)
    assert "BLOCK_H = 16" in hints and "dw_part" in hints and "pid" in hints
    assert "next_power_of_2(H)" not in hints and "(B * S,)`" not in hints
    starter = lesson.starter_path.read_text(encoding="utf-8")
    assert "triton.cdiv(H, BLOCK_H)" in starter and "(P, D)" in starter


# --- each starter states its grade, as its grader grades ---------------------------


def _stated(doc: str) -> list[tuple[str, float]]:
    import re

    return [
        (letter, float(v) / (100 if unit == "%" else 1))
        for letter, v, unit in re.findall(r"\b([ABC]) >= (\d+(?:\.\d+)?)(%|x)", doc)
    ]


def test_every_starter_states_its_grade(course):
    import ast

    for lesson in course.exercises:
        doc = ast.get_docstring(ast.parse(lesson.starter_path.read_text(encoding="utf-8")))
        assert "Grade" in doc, f"{lesson.starter_path.name} does not say how it is graded"


def test_stated_grades_are_the_graders():
    pytest.importorskip("torch")
    import ast

    from gpulab.judge.graders import bandwidth, flash_attention, matmul, rope_rmsnorm, softmax

    specs = {
        "bandwidth": bandwidth.spec(False),
        "softmax": softmax.SPEC,
        "matmul": matmul.make_spec(False),
        "flash_attention": flash_attention.make_spec(),
        "rope_rmsnorm": rope_rmsnorm.SPEC,
    }
    for name, spec in specs.items():
        path = REPO / "exercises" / f"{name}.py"
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        graded = [(letter, t) for t, letter in spec.grades if letter != "D"]
        assert sorted(_stated(doc)) == sorted(graded), (name, _stated(doc), graded)
