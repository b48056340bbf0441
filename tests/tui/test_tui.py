"""Pilot tests of the TUI: panes, bindings, checks in a real child process.

Checks run for real (a child process, the Triton interpreter on the CPU,
device "cpu" so the result is the same on every machine). Each full check
costs a few seconds, so one test walks the main path (edit, check, watch
mode re-check after an external write, solution) instead of several.
"""

from __future__ import annotations

import html
import re
import time
from pathlib import Path

import pytest

pytest.importorskip("textual")

from conftest import reference_source, starter_source  # noqa: E402

from gpulab.gpu.devinfo import GpuInfo  # noqa: E402
from gpulab.tui.app import GpulabApp, build_app  # noqa: E402
from gpulab.tui.editor import ExercisePane  # noqa: E402
from gpulab.tui.screens import ConfirmScreen, HelpScreen, SolutionScreen, WelcomeScreen  # noqa: E402
from gpulab.tui.sidebar import LessonList  # noqa: E402
from gpulab.wire.result import CheckResult

SIZE = (80, 24)
pytestmark = pytest.mark.anyio  # anyio's pytest plugin runs the async tests


@pytest.fixture
def anyio_backend():
    return "asyncio"


def make_app(ws, **options) -> GpulabApp:
    options.setdefault("welcome", False)
    options.setdefault("gpu_info", GpuInfo())
    app = build_app(ws, device="cpu", **options)
    app.notes = []  # type: ignore[attr-defined]
    notify = app.notify

    def record(message, **kw):
        app.notes.append(str(message))  # type: ignore[attr-defined]
        return notify(message, **kw)

    app.notify = record  # type: ignore[method-assign]
    return app


def screen_text(app) -> str:
    svg = app.export_screenshot()
    text = html.unescape("".join(re.findall(r"<text[^>]*>(.*?)</text>", svg, re.S)))
    return text.replace("\xa0", " ")


def _squash(text: str) -> str:
    return re.sub(r"[\s│▕▏]+", "", text)


def shows(app, *needles: str) -> bool:
    """All needles are on screen (line breaks and borders ignored)."""
    on_screen = _squash(screen_text(app))
    return all(_squash(n) in on_screen for n in needles)


async def wait_for(pilot, condition, timeout: float = 90.0, what: str = "") -> None:
    """Until `condition()` holds. These waits are for what happens, not how
    fast (speed lives in `scripts/tools/app_speed.py`): on CI's two loaded
    cores a hint once took more than 5 s to show, so no wait is shorter
    than 30 s."""
    deadline = time.monotonic() + max(timeout, 30.0)
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        await pilot.pause(0.1)


def softmax_path(ws) -> Path:
    return ws.root / "exercises" / "softmax.py"


async def open_softmax(pilot) -> None:
    pilot.app.action_open_lesson("softmax")
    await pilot.pause()


# --- start-up -----------------------------------------------------------------------
async def test_first_start_welcomes_and_begins(ws):
    app = make_app(ws, welcome=None)  # a fresh workspace: ws.created
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, WelcomeScreen)
        await wait_for(pilot, lambda: shows(app, "Welcome to gpulab"), 5, "welcome")
        assert shows(app, "Triton interpreter")  # no GPU here, and what that means
        assert shows(app, str(ws.root)[:20])
        await pilot.press("enter")  # "Start lesson NN"
        await pilot.pause()
        assert not isinstance(app.screen, WelcomeScreen)
        assert app.lesson is not None and app.lesson.ready
        assert app.active_pane == "lesson"
        # Its first step, not the lesson's final exercise (lesson 01: copy_ceiling).
        assert app.lesson == app.course.lesson_exercises(app.lesson)[0], app.lesson.exercise


