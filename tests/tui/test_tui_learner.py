"""The lab keeping up with the learner (issue 48), in Textual's Pilot at
80x24: watch mode re-checks on the in-lab editor's saves; progress a second
gpulab process records shows within seconds; a pass keeps its results on
screen and its toast names the step, briefly; the time limit shows as a
check counts; gpulab changed under the lab offers a restart, not a crash.
No real check runs here (start_check is stubbed where one would)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

pytest.importorskip("textual")

from gpulab.tui.editor import AUTOSAVE_DELAY, ExercisePane  # noqa: E402
from gpulab.tui.messages import CheckFinished, CheckStarted  # noqa: E402
from gpulab.tui.sidebar import LessonList  # noqa: E402
from gpulab.wire.result import CheckResult  # noqa: E402
from tests.conftest import REPO  # noqa: E402
from tests.tui.test_tui import make_app, shows, wait_for  # noqa: E402

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


@pytest.fixture
def anyio_backend():
    return "asyncio"


def stubbed(ws, **options):
    """The app with its checks recorded instead of run, and every toast's
    title beside its message."""
    app = make_app(ws, **options)
    app.started = []  # type: ignore[attr-defined]
    app.start_check = lambda lesson, path, explain=False: app.started.append(lesson.exercise)  # type: ignore[method-assign]
    app.toasts = []  # type: ignore[attr-defined]
    notify = app.notify

    def record(message, **kw):
        app.toasts.append((kw.get("title", ""), str(message)))  # type: ignore[attr-defined]
        return notify(message, **kw)

    app.notify = record  # type: ignore[method-assign]
    return app


async def test_watch_mode_checks_on_the_editors_own_saves(ws):
    app = stubbed(ws)
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("softmax")
        await pilot.pause()
        await pilot.press("w", "e", "ctrl+home", "x")
        # The autosave, a second after typing stops, is a save: it checks.
        await wait_for(pilot, lambda: app.started == ["softmax"], 10, "the autosave's check")
        pane = app.query_one(ExercisePane)
        assert not pane.dirty and pane.editing
        assert app.active_pane == "exercise"  # the learner typing is left typing
        # ctrl+s with nothing left to save (the autosave was first): still a check.
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.started == ["softmax", "softmax"]
        # Not watching: the autosave saves and checks nothing.
        await pilot.press("escape", "w", "e", "y")
        await pilot.pause(AUTOSAVE_DELAY + 1.0)
        assert not pane.dirty and app.started == ["softmax", "softmax"]
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.started == ["softmax", "softmax"]
        assert any("nothing to save" in m for _, m in app.toasts)


RECORD = """
import sys
from gpulab.wire.result import CheckResult
from gpulab.lab.workspace import Workspace
ws = Workspace.open(sys.argv[1])
ws.record_result("softmax", CheckResult.from_json({
    "status": "passed", "passed": True, "summary": "all 14 cases correct (from another terminal)",
    "cases": [{"name": "1x1 fp32", "passed": True}],
}))
"""


async def test_progress_another_process_records_shows_in_the_lab(ws):
    app = stubbed(ws)
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("softmax")
        await pilot.pause()
        app.action_show_pane("results")
        await wait_for(pilot, lambda: shows(app, "No check yet for"), 30, "the empty Results")
        # A `gpulab check` in another terminal: a second process writes the result.
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        subprocess.run([sys.executable, "-c", RECORD, str(ws.root)], check=True, env=env)
        await wait_for(
            pilot, lambda: shows(app, "from another terminal"), 30, "the other process's result"
        )
        sidebar = app.query_one(LessonList)
        assert "✔" in str(sidebar.get_option("softmax").prompt)
        assert app.started == []


async def test_a_pass_keeps_its_results_and_its_toast_names_the_step(ws):
    app = stubbed(ws)
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("softmax_row")
        await pilot.pause()
        app.action_show_pane("results")
        lesson = app.lesson
        summary = "all 8 cases correct (Triton interpreter on the CPU: correctness only, no timing)"
        result = CheckResult.from_json(
            {
                "status": "passed",
                "passed": True,
                "summary": summary,
                "cases": [{"name": "3×7 fp32", "passed": True, "max_abs": 1e-8}],
            }
        )
        app.runner.run_id += 1
        app.post_message(CheckFinished(app.runner.run_id, lesson, result))
        await wait_for(pilot, lambda: app.lesson.exercise == "softmax_wide", 10, "the next step")
        await pilot.pause()
        # The passing results stay on screen, with what opened above them.
        assert shows(app, "Open now:", "PASS", "3×7 fp32")
        title, message = app.toasts[-1]
        assert title == "PASS: step 1 of 3, softmax_row", app.toasts
        assert len(message) < 90 and summary not in message


async def test_a_running_check_shows_its_time_limit(ws):
    app = stubbed(ws)
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("softmax")
        await pilot.pause()
        app.action_show_pane("results")
        app.checks.started.publish(CheckStarted(1, app.lesson, "cpu", 60.0))
        await pilot.pause(0.7)
        assert shows(app, "s of 60 s")


async def test_the_triad_lessons_roofline_is_fp32(ws):
    app = stubbed(ws, gpu_info=None)
    async with app.run_test(size=(120, 40)) as pilot:
        app.action_open_lesson("bandwidth")
        await pilot.pause()
        app.action_show_pane("roofline")
        await wait_for(pilot, lambda: shows(app, "fp32 roofline"), 30, "the fp32 roof")
        assert not shows(app, "bf16 roofline")


# A lab started from a copy of gpulab, whose package is then changed as a
# reinstall changes it (the files replaced, one the lab has not imported yet
# gone), headless in a second process: the real reinstall takes minutes.
CHANGED = """
import asyncio, json, os, sys, tempfile
from pathlib import Path
import gpulab
from gpulab.lab.workspace import Workspace
from gpulab.wire.result import CheckResult
from gpulab.tui.app import build_app
from gpulab.gpu.devinfo import GpuInfo

