"""A lesson's core path and deep dives (gpulab.course.sections), and
`gpulab lesson` showing the deep dives folded unless asked."""

from __future__ import annotations

from gpulab.course.sections import core_text, folded_text, split_sections

TEXT = """# Lesson

Core one.

## Deep dive: where the figures come from

Provenance.

### A sub-heading inside the deep dive

More provenance.

```python
# Deep dive: a comment in a fence is no heading
## nor is this
```

## The exercise

Core two.

### Deep dive: a smaller one

Detail.

## Last core section

Core three.
"""


def test_deep_dives_run_to_the_next_heading_of_their_level():
    sections = split_sections(TEXT)
    assert [(s.deep, s.title) for s in sections] == [
        (False, ""),
        (True, "where the figures come from"),
        (False, ""),
        (True, "a smaller one"),
        (False, ""),
    ]
    assert "".join(s.text for s in sections) == TEXT
    big = sections[1]
    assert big.level == 2 and "More provenance." in big.text and "nor is this" in big.text
    assert big.body.startswith("Provenance.") and "## Deep dive" not in big.body
    small = sections[3]
    assert small.level == 3 and small.body.strip() == "Detail."


def test_core_text_and_folded_text():
    core = core_text(TEXT)
    assert "Provenance" not in core and "Detail" not in core
    assert "Core one." in core and "Core two." in core and "Core three." in core
    folded = folded_text(TEXT, ": unfold with --deep")
    assert "Provenance" not in folded
    assert "**Deep dive: where the figures come from** (folded: unfold with --deep)" in folded


def test_a_text_without_deep_dives_is_one_core_section():
    assert [s.text for s in split_sections("# T\n\nplain\n")] == ["# T\n\nplain\n"]
    assert split_sections("") == []
    # A deep dive at the very end, and one with nothing under its heading.
    sections = split_sections("Core.\n\n## Deep dive: last\n")
    assert [s.deep for s in sections] == [False, True] and sections[1].body == ""


def test_every_lesson_has_a_core_path_and_marks_its_deep_dives(course):
    """Each lesson opens with core text, and the steps it names are in it."""
    import re

    for lesson in course.lessons:
        sections = split_sections(lesson.text())
        assert sections and not sections[0].deep, lesson.id
        core = core_text(lesson.text())
        for e in course.lesson_exercises(lesson):
            assert re.search(rf"`[^`\n]*\b{e.exercise}\b[^`\n]*`", core), (
                f"{lesson.id}: the core path never names its step {e.exercise}"
            )
        assert any(s.deep for s in sections), f"{lesson.id} has no deep dive"


def test_cli_lesson_folds_the_deep_dives_unless_asked(run_gpulab):
    folded = run_gpulab("lesson", "1")
    assert folded.returncode == 0, folded.stderr
    assert "Deep dive:" in folded.stdout and "--deep" in folded.stdout
    assert "benchmarks/h200-2026-11-30/timing-validation" not in folded.stdout
    whole = run_gpulab("lesson", "1", "--deep")
    assert whole.returncode == 0, whole.stderr
    assert "timing-validation-first-warmup.json" in whole.stdout.replace("\n", "")
    assert len(whole.stdout) > len(folded.stdout)