async def test_returning_learner_continues_where_they_left_off(ws):
    from gpulab.lab.workspace import Workspace

    ws.set_last_lesson("02_triton_101_softmax")
    again = Workspace.open(ws.root)
    assert not again.created
    app = make_app(again, welcome=None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert not isinstance(app.screen, WelcomeScreen)
        assert app.lesson.exercise == "softmax"
        assert any("Continuing lesson 02" in n for n in app.notes)


async def test_sidebar_lists_the_nine_lessons_with_status(ws, course):
    ws.record_result(
        "softmax", CheckResult.from_json({"passed": True, "summary": "ok", "status": "passed"})
    )
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        sidebar = app.query_one(LessonList)
        # A line per lesson, and under a lesson with steps one per exercise.
        extra = sum(len(course.lesson_exercises(le)) for le in course.lessons if le.steps[:-1])
        assert sidebar.option_count == len(course.lessons) + extra and len(course.lessons) == 9
        # At 80 columns the list steps aside for the lesson; b brings it, focused.
        assert not app.query_one("#sidebar").display
        await pilot.press("b")
        await pilot.pause()
        assert app.query_one("#sidebar").display and app.focused is sidebar
        # (At 80 columns, with the scroll bar, the titles are cut.)
        assert shows(app, "✔ 02 Triton 101", "1 of 3 passed")
        # Keyboard: move to lesson 03 and open it with enter; the list steps aside.
        sidebar.highlighted = sidebar.get_option_index("matmul") - 4  # lesson 02's last
        await pilot.press("down", "enter")
        await pilot.pause()
        assert app.lesson.number == "03"
        assert app.active_pane == "lesson"
        assert not app.query_one("#sidebar").display
        assert app.focused is app.query_one("#lesson-pane")


@pytest.mark.slow
async def test_panes_by_key_and_by_mouse(ws):
    app = make_app(ws)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_softmax(pilot)
        for key, pane in zip(
            "1234567",
            ("lesson", "exercise", "results", "roofline", "device", "roadmap", "serving"),
            strict=True,
        ):
            await pilot.press(key)
            await pilot.pause()
            assert app.active_pane == pane
            if pane == "exercise":
                # Focused but in VIEW mode: the next digit is a key, not text.
                assert app.focused is app.query_one(ExercisePane).editor
                assert not app.query_one(ExercisePane).editing
        await pilot.click("#--content-tab-results")
        await pilot.pause()
        assert app.active_pane == "results"
        await pilot.click("#--content-tab-lesson")
        await pilot.pause()
        assert app.active_pane == "lesson"


async def test_palette_opens_a_lesson(ws):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"open 03")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.lesson.number == "03", 10, "lesson 03 to open")


# --- the editor -------------------------------------------------------------------------
async def test_ctrl_s_saves_and_autosave_follows_typing(ws, monkeypatch):
    import gpulab.tui.editor as editor_mod

    # No autosave while ctrl+s is tested: on a busy machine five key presses
    # took longer than a short delay, and the autosave got there first.
    monkeypatch.setattr(editor_mod, "AUTOSAVE_DELAY", 60)
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        await pilot.press("e")
        pane = app.query_one(ExercisePane)
        await pilot.press("ctrl+home", "x", "y", "z", "enter")
        assert pane.dirty
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert softmax_path(ws).read_text().startswith("xyz\n")
        assert not pane.dirty
        monkeypatch.setattr(editor_mod, "AUTOSAVE_DELAY", 0.3)
        await pilot.press("q", "u")  # q is a letter in the editor, not quit
        assert app.is_running and pane.editor.text.startswith("xyz\nqu")
        await wait_for(pilot, lambda: not pane.dirty, 5, "autosave")
        assert softmax_path(ws).read_text().startswith("xyz\nqu")


@pytest.mark.parametrize("poll", [False, True], ids=["file-events", "polling"])
async def test_external_change_reloads_a_clean_buffer(ws, poll):
    app = make_app(ws, poll=poll)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        await pilot.press("e")
        pane = app.query_one(ExercisePane)
        softmax_path(ws).write_text("# written by another editor\n")
        await wait_for(
            pilot, lambda: pane.editor.text == "# written by another editor\n", 10, "reload"
        )
        assert not pane.dirty


