"""A lesson's steps in the lab (Textual's Pilot): the sidebar lists them under
their lesson, passing a step opens the next, and any step can still be opened
from the sidebar or the palette; the lab reopens on the step last open."""

from __future__ import annotations

import pytest

pytest.importorskip("textual")

from gpulab.tui.editor import ExercisePane  # noqa: E402
from gpulab.tui.lesson_pane import lesson_markdown  # noqa: E402
from gpulab.tui.messages import CheckFinished  # noqa: E402
from gpulab.tui.sidebar import HEADER, LessonList  # noqa: E402
from gpulab.wire.result import CheckResult
from tests.conftest import reference_source  # noqa: E402
from tests.tui.test_tui import make_app, shows, wait_for  # noqa: E402

pytestmark = pytest.mark.anyio  # anyio's pytest plugin runs the async tests


@pytest.fixture
def anyio_backend():
    return "asyncio"


SIZE = (120, 40)
PASS = {"status": "passed", "passed": True, "summary": "all cases correct", "cases": []}


async def _select(pilot, option_id: str) -> None:
    """Highlight a sidebar option and press enter on it, as a learner does."""
    app = pilot.app
    sidebar = app.query_one(LessonList)
    sidebar.focus()
    sidebar.highlighted = sidebar.get_option_index(option_id)
    await pilot.press("enter")
    await pilot.pause()


async def test_passing_a_step_opens_the_next_and_any_step_can_be_opened(ws, course):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        sidebar = app.query_one(LessonList)
        # The lesson's own line, then one line per exercise under it.
        ids = [sidebar.get_option_at_index(i).id for i in range(sidebar.option_count)]
        at = ids.index(HEADER + "02_triton_101_softmax")
        assert ids[at + 1 : at + 4] == ["softmax_row", "softmax_wide", "softmax"]
        assert shows(app, "0 of 3 passed", "1. One row in one block", "3. the exercise: softmax")

        # The lesson's line opens its first exercise not yet passed: step 1.
        await _select(pilot, HEADER + "02_triton_101_softmax")
        assert app.lesson.exercise == "softmax_row"
        assert "Step 1 of 3: One row in one block" in lesson_markdown(app.lesson)
        assert app.query_one(ExercisePane).path.name == "softmax_row.py"

        # A real check of a right answer: the lab moves on to step 2 by itself.
        path = ws.exercise_path(app.lesson)
        path.write_text(reference_source("softmax_row"))
        await pilot.press("c")
        await wait_for(
            pilot,
            lambda: app.lesson.exercise == "softmax_wide" and not app.checking,
            240,
            "the next step after a pass",
        )
        assert ws.status("softmax_row") == "passed" and ws.status("softmax_wide") == "not started"
        assert any("On to step 2 of 3: Rows longer than a block" in n for n in app.notes)
        assert app.query_one(ExercisePane).path.name == "softmax_wide.py"
        assert sidebar.highlighted == sidebar.get_option_index("softmax_wide")
        await wait_for(pilot, lambda: shows(app, "1 of 3 passed"), 30, "the sidebar redrawn")
        # Now the lesson's line opens step 2, the first not yet passed.
        await _select(pilot, HEADER + "02_triton_101_softmax")
        assert app.lesson.exercise == "softmax_wide"

        # Jumping: a step of another lesson, and back to a passed one.
        await _select(pilot, "matmul_kloop")
        assert app.lesson.exercise == "matmul_kloop" and app.lesson.number == "03"
        await _select(pilot, "softmax_row")
        assert app.lesson.exercise == "softmax_row"

        # n: the next exercise, the lesson's next step.
        await pilot.press("escape")
        app.action_next_lesson()
        await pilot.pause()
        assert app.lesson.exercise == "softmax_wide"

        # The last step passing opens the lesson's exercise; the exercise
        # passing stays put (n opens the next lesson).
        app.post_message(CheckFinished(app.runner.run_id, app.lesson, CheckResult.from_json(PASS)))
        await wait_for(pilot, lambda: app.lesson.exercise == "softmax", 30, "the exercise")
        app.post_message(CheckFinished(app.runner.run_id, app.lesson, CheckResult.from_json(PASS)))
        await wait_for(pilot, lambda: ws.status("softmax") == "passed", 30, "recorded")
        await pilot.pause()
        assert app.lesson.exercise == "softmax"
        app.action_next_lesson()
        await pilot.pause()
        assert app.lesson.exercise == "matmul_tile"


async def test_a_pass_of_a_step_no_longer_open_moves_nothing(ws):
    """The learner opened something else while the step was checked."""
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("matmul_tile")
        await pilot.pause()
        step = app.lesson
        app.action_open_lesson("softmax_wide")
        await pilot.pause()
        app.post_message(CheckFinished(app.runner.run_id, step, CheckResult.from_json(PASS)))
        await wait_for(pilot, lambda: ws.status("matmul_tile") == "passed", 30, "recorded")
        await pilot.pause()
        assert app.lesson.exercise == "softmax_wide"


async def test_the_lab_reopens_on_the_step_last_open(ws):
    from gpulab.lab.workspace import Workspace

    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("matmul_kloop")
        await pilot.pause()
    assert ws.load_state()["last_lesson"] == "matmul_kloop"
    again = make_app(Workspace.open(ws.root), welcome=None)
    async with again.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert again.lesson.exercise == "matmul_kloop"
        assert any("Continuing lesson 03" in n and "step 2 of 3" in n for n in again.notes)


async def test_a_state_from_before_steps_opens_where_it_was(ws):
    """last_lesson as older versions wrote it (a lesson id): its exercise."""
    ws.set_last_lesson("03_triton_tiled_matmul")
    ws.record_result(
        "matmul", CheckResult.from_json({"passed": True, "summary": "ok", "status": "passed"})
    )
    from gpulab.lab.workspace import Workspace

    app = make_app(Workspace.open(ws.root))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.lesson.exercise == "matmul"
        # The lesson is passed (its exercise is), its new steps not started.
        assert shows(app, "✔ 03 Grouped-order tiled matmul", "1 of 3 passed")
