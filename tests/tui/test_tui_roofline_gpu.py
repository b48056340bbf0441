"""The Roofline pane's datasheet GPU, chosen inside the TUI and remembered."""

from __future__ import annotations

import pytest

pytest.importorskip("textual")
pytest.importorskip("textual_plotext")

from test_tui import make_app, shows, wait_for  # noqa: E402

from gpulab.gpu import hardware  # noqa: E402
from gpulab.lab.workspace import Workspace  # noqa: E402

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def drawn(pilot, key: str) -> None:
    pane = pilot.app.query_one("#roofline-pane")
    await wait_for(pilot, lambda: pane._drawn == key, 20, f"the {key} roofline")
    await pilot.pause(0.3)


async def test_choose_the_datasheet_gpu_and_find_it_next_time(ws):
    t4 = hardware.GPUS["t4"]
    app = make_app(ws)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("4")
        await drawn(pilot, hardware.DEFAULT_GPU)  # no GPU here, no setting: the default
        assert ws.get_setting("gpu") is None  # showing is not choosing
        # The palette's command puts the focus on the list; enter opens it.
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"choose the datasheet", "enter")
        await wait_for(
            pilot, lambda: app.focused is app.query_one("#roofline-gpu"), 5, "the GPU list"
        )
        await pilot.press("enter", "home", "enter")  # T4, the first row
        await drawn(pilot, "t4")
        assert ws.get_setting("gpu") == "t4"
        assert shows(app, f"{t4.name} (chosen here; saved as the workspace setting 'gpu')")
    again = make_app(Workspace.open(ws.root))
    async with again.run_test(size=(80, 24)) as pilot:
        await pilot.press("4")
        await drawn(pilot, "t4")
        assert again.query_one("#roofline-gpu").value == "t4"
        assert ws.get_setting("gpu") == "t4"  # not overwritten by the list's first value
        assert shows(again, "the workspace setting 'gpu'")