async def test_external_change_while_dirty_asks_and_never_overwrites_silently(ws, monkeypatch):
    import gpulab.tui.editor as editor_mod

    monkeypatch.setattr(editor_mod, "AUTOSAVE_DELAY", 60)  # keep the buffer dirty
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        await pilot.press("e")
        pane = app.query_one(ExercisePane)
        await pilot.press("ctrl+home", "m", "i", "n", "e")
        softmax_path(ws).write_text("theirs\n")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10, "the question")
        assert softmax_path(ws).read_text() == "theirs\n"  # nothing written yet
        # A save attempt while the question is open must not write either.
        assert pane.save() is False and softmax_path(ws).read_text() == "theirs\n"
        await pilot.press("n")  # keep mine
        await pilot.pause()
        assert softmax_path(ws).read_text().startswith("mine")
        # Second round, this time reloading from disk.
        await pilot.press("x")
        softmax_path(ws).write_text("theirs again\n")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10, "the question")
        await pilot.press("y")  # reload
        await pilot.pause()
        assert pane.editor.text == "theirs again\n" and not pane.dirty


# --- checks -----------------------------------------------------------------------------
@pytest.mark.slow
async def test_edit_check_watch_and_solution(ws):
    """Open lesson 02, edit, check (fails), then with watch mode on, another
    editor writes the reference: the check re-runs by itself and passes."""
    app = make_app(ws)
    messages: list = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await open_softmax(pilot)
        await pilot.press("e", "ctrl+home", "x", "enter", "escape")
        await pilot.press("c")
        assert app.checking and app.active_pane == "results"
        await wait_for(pilot, lambda: not app.checking, what="the starter's check")
        assert softmax_path(ws).read_text().startswith("x\n")  # saved before checking
        result = ws.last_result("softmax")
        assert result and not result.passed
        assert shows(app, "FAIL")
        assert any(type(m).__name__ == "CheckProgress" for m in messages)
        assert ws.status("softmax") == "failed"
        await pilot.press("s")  # solution still locked
        assert not isinstance(app.screen, SolutionScreen)
        assert any("unlocks once your exercise passes" in n for n in app.notes)

        await pilot.press("w")
        assert app.watch_mode
        softmax_path(ws).write_text(reference_source("softmax"))
        await wait_for(pilot, lambda: app.checking, 15, "watch mode to start a check")
        await wait_for(pilot, lambda: not app.checking, what="the reference's check")
        assert ws.last_result("softmax").passed
        assert shows(app, "PASS")
        assert ws.status("softmax") == "passed"
        assert len(ws.exercise_state("softmax")["attempts"]) == 2
        assert app.query_one(ExercisePane).editor.text == reference_source("softmax")
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, SolutionScreen)
        await pilot.press("escape")
        await pilot.press("w")
        assert not app.watch_mode


EVIL = """print("\\x1b[2J\\x1b[H\\x1b[32m PASS \\x1b]0;owned\\x07")


def softmax(x):
    raise RuntimeError("\\x1b[2K\\x1b[1A\\x1b[42m PASS [/] [b]bold[/b]")
"""


def rendered(renderable, width: int = 100) -> str:
    """What a renderable writes to a terminal (control codes and all)."""
    from rich.console import Console

    console = Console(width=width, force_terminal=True, color_system="truecolor")
    with console.capture() as cap:
        console.print(renderable)
    return cap.get()


async def test_learner_escapes_are_shown_as_text_in_the_results_pane(ws):
    """A check whose output and exception carry escape sequences (and markup):
    the Results pane, its history and the notification show them as text."""
    from textual.widgets import Static

    softmax_path(ws).parent.mkdir(parents=True, exist_ok=True)
    softmax_path(ws).write_text(EVIL)
    app = make_app(ws)
    async with app.run_test(size=(100, 40)) as pilot:
        await open_softmax(pilot)
        await pilot.press("c")
        await wait_for(pilot, lambda: not app.checking, what="the check")
        await pilot.pause(0.3)
        assert not ws.last_result("softmax").passed
        shown = "".join(
            rendered(app.query_one(f"#{name}", Static).content) for name in ("result", "history")
        )
        # Only the colours the pane itself chose: every ESC is followed by
        # rich's own SGR codes, never the learner's cursor moves or erases.
        for code in ("\x1b[2J", "\x1b[H", "\x1b[2K", "\x1b[1A", "\x1b]0;", "\x07"):
            assert code not in shown, code
        assert "␛[2K␛[1A␛[42m PASS [/] [b]bold[/b]" in shown
        assert "␛]0;owned␇" in shown
        assert shows(app, "␛[2K␛[1A␛[42m PASS")
        note = next(n for n in app.notes if "bold" in n)  # the toast (its title names softmax)
        assert "\x1b" not in note and "[/] [b]bold[/b]" in note


