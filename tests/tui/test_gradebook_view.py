"""`gpulab grade view` at 80x24, driven with Pilot on a generated class
(its results replayed through the real worker and ingest): the grid,
sorting, filtering, a student's history and a score distribution; and
`gpulab serve --gradebook` serves this view."""

from __future__ import annotations

import argparse

import pytest

pytest.importorskip("textual")
pytest.importorskip("textual_plotext")

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _class(tmp_path):
    """The class of tests/gradebook, graded and ingested."""
    from gpulab.gradebook.ingest import ingest
    from tests.gradebook.classroom import Replay, make_class

    k = make_class(tmp_path)
    k.grade(Replay())
    f = k.folder()
    ingest(f.conn, f.cfg, f.root)
    f.close()
    return k


def _rows(table) -> list[str]:
    return [table.get_row_at(i)[0] for i in range(table.row_count)]


async def _loaded(pilot):
    from textual.widgets import DataTable

    table = pilot.app.query_one("#grades", DataTable)
    for _ in range(100):
        await pilot.pause(0.05)
        if table.row_count:
            return table
    raise AssertionError("the gradebook never loaded")


async def test_the_view_at_80x24(tmp_path):
    from gpulab.tui.gradebook_app import DistributionScreen, GradebookApp, HistoryScreen

    k = _class(tmp_path)
    app = GradebookApp(k.root)
    async with app.run_test(size=(80, 24)) as pilot:
        table = await _loaded(pilot)
        assert _rows(table) == ["s01", "s02", "s03", "s04", "s05", "s06", "s07", "s08"]
        labels = [str(c.label) for c in table.columns.values()]
        assert labels == ["student", "copy_ceiling /5", "softmax /10", "comm_cost /5", "total"]
        # Every column fits the 80 columns: nothing to scroll to.
        assert sum(c.get_render_width(table) for c in table.columns.values()) <= 80
        row = table.get_row("s06")
        assert row[2].plain == "5.6L" and row[2].style == "green"
        assert table.get_row("s03")[2].plain == "0 refused"
        assert table.get_row("s05")[2].style == "yellow"  # a timeout
        # Sort by total (the cursor's column), then the other way.
        table.focus()
        table.move_cursor(column=4)
        await pilot.pause()
        assert table.cursor_column == 4
        await pilot.press("s")
        assert _rows(table)[-1] == "s01"
        await pilot.press("s")
        assert _rows(table)[0] == "s01"
        # Filter by a status, then clear.
        await pilot.press("slash", *"crashed")
        await pilot.pause()
        assert _rows(table) == ["s04"]
        await pilot.press("enter", "escape")
        await pilot.pause()
        assert len(_rows(table)) == 8
        # A student's history.
        table.move_cursor(row=_rows(table).index("s02"), column=0)
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert isinstance(app.screen, HistoryScreen)
        history = app.screen.query_one("#history")
        for _ in range(40):
            if history.row_count:
                break
            await pilot.pause(0.05)
        assert history.row_count == 3
        assert sorted(history.get_row_at(i)[0] for i in range(3)) == [
            "comm_cost",
            "copy_ceiling",
            "softmax",
        ]
        await pilot.press("escape")
        # The distribution of softmax's scores.
        table.move_cursor(column=2)
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause(0.3)
        assert isinstance(app.screen, DistributionScreen)
        assert app.screen.scores and max(app.screen.scores) == 7.0
        title = str(app.screen.query_one("#dist-title").render())
        assert title.startswith("softmax:") and "1 crashed" in title
        await pilot.press("escape", "q")


def test_serve_runs_the_gradebook_view(tmp_path):
    from gpulab.cli.commands.serve import command_line

    line = command_line(argparse.Namespace(workspace=None, gradebook=str(tmp_path)))
    assert line.endswith(f"-m gpulab grade view --course {tmp_path}")
    assert command_line(argparse.Namespace(workspace=None, gradebook=None)).endswith("-m gpulab")
