"""Every exercise of the course, steps included: its starter fails and its
reference passes, each through a real check on the CPU (the Triton
interpreter), as `gpulab dev check` proves them. One test an exercise, so
the suite's workers share them; CI's oldest stack runs this file for every
exercise's starter and reference on the oldest torch, Triton and JAX."""

from __future__ import annotations

import pytest

from gpulab.course.content import load_course

EXERCISES = [lesson for lesson in load_course().exercises if lesson.ready]


@pytest.mark.parametrize("lesson", EXERCISES, ids=[lesson.exercise for lesson in EXERCISES])
def test_the_starter_fails_and_the_reference_passes(lesson, shared):
    # As gpulab.cli.commands.dev.check_lesson proves it, through checks the
    # exercise's own tests share (tests/conftest.py, shared_check).
    missing = lesson.missing_requirements()
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    starter = lesson.starter_path.read_text(encoding="utf-8")
    assert "TODO" in starter, f"{lesson.starter_path} has no TODO"
    s = shared(lesson.exercise, starter)
    assert not s["passed"] and s["status"] != "error", (s["status"], s["summary"])
    r = shared(lesson.exercise, lesson.reference_path.read_text(encoding="utf-8"))
    assert r["passed"], (r["summary"], r.get("message", "")[-1500:])


def test_dev_check_reports_each_exercise_and_counts_problems(monkeypatch):
    """`gpulab dev check`'s own lines and count, its checks stood in for (the
    real ones are the test above)."""
    import io

    from gpulab.cli.commands import dev

    said = {
        "softmax": [],
        "matmul": ["the reference FAILS its grader: 1 of 16 cases wrong"],
        "flash_attention": ["skipped: needs a CUDA GPU"],
    }
    monkeypatch.setattr(dev, "check_lesson", lambda lesson, device: said.get(lesson.exercise, []))
    monkeypatch.setattr(dev, "check_citations", lambda root, out=None: 0)
    out = io.StringIO()
    from rich.console import Console

    failures = dev.check_course(load_course(), "cpu", Console(file=out, width=200))
    text = out.getvalue()
    assert failures == 1
    assert "✔ 02_triton_101_softmax: starter fails, reference passes" in text
    assert "✘ 03_triton_tiled_matmul: the reference FAILS its grader: 1 of 16 cases wrong" in text
    assert "- 04_triton_flashattention: skipped: needs a CUDA GPU" in text
