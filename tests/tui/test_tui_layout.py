"""Layouts at 80x24 (issue 30, item 11): what was cut or covered on 1cddca9.

The reference solution's long lines were cut (its viewer did not wrap), and a
state repair's warning, six fields long, filled half the screen as a toast.
The Serving table at 60 columns and the plot labels are in test_tui_serving.py;
every pane's picture at 60x20, 80x24 and 120x40 in test_tui_snapshots.py.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("textual")

from test_tui import SIZE, make_app, shows, wait_for  # noqa: E402

from gpulab.tui.screens import NoticeScreen, SolutionScreen  # noqa: E402

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_the_solution_viewer_wraps_long_lines(ws):
    app = make_app(ws)
    line = "y = 1  # " + "-" * 90 + " TAILMARK"
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.push_screen(SolutionScreen("softmax", f"x = 0\n{line}\n"))
        await wait_for(pilot, lambda: isinstance(app.screen, SolutionScreen), 10, "the viewer")
        await pilot.pause()
        assert shows(app, "TAILMARK")


async def test_a_long_start_up_warning_is_a_short_toast_and_whole_in_the_palette(ws):
    state = {
        "version": 1,
        "last_lesson": 7,
        "exercises": {
            "softmax": {
                "status": "passed!!",
                "attempts": [{"time": 5, "passed": "yes"}],
                "hints": "two",
            }
        },
        "settings": {"watch": "maybe"},
    }
    ws.state_path.write_text(json.dumps(state), encoding="utf-8")
    from gpulab.lab.workspace import Workspace

    repaired = Workspace.open(ws.root)
    assert repaired.warnings and len(repaired.warnings[0]) > 400  # six fields, listed
    app = make_app(repaired)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        toast = [n for n in app.notes if "wrong shape" in n]
        assert toast and len(toast[0]) < 220 and "startup: notes" in toast[0]
        await pilot.press("ctrl+p")
        await pilot.press(*"startup: notes", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NoticeScreen), 10, "the notes")
        await pilot.pause()
        assert shows(app, "settings.watch", "before-repair")  # the end of it, too
        await pilot.press("q")  # closes the notes; does not quit
        await wait_for(pilot, lambda: not isinstance(app.screen, NoticeScreen), 10, "closed")
        assert app.is_running
