"""Snapshot tests of every pane at 60x20, 80x24 and 120x40, and of the main
dialogs (pytest-textual-snapshot's SVGs, compared by syrupy).

Deterministic by construction: a frozen course (tests/snapshots/course, not
the real one, which changes as lessons are written), a fixed workspace path,
no GPU detection, a canned device probe (no torch child, no CPU model), no
syntax highlighting (tree-sitter may or may not be installed), canned results
and attempts, no clocks.

Cheap: test_every_pane starts the lab once per size and photographs the seven
panes in turn (pytest-textual-snapshot would start it once a picture).

Regenerate after an intended change (a sidebar or pane that looks different),
then look at the changed SVGs in tests/snapshots/test_tui_snapshots/ (a
browser shows them) before committing:

    PYTHONPATH=$PWD python -m pytest -n 0 tests/tui/test_tui_snapshots.py --snapshot-update
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("textual")
pytest.importorskip("pytest_textual_snapshot")

HERE = Path(__file__).resolve().parents[1] / "snapshots"
WORKSPACE = Path("/tmp/gpulab-snapshots/workspace")
SIZES = [(80, 24), (120, 40)]
EVERY_SIZE = [(60, 20), (80, 24), (120, 40)]


@pytest.fixture(autouse=True)
def _snapshots_in_tests_snapshots(monkeypatch):
    """Keep the SVGs in tests/snapshots/<module>/ rather than __snapshots__."""
    import pytest_textual_snapshot as pts

    def dirname(cls, *, test_location):
        return str(HERE / Path(test_location.filepath).stem)

    monkeypatch.setattr(pts.SVGImageExtension, "dirname", classmethod(dirname))


@pytest.fixture(autouse=True)
def _canned_device_probe(monkeypatch):
    """The Device pane without this machine in it: no NVML, a CPU-only torch
    (what the child answers on a CPU box, without starting it), a fixed CPU."""
    from gpulab.lab import probe

    monkeypatch.setattr(
        probe,
        "query_nvml",
        lambda *_a: {"available": False, "reason": "no NVML (libnvidia-ml not found)"},
    )
    monkeypatch.setattr(
        probe,
        "ask_torch",
        lambda *_a, **_k: {
            "available": True,
            "torch": "2.13.0+cpu",
            "triton": "3.9.0",
            "cuda_version": None,
            "hip_version": None,
            "devices": [],
            "reason": "this torch is a CPU-only build",
        },
    )
    cpu = {"model": "Snapshot CPU", "cores": 2, "usable_cores": 2, "memory_gib": 8.0}
    monkeypatch.setattr(probe, "cpu_info", lambda: {**cpu, "arch": "x86_64"})


@pytest.fixture
def snapshot_ws(monkeypatch):
    """The fixed workspace (its path is on the welcome screen), one test at a time
    even under pytest-xdist."""
    from gpulab.fsutil import file_lock
    from gpulab.lab.workspace import Workspace

    with file_lock(WORKSPACE.parent / "lock"):
        if WORKSPACE.exists():
            shutil.rmtree(WORKSPACE)
        monkeypatch.setenv("GPULAB_HOME", str(WORKSPACE))
        monkeypatch.setenv("GPULAB_CONTENT", str(HERE / "course"))
        # The glossary is cached a process: a test before this one in the same
        # pytest-xdist worker had cached the real course's, not the frozen one.
        from gpulab.course.glossary import default_glossary

        default_glossary.cache_clear()
        yield Workspace.open(WORKSPACE)
        default_glossary.cache_clear()


def build(ws, **options):
    from gpulab.course.content import load_course
    from gpulab.gpu.devinfo import GpuInfo
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
    """Let the lazy panes render. The file watcher never completes: not
    waited for; under a dialog the lesson's render is done once its first
    screenful is in (the rest waits for the dialog: gpulab.tui.lesson_pane)."""
    app = pilot.app

    def settled(worker) -> bool:
        if worker.is_finished or worker.group == "file-watch":
            return True
        if worker.group == "lesson-render" and len(app.screen_stack) > 1:
            return bool(app.query("#lesson-text > *"))
        return False

    await pilot.pause()
    for _ in range(200):
        if all(settled(w) for w in app.workers):
            break
        await pilot.pause(0.05)
    await pilot.pause(0.3)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_welcome(snap_compare, snapshot_ws, size):
    assert snap_compare(build(snapshot_ws, welcome=True), terminal_size=size, run_before=settle)


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


def test_help_keys(snap_compare, snapshot_ws):
    async def run_before(pilot):
        await settle(pilot)
        pilot.app.set_focus(None)
        await pilot.press("f1")
        await settle(pilot)

    assert snap_compare(build(snapshot_ws), terminal_size=(80, 24), run_before=run_before)


@pytest.mark.parametrize("size", EVERY_SIZE, ids=lambda s: f"{s[0]}x{s[1]}")
def test_every_pane(snapshot, snapshot_ws, size):
    """Panes 1-7 with a failed attempt and a hint: the lesson (its hint), the
    exercise in VIEW mode, the results and history, the roofline, the device,
    the roadmap and the serving calculator. One file a pane:
    test_every_pane[WxH][pane].svg."""
    from pytest_textual_snapshot import SVGImageExtension

    from gpulab.tui.editor import CodeEditor
    from gpulab.tui.shell import PANES

    with_history(snapshot_ws)
    app = build(snapshot_ws)
    shots: dict[str, str] = {}

    async def visit(pilot) -> None:
        await settle(pilot)
        pilot.app.query_one(CodeEditor).cursor_blink = False
        for key, pane in enumerate(PANES, start=1):
            await pilot.press(str(key))
            await settle(pilot)
            await pilot.wait_for_scheduled_animations()
            shots[pane] = pilot.app.export_screenshot(title="gpulab")

    async def run() -> None:
        async with app.run_test(size=size) as pilot:
            await visit(pilot)

    asyncio.run(run())
    svgs = snapshot.use_extension(SVGImageExtension)
    wrong = [
        pane
        for pane in PANES
        if not svgs(name=pane) == shots[pane]  # noqa: SIM201
    ]
    assert not wrong, f"panes that look different at {size[0]}x{size[1]}: {wrong}"
