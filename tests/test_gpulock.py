"""The GPU timing lock serialises timing across processes and names the holder."""

from __future__ import annotations

import subprocess
import sys
import time

from gpulab.device import gpulock

HOLD = """
import sys, time
from gpulab.device.gpulock import gpu_timing_lock
with gpu_timing_lock("checking softmax", gpu=7):
    print("held", flush=True)
    time.sleep(float(sys.argv[1]))
"""


def test_second_timer_waits_and_is_told_who_holds(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULAB_LOCK_DIR", str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, "2"],
        stdout=subprocess.PIPE,
        text=True,
        env={**__import__("os").environ},
    )
    assert proc.stdout.readline().strip() == "held"
    h = gpulock.holder(7)
    assert h and h["pid"] == proc.pid and h["what"] == "checking softmax"
    messages = []
    t0 = time.monotonic()
    with gpulock.gpu_timing_lock("mine", gpu=7, on_wait=messages.append, poll_s=0.05):
        waited = time.monotonic() - t0
        assert gpulock.holder(7)["what"] == "mine"
    proc.wait(10)
    assert waited > 0.5
    assert len(messages) == 1 and f"pid {proc.pid}" in messages[0]
    assert "checking softmax" in messages[0]
    assert gpulock.holder(7) is None


def test_other_gpus_do_not_wait(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULAB_LOCK_DIR", str(tmp_path))
    with gpulock.gpu_timing_lock("a", gpu=0):
        t0 = time.monotonic()
        with gpulock.gpu_timing_lock("b", gpu=1, on_wait=lambda m: None):
            assert time.monotonic() - t0 < 0.5