async def main():
    ws = Workspace.open(sys.argv[1])
    ws.record_result("softmax_wide", CheckResult.from_json(
        {"status": "failed", "passed": False, "summary": "1 of 10 cases wrong"}
    ))
    out = {"imported_report_at_start": "gpulab.lab.report" in sys.modules}
    app = build_app(ws, device="cpu", welcome=False, gpu_info=GpuInfo())
    toasts = []
    notify = app.notify
    app.notify = lambda message, **kw: (toasts.append(str(kw.get("title"))), notify(message, **kw))
    async with app.run_test(size=(80, 24)) as pilot:
        app.action_open_lesson("softmax_row")
        await pilot.pause()
        pkg = Path(gpulab.__file__).parent
        (pkg / "lab" / "report.py").unlink()
        init = pkg / "__init__.py"
        text = init.read_text()
        init.unlink()
        init.write_text(text)  # a new file, as pip writes it
        for _ in range(50):
            await pilot.pause(0.1)
            if "gpulab changed" in toasts:
                break
        out["toast"] = "gpulab changed" in toasts
        # n: the next step, whose last result the Results pane shows with
        # gpulab.lab.report, not imported yet: the lab died of that import.
        # Now it ends as it must (Textual stops a loop an exception left),
        # its edit saved, without a traceback, and says why.
        app.simulate_key("n")  # not pilot.press: it waits on a loop that has stopped
        for _ in range(100):
            await asyncio.sleep(0.1)
            if app.package_changed_error:
                break
    out["why"] = app.package_changed_error
    out["crashed"] = app._exception is not None
    print(json.dumps(out))

asyncio.run(main())
"""


def test_gpulab_changed_under_the_lab_offers_a_restart(tmp_path, ws):
    copy = tmp_path / "site"
    shutil.copytree(REPO / "gpulab", copy / "gpulab", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(copy), "GPULAB_CONTENT": str(REPO)}
    started = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHANGED), str(ws.root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert not out["imported_report_at_start"]
    assert out["toast"] and not out["crashed"], (out, time.monotonic() - started)
    assert "gpulab.lab.report" in out["why"], out


def test_after_gpulab_changed_the_learner_is_told_and_asked(monkeypatch, capsys):
    from gpulab.tui.app import restart_wanted

    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    assert restart_wanted("ModuleNotFoundError: x", ask=lambda _: "")
    assert not restart_wanted("ModuleNotFoundError: x", ask=lambda _: "n")
    said = capsys.readouterr().err
    assert "gpulab changed on disk" in said and "Your work is saved" in said
