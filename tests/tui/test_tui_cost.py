"""The cost model's estimate and the load map in the lab at 80x24 (issue 48),
from the results of two real CPU checks (tests/fixtures/advice: the
reference triad, passing, and a triad whose mask is off by one), and the
palette's restore and side-by-side commands."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("textual")

from test_tui import make_app, shows, wait_for  # noqa: E402

from gpulab.tui.results import ResultsPane  # noqa: E402
from gpulab.wire.result import CheckResult  # noqa: E402

pytestmark = pytest.mark.anyio
SIZE = (80, 24)
ADVICE = Path(__file__).resolve().parents[1] / "fixtures" / "advice"
DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture
def anyio_backend():
    return "asyncio"


def advice(name: str) -> CheckResult:
    return CheckResult.from_json(json.loads((ADVICE / name).read_text("utf-8")))


async def _results(app, pilot, result: CheckResult) -> ResultsPane:
    app.action_open_lesson("bandwidth")
    await pilot.pause()
    await pilot.press("3")
    pane = app.query_one(ResultsPane)
    pane.finish(result, [])
    await pilot.pause(0.3)
    return pane


async def scroll_until(app, pilot, pane, text: str) -> bool:
    """Scroll `pane` down from its top until `text` is on screen."""
    pane.scroll_home(animate=False)
    for _ in range(60):
        await pilot.pause(0.05)
        if shows(app, text):
            return True
        pane.scroll_relative(y=3, animate=False)
    return False


async def test_the_load_map_of_a_wrong_case_at_80x24(ws):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        pane = await _results(app, pilot, advice("triad_off_by_one_cpu.json"))
        assert shows(app, "FAIL")
        # Scrolled to the map: the tiles of 256 and the last element never stored.
        assert await scroll_until(
            app, pilot, pane, "never stored, a masked lane pointed there: [999]"
        )
        # Program 3's last row: 39 elements stored, the 1000th's lane masked.
        assert shows(app, "960  " + "3" * 39 + "-", "256  " + "1" * 64)
        if os.environ.get("GPULAB_WRITE_DOCS"):  # the docs' screenshot (docs/costmodel.md)
            pane.scroll_relative(y=2, animate=False)
            await pilot.pause(0.2)
            app.save_screenshot(str(DOCS / "load-map-80x24.svg"))


async def test_the_estimate_of_a_passing_cpu_check_at_80x24(ws):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        pane = await _results(app, pilot, advice("triad_reference_cpu.json"))
        assert await scroll_until(app, pilot, pane, "What it would cost on a GPU (model)")
        assert shows(app, "moves 1.0x the minimum bytes: at best")
        assert await scroll_until(app, pilot, pane, "a model, not a measurement")


async def test_the_roofline_pane_marks_the_cpu_estimate_as_a_model(ws):
    ws.record_result("bandwidth", advice("triad_reference_cpu.json"))
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("bandwidth")
        await pilot.pause()
        await pilot.press("4")
        pane = app.query_one("#roofline-pane")
        await wait_for(pilot, lambda: shows(app, "bandwidth (model)"), 30, "the plot's point")
        assert await scroll_until(app, pilot, pane, "CPU estimates: a model, not a measurement")
        if os.environ.get("GPULAB_WRITE_DOCS"):
            pane.scroll_home(animate=False)
            await pilot.pause(0.3)
            app.save_screenshot(str(DOCS / "cpu-roofline-estimate-80x24.svg"))


async def test_the_palette_restores_a_backup_and_compares_after_a_pass(ws):
    from gpulab.tui import in_place

    lesson = ws.course.find("bandwidth") if hasattr(ws, "course") else None
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("bandwidth")
        await pilot.pause()
        lesson = app.lesson
        path = ws.exercise_path(lesson)
        path.write_text("# my version\n")
        ws.reset(lesson)
        (backup,) = in_place.backups(app)
        in_place.restore(app, backup)
        await pilot.pause(0.2)
        await pilot.press("y")
        await wait_for(pilot, lambda: path.read_text() == "# my version\n", 30, "restore")
        in_place.compare(app)  # not passed yet: locked
        await pilot.pause(0.2)
        assert any("unlocks once your exercise passes" in n for n in app.notes)
        ws.record_result("bandwidth", advice("triad_reference_cpu.json"))
        in_place.compare(app)
        await wait_for(pilot, lambda: shows(app, "yours beside the reference"), 30, "compare")
        assert shows(app, "my version")
