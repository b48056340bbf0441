"""What the hints say once they run out: it depends on whether the exercise passed."""

from __future__ import annotations

import pytest

pytest.importorskip("textual")

from gpulab.tui.lesson_pane import hints_markdown  # noqa: E402
from gpulab.wire.result import CheckResult


def test_last_hint_line_follows_the_state(course):
    lesson = course.find("softmax")
    before = hints_markdown(lesson, 3)
    assert "unlocks once your exercise passes" in before
    after = hints_markdown(lesson, 3, passed=True)
    assert "unlocks" not in after and "You have passed" in after and "**s**" in after
    assert "Press **h** for hint 2" in hints_markdown(lesson, 1, passed=True)


def test_cli_hint_after_a_pass_does_not_say_locked(run_gpulab, tmp_path):
    from gpulab.course.content import load_course
    from gpulab.lab.workspace import Workspace

    lesson = load_course().find("softmax")
    env_ws = run_gpulab("where").stdout.strip()
    ws = Workspace.open(env_ws)
    for _ in lesson.hints:
        ws.reveal_hint(lesson)
    r = run_gpulab("hint", "softmax")
    assert r.returncode == 0, r.stderr
    assert "once your exercise passes" in r.stdout
    ws.record_result("softmax", CheckResult.from_json({"passed": True, "summary": "ok"}))
    r = run_gpulab("hint", "softmax")
    assert "You have passed" in r.stdout and "once your exercise passes" not in r.stdout


@pytest.mark.anyio
async def test_lesson_pane_hints_update_after_a_pass(tmp_path):
    from gpulab.gpu.devinfo import GpuInfo
    from gpulab.tui.app import build_app

    app = build_app(tmp_path / "ws", device="cpu", welcome=False, gpu_info=GpuInfo())
    async with app.run_test(size=(100, 30)) as pilot:
        lesson = app.course.find("softmax")
        for _ in lesson.hints:
            app.workspace.reveal_hint(lesson)
        app.open_lesson(lesson)
        app.action_show_pane("lesson")
        pane = app.query_one("#lesson-pane")

        async def hints_text() -> str:
            for _ in range(100):
                await pilot.pause(0.05)
                if pane.children and pane._shown and pane._shown[0] == lesson.id:
                    break
            return app.query_one("#hints").source

        assert "unlocks once your exercise passes" in await hints_text()
        app.workspace.record_result(
            "softmax", CheckResult.from_json({"passed": True, "summary": "ok"})
        )
        pane.set_lesson(lesson, 3)  # what app.on_check_finished does after a check
        for _ in range(100):
            await pilot.pause(0.05)
            if pane._shown == (lesson.id, 3, True):
                break
        assert "You have passed" in app.query_one("#hints").source


@pytest.fixture
def anyio_backend():
    return "asyncio"
