"""What a learner reads when their code raises: the error's own line."""

from __future__ import annotations

from gpulab.sandbox import learner


def test_a_note_the_library_appended_does_not_replace_the_message(tmp_path):
    f = tmp_path / "mine.py"
    f.write_text(
        "def f():\n"
        "    e = TypeError('dot_general requires contracting dimensions to have the same shape')\n"
        "    e.add_note('--------------------\\nFor simplicity, JAX has removed its internal "
        "frames from the traceback of the following exception.')\n"
        "    raise e\n"
    )
    module = learner.load_module(str(f))
    try:
        learner.call(module.f, str(f))
    except learner.LearnerError as exc:
        assert "dot_general requires contracting dimensions" in exc.summary, exc.summary
        assert "For simplicity" in exc.message  # the whole traceback keeps the note
    else:
        raise AssertionError("no LearnerError")


def test_without_notes_the_last_line_is_the_message(tmp_path):
    f = tmp_path / "mine.py"
    f.write_text("def f():\n    raise ValueError('bad shape')\n")
    module = learner.load_module(str(f))
    try:
        learner.call(module.f, str(f))
    except learner.LearnerError as exc:
        assert exc.summary == "your code raised ValueError: bad shape", exc.summary
