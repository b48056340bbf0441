"""The Exercise pane's VIEW and EDIT modes, long lines, and the sidebar at 80x24.

A key pressed outside EDIT mode must never change the learner's file: each
test presses a sequence a learner would, then compares the file on disk
byte for byte. Checks are replaced by an instant fake (the grader is not
what these tests are about; tests/tui/test_tui.py runs real ones).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("textual")

from test_tui import make_app, shows, wait_for  # noqa: E402

from gpulab.tui.editor import ExercisePane  # noqa: E402
from gpulab.wire.result import CheckResult

SIZE = (80, 24)
REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def fake_checks(monkeypatch):
    """run_check answers at once; the calls are recorded."""
    import gpulab.lab.check as lab_check  # Lab.check runs the judge

    calls: list = []

    def fake(lesson, path, **_kw):
        calls.append(Path(path).read_bytes())
        return CheckResult.from_json(
            {"status": "failed", "passed": False, "summary": "fake check", "cases": []}
        )

    monkeypatch.setattr(lab_check, "run_check", fake)
    return calls


@pytest.fixture
def fast_autosave(monkeypatch):
    """Anything typed reaches the disk quickly, so a stray key cannot hide."""
    import gpulab.tui.editor as editor_mod

    monkeypatch.setattr(editor_mod, "AUTOSAVE_DELAY", 0.1)


def footer_mode(app) -> str | None:
    found = app.query("#footer-mode")
    return str(found.first().render()) if found else None


SEQUENCES = {
    "2 then c": ("2", "c"),
    "F1 help closed with escape": ("2", "f1", "escape", "c"),
    "b twice": ("2", "b", "b", "c"),
    "e then escape": ("2", "e", "escape", "c"),
    "enter then escape": ("2", "enter", "escape", "c", "h", "2", "w", "w"),
}


@pytest.mark.parametrize("keys", SEQUENCES.values(), ids=SEQUENCES.keys())
async def test_keys_outside_edit_mode_never_change_the_file(ws, fake_checks, fast_autosave, keys):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("softmax")
        await pilot.pause()
        path = ws.root / "exercises" / "softmax.py"
        before = path.read_bytes()
        await pilot.press(*keys)
        await pilot.pause(0.5)  # past the autosave delay
        await wait_for(pilot, lambda: not app.checking, 10, "the fake check")
        assert path.read_bytes() == before
        pane = app.query_one(ExercisePane)
        assert not pane.dirty and not pane.editing
        assert fake_checks, "c reached the app as a command: a check ran"
        assert all(body == before for body in fake_checks)


async def test_view_mode_by_default_and_edit_mode_on_request(ws, fake_checks):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("softmax")
        await pilot.pause()
        pane = app.query_one(ExercisePane)
        assert footer_mode(app) is None  # the Lesson pane has no editor
        await pilot.press("2")
        await pilot.pause()
        assert app.focused is pane.editor and not pane.editing
        assert footer_mode(app) == "VIEW"
        assert shows(app, "VIEW: e, Enter or a click edits")
        await pilot.press("e")
        await pilot.pause()
        assert pane.editing and app.focused is pane.editor
        assert footer_mode(app) == "EDIT — Esc to stop"
        await pilot.press("ctrl+home", "z", "escape")  # typed, then back to VIEW
        await pilot.pause()
        assert not pane.editing and footer_mode(app) == "VIEW"
        # Leaving EDIT mode saves at once, not a second later.
        assert (ws.root / "exercises" / "softmax.py").read_text().startswith("z")
        await pilot.click("#editor", offset=(10, 3))
        await pilot.pause()
        assert pane.editing and footer_mode(app) == "EDIT — Esc to stop"
        # Another pane ends EDIT mode; coming back is VIEW again.
        await pilot.press("escape", "1", "2")
        await pilot.pause()
        assert not pane.editing and footer_mode(app) == "VIEW"


async def test_edit_mode_survives_a_dialog_but_not_a_new_lesson(ws, fake_checks):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("softmax")
        await pilot.pause()
        pane = app.query_one(ExercisePane)
        await pilot.press("e", "f1")
        await pilot.pause()
        await pilot.press("escape")  # closes help; the learner was typing: still EDIT
        await pilot.pause()
        assert pane.editing and footer_mode(app) == "EDIT — Esc to stop"
        app.action_open_lesson("matmul")
        await pilot.pause()
        assert not pane.editing


async def test_long_lines_are_never_cut_at_80_columns(ws):
    """The editor at 80x24 is about 74 columns wide; a 96-column line shows whole."""
    app = make_app(ws)
    line = "x = 1  # " + "-" * 80 + " TAILMARK"
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("softmax")
        await pilot.pause()
        (ws.root / "exercises" / "softmax.py").write_text(line + "\n", encoding="utf-8")
        pane = app.query_one(ExercisePane)
        await pilot.press("2")
        await wait_for(pilot, lambda: pane.editor.text.startswith("x = 1"), 10, "the reload")
        await pilot.pause()
        assert len(line) > pane.editor.size.width
        assert shows(app, "TAILMARK")


@pytest.mark.parametrize("key", list("1234567"))
async def test_the_lesson_list_never_opens_by_itself_at_80_columns(ws, key):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("softmax")
        await pilot.pause()
        await pilot.press(key)
        await pilot.pause()
        assert not app.query_one("#sidebar").display
        assert shows(app, "Lesson", "Exercise", "Serving")  # every tab on screen
        if key == "2":
            await pilot.press("escape")  # VIEW already: harmless
        await pilot.press("b")
        await pilot.pause()
        assert app.query_one("#sidebar").display  # b still brings it


def test_readme_and_help_name_every_pane_key():
    """README once said 1-6 for seven panes; keys.md must list every app key."""
    from gpulab.tui.app import GpulabApp
    from gpulab.tui.shell import PANES

    n = len(PANES)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    keys_md = (REPO / "gpulab" / "tui" / "help" / "keys.md").read_text(encoding="utf-8")
    assert f"`1`–`{n}`" in readme
    assert re.findall(r"`1`–`(\d+)`", readme) == [str(n)]
    assert f"**1**–**{n}**" in keys_md
    names = {"question_mark": "?", "slash": "/", "f1": "F1", "f5": "F5"}
    for binding in GpulabApp.BINDINGS:
        for key in binding.key.split(","):
            if key.isdigit():
                continue  # the 1-N row
            shown = names.get(key, key)
            assert f"**{shown}**" in keys_md, f"keys.md does not mention {shown}"


async def test_late_messages_as_the_app_closes_are_harmless(ws):
    """A watcher, check or probe message that arrives after the layout is
    taken down (as the app closes) does nothing, except that a finished
    check is still recorded: progress is never lost (CI saw NoMatches on
    ExercisePane from the watcher's message)."""
    from gpulab.gpu.devinfo import GpuInfo
    from gpulab.tui.messages import CheckFinished, ExerciseChangedOnDisk, GpuDetected

    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("softmax")
        await pilot.pause()
        lesson, path = app.lesson, app.query_one(ExercisePane).path
        run_id = app.runner.run_id
        await app.screen_stack[0].remove_children()  # the layout, gone as at exit
        result = CheckResult.from_json(
            {"status": "failed", "passed": False, "summary": "late", "cases": []}
        )
        app.post_message(ExerciseChangedOnDisk(path))
        app.post_message(CheckFinished(run_id, lesson, result))
        app.post_message(GpuDetected(GpuInfo()))
        await pilot.pause()
        await pilot.pause()
    assert app.return_code in (0, None), app.return_code
    attempts = ws.exercise_state("softmax").get("attempts", [])
    assert attempts and attempts[-1].get("summary", "late") == "late"
