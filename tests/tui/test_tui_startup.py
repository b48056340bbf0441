"""The TUI process stays light: it never imports torch/triton/jax.

Both are measured in a fresh subprocess ("the only way to prove a deferral
actually defers", harlequin): the test process has imported whatever the
other tests needed.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import gpulab_env

pytest.importorskip("textual")

# Runs the real app headless at 80x24; reports CPU seconds until Textual's
# Ready event (the first frame is on screen), then visits every pane, the
# help and the palette, and lists the heavy modules that got imported.
SCRIPT = r"""
import asyncio, json, sys, time
t0 = time.process_time()
from textual import events
from gpulab.tui.app import build_app
from gpulab.gpu.devinfo import GpuInfo
seen = {}
def hook(message):
    if isinstance(message, events.Ready) and "ready" not in seen:
        seen["ready"] = time.process_time() - t0
async def main():
    app = build_app(sys.argv[1], device="cpu", gpu_info=GpuInfo(), welcome=False)
    async with app.run_test(size=(80, 24), message_hook=hook) as pilot:
        await pilot.pause()
        for key in "123456":
            await pilot.press(key)
            await pilot.pause(0.2)
            if key == "2":
                await pilot.press("escape")
        await pilot.pause(1.0)
        await pilot.press("f1")
        await pilot.pause(0.2)
        await pilot.press("escape", "ctrl+p")
        await pilot.pause(0.3)
        heavy = sorted(m for m in ("torch", "triton", "jax", "numpy") if m in sys.modules)
        print(json.dumps({"first_paint_cpu_s": seen["ready"], "heavy": heavy,
                          "no_color": app.no_color}))
asyncio.run(main())
"""


def run_script(tmp_path) -> dict:
    env = gpulab_env(tmp_path / "workspace")
    env.pop("NO_COLOR", None)
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "workspace")],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_first_screen_paints_and_the_ui_never_imports_torch(tmp_path):
    report = run_script(tmp_path)
    print(f"first paint after {report['first_paint_cpu_s']:.2f} s of CPU")
    assert report["heavy"] == [], f"the UI process imported {report['heavy']}"
    # How fast is a benchmark's question, not a test's: scripts/tools/app_speed.py
    # measures it and BENCHMARKS.md keeps the figures (a shared 2-core CI box
    # put 1.11 s of CPU where an idle one puts 0.55 s). Here only a gross
    # regression fails, the kind that means a heavy import or a blocking mount.
    assert report["first_paint_cpu_s"] < 5.0
    assert report["no_color"] is False


def test_no_color_is_respected(ws, monkeypatch):
    from gpulab.tui.app import build_app

    monkeypatch.setenv("NO_COLOR", "1")
    assert build_app(ws, device="cpu").no_color is True  # Textual then draws in monochrome


def test_an_unusable_course_or_workspace_is_a_message_not_a_crash(run_gpulab, tmp_path):
    out = run_gpulab(env=gpulab_env(tmp_path / "ws", GPULAB_CONTENT=str(tmp_path / "none")))
    assert out.returncode == 2
    assert "manifest.toml" in out.stderr and "Traceback" not in out.stderr
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    out = run_gpulab("--workspace", str(blocker / "ws"))
    assert out.returncode == 2
    assert "cannot open the workspace" in out.stderr and "Traceback" not in out.stderr
