"""The lab and the CLI on a workspace they cannot write (a read-only mount, a
full disk): each says so naming the folder, and no edit is lost silently."""

from __future__ import annotations

import pytest

pytest.importorskip("textual")

from test_tui import SIZE, make_app, open_softmax, wait_for  # noqa: E402

from gpulab.tui.editor import ExercisePane  # noqa: E402
from gpulab.tui.screens import ConfirmScreen  # noqa: E402
from gpulab.wire.result import CheckResult

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_a_read_only_workspace_is_said_and_q_asks_before_losing_the_edit(
    read_only_ws, monkeypatch
):
    import gpulab.tui.editor as editor_mod

    monkeypatch.setattr(editor_mod, "AUTOSAVE_DELAY", 0.2)
    ws = read_only_ws
    folder = str(ws.root / "exercises")
    before = (ws.root / "exercises" / "softmax.py").read_text()
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        # Said at the start, before any typing, naming the folder.
        assert any(folder in n and "cannot be written" in n for n in app.notes)
        await pilot.press("e", "ctrl+home", "m", "i", "n", "e")
        pane = app.query_one(ExercisePane)
        await wait_for(pilot, lambda: pane.save_error is not None, 10, "the autosave to fail")
        await pilot.press("x")
        await pilot.pause(0.5)  # a second autosave fails too, and is not said again
        said = [n for n in app.notes if n.startswith("Could not save softmax.py")]
        assert len(said) == 1 and folder in said[0] and "Read-only file system" in said[0]
        await pilot.press("escape", "c")  # VIEW mode, then check
        await pilot.pause()
        refused = app.notes[-1]
        assert refused.startswith("Not checked") and "question" not in refused
        assert folder in refused
        assert not app.checking
        await pilot.press("q")
        await pilot.pause()
        assert app.is_running and isinstance(app.screen, ConfirmScreen)
        assert app.screen.yes.startswith("Quit")
        await pilot.press("n")  # stay
        await pilot.pause()
        assert app.is_running and pane.dirty and pane.editor.text.startswith("minex")
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")  # quit, losing it, on purpose
        await pilot.pause()
    assert app.return_code == 0
    assert (ws.root / "exercises" / "softmax.py").read_text() == before


async def test_progress_that_cannot_be_saved_does_not_stop_the_lab(read_only_ws):
    """Switching lessons, hints and watch mode write state: each carries on."""
    app = make_app(read_only_ws)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        app.action_open_lesson("matmul")
        await pilot.pause()
        assert app.lesson.exercise == "matmul"
        await pilot.press("h", "w")
        await pilot.pause()
        assert app.is_running
        assert app.query_one("#lesson-pane").revealed == 1  # shown, though not kept


def test_gpulab_check_on_a_read_only_workspace_runs_and_says_why_nothing_is_kept(
    read_only_ws, monkeypatch, capsys
):
    from gpulab.cli import build_parser
    from gpulab.cli.commands import check
    from gpulab.lab import check as lab_check

    sent: dict = {}

    def run_check(lesson, path, **kwargs):
        sent.update(kwargs)
        return CheckResult.from_json(
            {"status": "fail", "passed": False, "exercise": lesson.exercise}
        )

    monkeypatch.setattr(lab_check, "run_check", run_check)  # Lab.check runs it
    state = read_only_ws.load_state()
    code = check.run(build_parser().parse_args(["check", "softmax", "--device", "cpu"]))
    err = capsys.readouterr().err
    assert code == 1, err  # graded (a fail), not "could not run"
    assert f"{read_only_ws.root / 'exercises'} cannot be written to" in err
    assert "Read-only file system" in err and "not recorded" in err
    assert sent["workspace"] is None  # no compiler cache in the workspace: it would fail
    assert read_only_ws.load_state() == state


async def test_a_file_the_editor_cannot_open_says_why(ws):
    """Not UTF-8: the byte and where, as the check says it; too big: its size.
    Both in the pane and when e is pressed (it used to say there was no file)."""
    from test_tui import shows, softmax_path

    softmax_path(ws).write_bytes(b"import triton\n# caf\xe9\n")
    matmul = ws.root / "exercises" / "matmul.py"
    matmul.write_text("#" * 1_500_000)
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        await pilot.press("2", "e")
        await pilot.pause()
        assert shows(app, "not UTF-8 text: byte 0xe9 at line 2, column 6")
        # Its status line does not say "saved" of a file it never opened.
        assert shows(app, "softmax.py · not opened · VIEW")
        said = app.notes[-1]
        assert "cannot be edited here" in said and "0xe9 at line 2, column 6" in said
        app.action_open_lesson("matmul")
        await pilot.press("2")
        await pilot.pause()
        assert shows(app, "matmul.py is 1.5 MB", "matmul.py · not opened")


async def test_the_reset_question_says_its_keys_and_enter_presses_the_highlighted_button(ws):
    from test_tui import screen_text, shows, softmax_path

    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        softmax_path(ws).write_text("my work\n")
        await pilot.pause(0.3)
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert shows(app, "Reset (y)", "Cancel (n)", "Enter presses the highlighted")
        assert app.focused.id == "no"  # the highlighted button, the safe answer
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert softmax_path(ws).read_text() == "my work\n"
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("left")  # the highlight moves to Reset, and Enter follows it
        assert app.focused.id == "yes"
        await pilot.press("enter")
        await pilot.pause()
        assert softmax_path(ws).read_text() != "my work\n", screen_text(app)
