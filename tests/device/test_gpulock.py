"""The GPU timing lock serialises timing across processes and names the holder."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpulab.gpu import gpulock

HOLD = """
import sys, time
from gpulab.gpu.gpulock import gpu_timing_lock
with gpu_timing_lock("checking softmax", gpu=7):
    print("held", flush=True)
    time.sleep(float(sys.argv[1]))
"""


SHARE = """
import sys, time
from gpulab.gpu.gpulock import gpu_in_use
with gpu_in_use(gpu=7):
    print("in use", flush=True)
    time.sleep(float(sys.argv[1]))
"""


def _start(code: str, seconds: float, expect: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == expect
    return proc


def test_second_timer_waits_and_is_told_who_holds(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULAB_LOCK_DIR", str(tmp_path))
    proc = _start(HOLD, 2, "held")
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


def test_a_check_running_kernels_keeps_timing_out(tmp_path, monkeypatch):
    # The H200 case: one learner's correctness runs landed in another's
    # timed batches, and the honest kernel was refused for it.
    monkeypatch.setenv("GPULAB_LOCK_DIR", str(tmp_path))
    proc = _start(SHARE, 1.5, "in use")
    messages = []
    t0 = time.monotonic()
    with gpulock.gpu_timing_lock("mine", gpu=7, on_wait=messages.append, poll_s=0.05):
        waited = time.monotonic() - t0
    proc.wait(10)
    assert waited > 0.5
    assert messages == ["waiting for the GPU: other gpulab checks are running kernels on it"]


def test_checks_share_the_gpu_but_wait_for_a_timer(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULAB_LOCK_DIR", str(tmp_path))
    other = _start(SHARE, 3, "in use")
    t0 = time.monotonic()
    with gpulock.gpu_in_use(gpu=7, on_wait=lambda m: None, poll_s=0.05):
        assert time.monotonic() - t0 < 0.5  # shared with the other check
    other.wait(10)
    timer = _start(HOLD, 1.5, "held")
    messages = []
    t0 = time.monotonic()
    with gpulock.gpu_in_use(gpu=7, on_wait=messages.append, poll_s=0.05):
        waited = time.monotonic() - t0
    timer.wait(10)
    assert waited > 0.5
    assert len(messages) == 1 and f"pid {timer.pid}" in messages[0]


def test_a_check_times_inside_its_own_hold_and_keeps_it_after(tmp_path, monkeypatch):
    # Never waits on itself; after timing, its hold is back, so a timer in
    # another process waits again.
    monkeypatch.setenv("GPULAB_LOCK_DIR", str(tmp_path))
    with gpulock.gpu_in_use(gpu=7):
        t0 = time.monotonic()
        with gpulock.gpu_timing_lock("mine, timing", gpu=7, on_wait=lambda m: None):
            assert time.monotonic() - t0 < 0.5
            assert gpulock.holder(7)["what"] == "mine, timing"
        with gpulock.gpu_in_use(gpu=7):  # re-entrant
            pass
        assert gpulock.holder(7) is None
        probe = subprocess.run(
            [sys.executable, "-c", TRY_TIMING], capture_output=True, text=True, timeout=30
        )
        assert probe.stdout.strip() == "busy", probe.stderr
    probe = subprocess.run([sys.executable, "-c", TRY_TIMING], capture_output=True, text=True)
    assert probe.stdout.strip() == "free", probe.stderr


TRY_TIMING = """
import fcntl, os
from gpulab.gpu import gpulock
fd = os.open(gpulock._paths(7)[0], os.O_RDWR)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("free")
except BlockingIOError:
    print("busy")
"""


def test_a_waiting_timer_goes_before_checks_that_start_later(tmp_path, monkeypatch):
    # Without the gate, checks that keep starting would keep a timer out.
    monkeypatch.setenv("GPULAB_LOCK_DIR", str(tmp_path))
    first = _start(SHARE, 1.5, "in use")
    timer = subprocess.Popen(
        [sys.executable, "-c", HOLD.replace("print(", "print(time.time(), "), "1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)  # the timer is waiting for `first`, holding the gate
    with gpulock.gpu_in_use(gpu=7, on_wait=lambda m: None, poll_s=0.05):
        joined = time.time()
    timed_at = float(timer.stdout.readline().split()[0])
    first.wait(10)
    timer.wait(10)
    assert joined > timed_at + 0.5  # the later check waited for the whole timing


@pytest.mark.gpu
def test_gpu_a_neighbours_correctness_runs_leave_an_honest_timing_alone(tmp_path):
    # Measured on the H200 before the shared hold: this honest kernel failed
    # as "implausible timing" (33 ms a call unexplained) while another
    # check's one-program softmax ran its correctness cases.
    import json
    import os
    import threading

    root = Path(__file__).resolve().parents[1]  # tests/
    slow = root / "fixtures" / "slow_kernels"
    env = {**os.environ, "GPULAB_LOCK_DIR": str(tmp_path)}

    def check(ws, exercise, file, *extra):
        cmd = [sys.executable, "-m", "gpulab", "--workspace", str(tmp_path / ws), "check"]
        cmd += [exercise, "--file", str(slow / file), "--device", "cuda", *extra]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=400)

    stop = threading.Event()
    runs = []

    def neighbour():
        while not stop.is_set():
            runs.append(check("n", "softmax", "softmax_one_program.py", "--no-timing"))

    t = threading.Thread(target=neighbour)
    t.start()
    try:
        time.sleep(5)  # the neighbour is in its correctness runs
        proc = check("w", "bandwidth", "bandwidth_small_blocks.py", "--json")
    finally:
        stop.set()
        t.join()
    result = json.loads(proc.stdout)
    assert result["status"] == "passed", result["summary"]
    assert runs and all(r.returncode == 0 for r in runs), [r.stdout[-300:] for r in runs]


def test_a_lock_file_left_read_only_by_another_user_still_locks(tmp_path, monkeypatch):
    # Another user's lock and gate files, which their umask left read-only:
    # flock needs no write access, so the lock still works. (Opening for
    # writing is refused as it would be for that user: this box runs as root.)
    import os

    monkeypatch.setenv("GPULAB_LOCK_DIR", str(tmp_path))
    real_open = os.open
    refused = []

    def open_(path, flags, *mode):
        if str(path).endswith((".lock", ".gate")) and flags & os.O_RDWR:
            refused.append(Path(path).suffix)
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *mode)

    for suffix in (".lock", ".gate"):
        (tmp_path / f"gpulab-gpu7{suffix}").write_text("")
    monkeypatch.setattr(gpulock.os, "open", open_)
    with gpulock.gpu_in_use(gpu=7), gpulock.gpu_timing_lock("mine, timing", gpu=7):
        assert gpulock.holder(7)["what"] == "mine, timing"
    assert {".lock", ".gate"} <= set(refused)
    (tmp_path / "gpulab-gpu7.lock").unlink()  # and none there to open read-only: it says which
    with pytest.raises(OSError, match="cannot open the GPU lock .*gpulab-gpu7.lock"):
        with gpulock.gpu_in_use(gpu=7):
            pass