async def test_cancel_a_running_check(ws):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        await pilot.press("c")
        assert app.checking
        await pilot.pause(0.3)
        await pilot.press("x")
        await wait_for(pilot, lambda: not app.checking, 20, "the cancel")
        assert shows(app, "Check cancelled")
        assert ws.exercise_state("softmax").get("attempts") is None  # not an attempt


async def test_worker_errors_surface_and_the_ui_carries_on(ws, monkeypatch):
    import gpulab.lab.check as lab_check  # Lab.check runs the judge

    def broken(*_a, **_k):
        raise RuntimeError("simulated gpulab bug")

    monkeypatch.setattr(lab_check, "run_check", broken)
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        await pilot.press("c")
        await wait_for(pilot, lambda: not app.checking, 10, "the error")
        assert any("simulated gpulab bug" in n for n in app.notes)
        await pilot.press("1")
        assert app.active_pane == "lesson"


async def test_next_lesson_sidebar_toggle_and_ctrl_q(ws):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        await pilot.press("n")
        assert app.lesson.number == "03"
        sidebar = app.query_one("#sidebar")
        assert not sidebar.display  # below NARROW columns it steps aside for the lesson
        await pilot.press("b")
        assert sidebar.display
        await pilot.press("b")
        assert not sidebar.display
        await pilot.press("e", "ctrl+q")  # quits from inside the editor too
        await pilot.pause()
        assert not app.is_running


async def test_sidebar_follows_each_resize(ws):
    """The sidebar decision uses the new width at once (a handler that read
    App.size saw the previous one and lagged a resize behind)."""
    from gpulab.tui.shell import NARROW

    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        sidebar = app.query_one("#sidebar")
        for width, shown in (
            (NARROW + 2, True),
            (NARROW - 18, False),
            (NARROW + 7, True),
            (NARROW - 4, False),
        ):
            await pilot.resize_terminal(width, 30)
            await pilot.pause(0.1)
            assert sidebar.display == shown, (width, sidebar.display)


async def test_welcome_names_the_gpu_that_nvml_reports(ws, monkeypatch):
    """This machine has no GPU: NVML's answers are faked, the rest is real."""
    import pynvml

    monkeypatch.setattr(pynvml, "nvmlInit", lambda: None)
    monkeypatch.setattr(pynvml, "nvmlShutdown", lambda: None)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetCount", lambda: 1)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetHandleByIndex", lambda i: i)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetName", lambda h: "NVIDIA H200")
    monkeypatch.setattr(pynvml, "nvmlSystemGetDriverVersion", lambda: "570.86")
    app = make_app(ws, welcome=True, gpu_info=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: shows(app, "NVIDIA H200, driver 570.86"), 10, "the GPU")
        assert app.gpu_info.source == "nvml"


# --- hints, reset, help -----------------------------------------------------------------
async def test_hints_one_level_at_a_time(ws, course):
    lesson = course.find("softmax")
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        await pilot.press("h")
        await pilot.pause()
        assert ws.hint_level("softmax") == 1 and app.active_pane == "lesson"
        words = " ".join(lesson.hints[0].split()[:3]).replace("`", "")
        await wait_for(pilot, lambda: shows(app, "Hint 1 of 3", words), 5, "hint 1 in view")
        assert not shows(app, "Hint 2 of 3")
        await pilot.press("h", "h")
        assert ws.hint_level("softmax") == 3
        await pilot.press("h")
        assert ws.hint_level("softmax") == 3
        assert any("All three hints" in n for n in app.notes)


