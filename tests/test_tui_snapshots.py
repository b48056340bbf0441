"""Snapshot tests of the main screens at 80x24 and 120x40 (pytest-textual-snapshot).

Deterministic by construction: a frozen course (tests/snapshots/course, not
the real one, which changes as lessons are written), a fixed workspace path,
no GPU detection, no syntax highlighting (tree-sitter may or may not be
installed), canned results and attempts, no clocks.

Update after an intended change: pytest tests/test_tui_snapshots.py --snapshot-update
and look at the SVGs in tests/snapshots/test_tui_snapshots/.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("textual")
pytest.importorskip("pytest_textual_snapshot")

HERE = Path(__file__).resolve().parent / "snapshots"
WORKSPACE = Path("/tmp/gpulab-snapshots/workspace")
SIZES = [(80, 24), (120, 40)]


@pytest.fixture(autouse=True)
def _snapshots_in_tests_snapshots(monkeypatch):
    """Keep the SVGs in tests/snapshots/<module>/ rather than __snapshots__."""
    import pytest_textual_snapshot as pts

    def dirname(cls, *, test_location):
        return str(HERE / Path(test_location.filepath).stem)

    monkeypatch.setattr(pts.SVGImageExtension, "dirname", classmethod(dirname))


@pytest.fixture
def snapshot_ws(monkeypatch):
    """The fixed workspace (its path is on the welcome screen), one test at a time
    even under pytest-xdist."""
    from gpulab.fsutil import file_lock
    from gpulab.workspace import Workspace

    with file_lock(WORKSPACE.parent / "lock"):
        if WORKSPACE.exists():
            shutil.rmtree(WORKSPACE)
        monkeypatch.setenv("GPULAB_HOME", str(WORKSPACE))
        monkeypatch.setenv("GPULAB_CONTENT", str(HERE / "course"))
        yield Workspace.open(WORKSPACE)


def build(ws, **options):
    from gpulab.content import load_course
    from gpulab.device.devinfo import GpuInfo
    from gpulab.tui.app import build_app

    options.setdefault("welcome", False)
    return build_app(
        ws,
        device="cpu",
        course=load_course(HERE / "course"),
        gpu_info=GpuInfo(),
        syntax=False,
        poll=True,
        **options,
    )


def with_history(ws) -> None:
    """A failed last result and three attempts with fixed times."""
    result = json.loads((HERE / "failed_result.json").read_text(encoding="utf-8"))
    (ws.state_dir / "results").mkdir(parents=True, exist_ok=True)
    (ws.state_dir / "results" / "softmax.json").write_text(json.dumps(result))
    attempts = [
        {
            "time": f"2026-11-30T09:0{i}:00",
            "passed": False,
            "summary": s,
            "device": result["device"],
        }
        for i, s in enumerate(
            [
                "your code exited with code 1 before reporting a result",
                "case 1×1 fp32: no Triton kernel was launched",
                result["summary"],
            ]
        )
    ]

    def change(state):
        state["exercises"]["softmax"] = {"status": "failed", "attempts": attempts, "hints": 1}
        state["last_lesson"] = "02_triton_101_softmax"

    ws.update(change)


async def settle(pilot) -> None:
    """Let the lazy panes render (the file watcher never completes: not waited for)."""
    await pilot.pause()
    for _ in range(200):
        if all(w.is_finished or w.group == "file-watch" for w in pilot.app.workers):
            break
        await pilot.pause(0.05)
    await pilot.pause(0.3)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_welcome(snap_compare, snapshot_ws, size):
    assert snap_compare(build(snapshot_ws, welcome=True), terminal_size=size, run_before=settle)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_lesson_with_a_hint(snap_compare, snapshot_ws, size):
    with_history(snapshot_ws)
    assert snap_compare(build(snapshot_ws), terminal_size=size, run_before=settle)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_exercise_editor(snap_compare, snapshot_ws, size):
    with_history(snapshot_ws)

    async def run_before(pilot):
        from gpulab.tui.editor import CodeEditor

        await settle(pilot)
        await pilot.press("e")
        pilot.app.query_one(CodeEditor).cursor_blink = False  # frozen, as harlequin does
        await settle(pilot)

    assert snap_compare(build(snapshot_ws), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_results_and_history(snap_compare, snapshot_ws, size):
    with_history(snapshot_ws)
    assert snap_compare(build(snapshot_ws), press=["3"], terminal_size=size, run_before=settle)


def test_help_keys(snap_compare, snapshot_ws):
    async def run_before(pilot):
        await settle(pilot)
        pilot.app.set_focus(None)
        await pilot.press("f1")
        await settle(pilot)

    assert snap_compare(build(snapshot_ws), terminal_size=(80, 24), run_before=run_before)


def test_exercise_view_mode(snap_compare, snapshot_ws):
    """2 shows the exercise in VIEW mode: read-only, and the footer says so."""
    with_history(snapshot_ws)

    async def run_before(pilot):
        from gpulab.tui.editor import CodeEditor

        await settle(pilot)
        await pilot.press("2")
        pilot.app.query_one(CodeEditor).cursor_blink = False
        await settle(pilot)

    assert snap_compare(build(snapshot_ws), terminal_size=(80, 24), run_before=run_before)
