"""The check bus (gpulab/tui/check_bus.py): the panes follow a check themselves.

A pane mounted in a bare App, with only what it is given (a workspace, a
bus), updates from a published CheckFinished: nothing reaches into the lab's
app. In the lab, a check that a newer one replaced is recorded and reaches
no pane.
"""

from __future__ import annotations

import pytest

pytest.importorskip("textual")

from textual.app import App, ComposeResult  # noqa: E402

from gpulab.tui.check_bus import CheckBus  # noqa: E402
from gpulab.tui.messages import CheckFinished  # noqa: E402
from gpulab.tui.results import ResultsPane  # noqa: E402
from gpulab.tui.sidebar import LessonList, PassedSummary  # noqa: E402
from gpulab.wire.result import CheckResult  # noqa: E402
from tests.tui.test_tui import make_app, wait_for  # noqa: E402

pytestmark = pytest.mark.anyio  # anyio's pytest plugin runs the async tests

PASS = {"status": "passed", "passed": True, "summary": "all cases correct", "cases": []}


@pytest.fixture
def anyio_backend():
    return "asyncio"


class Bare(App[None]):
    """An app with nothing of the lab's: no workspace, lesson or panes to mediate."""

    def __init__(self, course, ws) -> None:
        super().__init__()
        self.course, self.ws = course, ws
        self.bus = CheckBus(self)

    def compose(self) -> ComposeResult:
        yield PassedSummary(self.course, self.ws, self.bus, id="summary")
        yield LessonList(self.course, self.ws, self.bus, id="lessons")
        yield ResultsPane(self.ws, self.bus, id="results-pane")


def text(widget) -> str:
    return str(widget.content)


async def test_panes_update_from_a_published_check_by_themselves(ws, course):
    app = Bare(course, ws)
    lesson = course.find("softmax")
    async with app.run_test(size=(100, 40)) as pilot:
        results = app.query_one(ResultsPane)
        results.show_idle(lesson, None, [])
        await pilot.pause()
        summary = app.query_one(PassedSummary)
        summary.recount()
        assert text(summary).startswith("0 of")
        prompt = str(app.query_one(LessonList).get_option("softmax").prompt)
        assert "✔" not in prompt

        result = CheckResult.from_json(PASS)
        ws.record_result("softmax", result)  # the lab's shell records before it publishes
        app.bus.finished.publish(CheckFinished(1, lesson, result))
        await pilot.pause()

        assert text(summary).startswith("1 of")
        assert "✔" in str(app.query_one(LessonList).get_option("softmax").prompt)
        assert "1 attempt, 1 passed" in str(results.query_one("#history").content.renderables[0])


async def test_a_pane_leaves_a_check_of_another_lesson_to_the_sidebar(ws, course):
    """The learner opened another lesson while the check ran: the Results
    pane keeps showing the open one; the sidebar still lists the new status."""
    app = Bare(course, ws)
    async with app.run_test(size=(100, 40)) as pilot:
        results = app.query_one(ResultsPane)
        results.show_idle(course.find("matmul_tile"), None, [])
        await pilot.pause()
        before = text(results.query_one("#result"))
        result = CheckResult.from_json(PASS)
        ws.record_result("softmax", result)
        app.bus.finished.publish(CheckFinished(1, course.find("softmax"), result))
        await pilot.pause()
        assert text(results.query_one("#result")) == before
        assert "✔" in str(app.query_one(LessonList).get_option("softmax").prompt)


async def test_a_replaced_check_is_recorded_and_reaches_no_pane(ws):
    app = make_app(ws)
    async with app.run_test(size=(120, 40)) as pilot:
        app.action_open_lesson("softmax")
        await pilot.pause()
        lesson = app.lesson
        heard: list[CheckFinished] = []
        app.checks.finished.subscribe(app.screen, heard.append, immediate=True)
        summary = app.query_one(PassedSummary)
        counted = text(summary)
        result_text = text(app.query_one("#result"))
        app.runner.run_id += 2  # two checks started since: the first is stale
        stale = app.runner.run_id - 1

        app.post_message(CheckFinished(stale, lesson, CheckResult.from_json(PASS)))
        await wait_for(pilot, lambda: ws.status("softmax") == "passed", 30, "recorded")
        await pilot.pause()
        assert heard == []
        assert text(summary) == counted
        assert text(app.query_one("#result")) == result_text
        assert "✔" not in str(app.query_one(LessonList).get_option("softmax").prompt)

        # The latest check reaches every pane.
        app.post_message(CheckFinished(app.runner.run_id, lesson, CheckResult.from_json(PASS)))
        await wait_for(pilot, lambda: heard, 30, "the latest check published")
        await pilot.pause()
        assert text(summary) != counted
        assert "✔" in str(app.query_one(LessonList).get_option("softmax").prompt)
        attempts = ws.exercise_state("softmax")["attempts"]
        assert len(attempts) == 2  # the stale check counted as an attempt too