async def test_reset_asks_then_restores_the_starter(ws):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        softmax_path(ws).write_text("my work\n")
        await pilot.pause(0.8)
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("escape")  # no
        await pilot.pause()
        assert softmax_path(ws).read_text() == "my work\n"
        await pilot.press("r")
        await pilot.pause()
        await pilot.click("#yes")
        await pilot.pause()
        assert softmax_path(ws).read_text() == starter_source("softmax")
        backups = list(ws.backups_dir.glob("softmax-*.py"))
        assert len(backups) == 1 and backups[0].read_text() == "my work\n"
        assert any(str(backups[0]) in n for n in app.notes)
        await pilot.press("e")
        assert app.query_one(ExercisePane).editor.text == starter_source("softmax")


async def test_help_follows_the_focused_pane(ws):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        await pilot.press("e", "f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen) and app.screen.topic == "exercise"
        await wait_for(pilot, lambda: shows(app, "never overwrites silently"), 5, "help text")
        await pilot.press("escape", "escape")
        app.query_one(LessonList).focus()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen) and app.screen.topic == "sidebar"
        await pilot.press("escape")
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


async def test_broken_lesson_shows_its_error_and_the_rest_works(ws, tmp_path):
    import shutil

    from conftest import REPO

    from gpulab.course.content import load_course

    root = tmp_path / "content"
    for part in ("lessons", "exercises", "kernels"):
        shutil.copytree(REPO / part, root / part)
    manifest = root / "lessons" / "manifest.toml"
    text = manifest.read_text()
    start = text.index('id = "03_triton_tiled_matmul"')
    manifest.write_text(
        text[:start] + text[start:].replace('kind = "compute"', 'kind = "bogus"', 1)
    )
    course = load_course(root)
    broken = course.find("03")
    assert broken.error
    app = make_app(ws, course=course)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("b")  # the lesson list
        await pilot.pause()
        assert shows(app, "⚠ 03", "broken")
        app.action_open_lesson("03")
        await wait_for(pilot, lambda: shows(app, "This lesson is broken"), 5, "the error")
        await pilot.press("c")
        assert not app.checking and any("broken" in n for n in app.notes)
        app.action_open_lesson("softmax")
        await pilot.pause()
        assert app.lesson.exercise == "softmax" and app.lesson.ready


async def test_theme_is_remembered(ws):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.theme = "nord"
        await pilot.pause()
    assert ws.get_setting("theme") == "nord"
    app2 = make_app(ws)
    async with app2.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app2.theme == "nord"


# --- roofline, device, roadmap & glossary ----------------------------------------------
SNAPSHOTS = Path(__file__).resolve().parents[1] / "snapshots"


async def test_results_show_a_small_roofline_for_a_timed_run(ws):
    """A result timed on a GPU (canned: this machine has none) draws this run's points."""
    import json

    (ws.state_dir / "results").mkdir(parents=True, exist_ok=True)
    (ws.state_dir / "results" / "softmax.json").write_text(
        (SNAPSHOTS / "timed_result.json").read_text(encoding="utf-8")
    )
    app = make_app(ws, welcome=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_softmax(pilot)
        await pilot.press("3")
        await wait_for(pilot, lambda: bool(app.query("#mini-roofline")), 10, "the mini plot")
        plot = app.query_one("#mini-roofline")
        assert plot.display and {p.exercise for p in plot.model.points} == {"softmax"}
        assert len(plot.model.points) == len(
            json.loads((SNAPSHOTS / "timed_result.json").read_text())["timing"]["cases"]
        )
        await pilot.pause(0.3)
        assert shows(app, "Timing on NVIDIA H200", "H200")
        assert not shows(app, "could not be drawn")
        # Resizing rebuilds the plot: plotext must not re-log its data (it did).
        await pilot.resize_terminal(100, 30)
        await pilot.pause(0.3)
        assert not shows(app, "could not be drawn")


async def test_roofline_pane_and_export(ws):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        await pilot.press("4")
        await wait_for(pilot, lambda: bool(app.query("#roofline-plot")), 20, "the roofline")
        await pilot.pause(0.3)
        assert shows(app, "roofline", "ridge") and not shows(app, "could not be drawn")
        app.action_export_roofline()
        await wait_for(pilot, lambda: (ws.root / "roofline.svg").is_file(), 20, "the SVG")
        assert (ws.root / "roofline.svg").read_text().lstrip().startswith(("<svg", "<?xml"))


async def test_roadmap_and_glossary_search(ws):
    app = make_app(ws)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_softmax(pilot)
        await pilot.press("6")
        await pilot.pause(0.3)
        await pilot.click("#glossary-search")
        await pilot.press(*"aritmetic intensty")  # typos are forgiven
        await pilot.pause(0.3)
        assert shows(app, "Arithmetic intensity")
        await pilot.press("space", "q")  # a letter in the search box, not quit
        assert app.is_running
        assert app.query_one("#glossary-search").value == "aritmetic intensty q"
        await pilot.press("escape", "1")  # escape leaves the box; 1 is a key again
        assert app.active_pane == "lesson"


async def test_slash_jumps_to_the_glossary_but_types_in_the_editor(ws):
    app = make_app(ws)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_softmax(pilot)
        await pilot.press("/")  # from the lesson pane: straight to the search box
        await pilot.pause(0.3)
        assert app.active_pane == "roadmap"
        assert app.focused is app.query_one("#glossary-search")
        await pilot.press(*"mbarrier")
        await pilot.pause(0.3)
        assert shows(app, "two phases ahead")  # the mbarrier term, found
        await pilot.press("escape", "e")  # the exercise editor, in EDIT mode
        await pilot.pause(0.3)
        editor = app.query_one("#exercise-pane").editor
        assert app.focused is editor
        before = editor.text
        await pilot.press("/")  # a character there, not a jump
        await pilot.pause(0.2)
        assert app.active_pane == "exercise" and editor.text.count("/") == before.count("/") + 1


@pytest.mark.slow
async def test_device_pane_without_a_gpu(ws, monkeypatch):
    """NVML's answer shows at once (torch's child can take half a minute), the
    reason is said once, and m is not offered: there is nothing to measure."""
    import threading

    from gpulab.lab import probe

    torch_answers = threading.Event()
    real_ask = probe.ask_torch

    def slow_torch(*args, **kwargs):
        torch_answers.wait(30)
        return real_ask(*args, **kwargs)

    monkeypatch.setattr(probe, "ask_torch", slow_torch)
    app = make_app(ws)
    async with app.run_test(size=(120, 40)) as pilot:
        try:
            await open_softmax(pilot)
            await pilot.press("5")
            await wait_for(pilot, lambda: shows(app, "no NVIDIA GPU here"), 10, "the device line")
            await wait_for(pilot, lambda: shows(app, "torch and Triton: asking"), 10, "NVML")
            assert not torch_answers.is_set()
            assert "Measure" not in screen_text(app).splitlines()[-1]  # the footer
            await pilot.press("m")
            assert not app.probing and "nothing to measure" in app.notes[-1]
            torch_answers.set()
            await wait_for(pilot, lambda: not shows(app, "asking"), 60, "torch's answer")
            assert screen_text(app).count("no NVML") <= 1
            assert not shows(app, "not available in this installation")
        finally:
            torch_answers.set()  # the probe's thread ends with the test


async def test_progress_stages_drive_the_bar(ws, course):
    from textual.widgets import ProgressBar

    from gpulab.tui.results import ResultsPane, spark
    from gpulab.wire.events import parse

    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        pane = app.query_one(ResultsPane)
        pane.start(course.find("softmax"), "cpu")
        pane.progress(parse({"type": "stage", "text": "importing your file"}))
        bar = pane.query_one(ProgressBar)
        assert bar.total is None
        # The numbers drive the bar, not the words (which graders phrase freely).
        pane.progress(parse({"type": "stage", "text": "case 5 of 14: 7×1000 fp32"}))
        assert bar.total is None
        pane.progress(
            parse({"type": "stage", "text": "case 5 of 14: 7×1000 fp32", "progress": [4, 14]})
        )
        assert (bar.progress, bar.total) == (4, 14)
        pane.progress(
            parse(
                {
                    "type": "case",
                    "index": 6,
                    "total": 14,
                    "case": {"name": "6×781 fp16", "passed": False},
                }
            )
        )
        assert (bar.progress, bar.total) == (6, 14)
        await pilot.press("3")
        await pilot.pause()
        assert shows(app, "case 6 of 14: 6×781 fp16 WRONG")
        # On a GPU the verdict on correctness comes before the timing does.
        pane.progress(parse({"type": "correct", "cases": 14}))
        await pilot.pause()
        assert shows(app, "correct: all 14 cases right") and shows(app, "timing")
        # Then the grade, before the advice on where the time went.
        pane.progress(
            parse({"type": "graded", "grade": "B", "summary": "grade B: 72% of the roofline"})
        )
        await pilot.pause()
        assert shows(app, "graded: grade B: 72% of the roofline") and shows(app, "time went")
    assert spark([1, 2, 3]) == "▁▄█" and spark([]) == ""


async def test_keys_stay_with_an_open_dialog(ws):
    """Behind "Reset?" no check starts; in help q closes help, not the lab."""
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("c", "h")
        assert not app.checking and ws.hint_level("softmax") == 0
        await pilot.press("escape")
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("f1")  # closes help rather than stacking another
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("question_mark")
        await pilot.pause()
        await pilot.press("q")
        await pilot.pause()
        assert app.is_running and not isinstance(app.screen, HelpScreen)


def test_split_first_screen_cuts_at_a_blank_line_outside_code():
    from gpulab.tui.lesson_pane import split_first_screen

    short = "# T\n\nOne paragraph.\n"
    assert split_first_screen(short) == (short, "")
    lines = [f"line {i}" for i in range(10)] + [
        "```python",
        "x = 1",
        "",
        "y = 2",
        "```",
        "",
        "after",
    ]
    text = "\n".join(lines) + "\n"
    head, rest = split_first_screen(text, lines=11)
    assert head + rest == text
    # Not at the blank line inside the fence (line 12), but after the fence closes.
    assert head.endswith("```\n\n") and rest == "after\n"


async def test_the_whole_lesson_is_rendered_after_the_first_screen(ws, course):
    # The Lesson pane renders a lesson's first screenful, then appends the rest.
    from gpulab.tui.lesson_pane import lesson_markdown

    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await open_softmax(pilot)
        pane = app.query_one("#lesson-pane")
        want = lesson_markdown(course.find("softmax"))
        # Conditions, not clocks: the render's own completion, then the
        # screen's refresh cycles (how many a layout takes does not depend on
        # how loaded the machine is; the seconds do).
        await pane.wait_rendered()
        assert app.query_one("#lesson-text").source == want
        # and laid out: scrolled to the end, the last words of the lesson's
        # core path are on screen (its deep dives stay folded; see
        # tests/tui/test_tui_deep_dive.py), and the last deep dive's title.
        from gpulab.course.sections import split_sections

        sections = split_sections(want)
        core = [s for s in sections if not s.deep][-1].text
        last_words = " ".join(core.split()[-4:]).replace("`", "").replace("*", "")
        if sections[-1].deep:
            last_words = f"Deep dive: {sections[-1].title}"
        for _ in range(50):
            # Scrolled again on every cycle: on a busy machine the blocks can
            # still be laying out (the page growing) after the first scroll.
            pane.scroll_end(animate=False)
            await pilot.pause()
            if shows(app, last_words):
                break
        assert shows(app, last_words), "the lesson's last words are not on screen"


async def test_the_device_panes_keys_fit_80_columns(ws):
    """Issue 30: at 80 columns the Device pane's keys and the palette's hint
    cut the footer's last key to "? Hel"; below 100 columns they go closer."""
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await pilot.pause()
        footer = screen_text(app).rstrip().splitlines()[-1]
        assert "g Refresh" in footer and "? Help" in footer, footer
