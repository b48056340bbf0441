"""gpulab.lab.child, the one process boundary every supervisor uses: the child
imports this gpulab, stopping it reaches every descendant in its group, and
an event stream ends on the child's end, the deadline or a cancel."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from gpulab.lab import child
from gpulab.wire.protocol import write_frame
from gpulab.wire.status import Status
from tests.conftest import REPO


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purpose.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_env_leads_pythonpath_with_this_gpulab_and_keeps_the_rest(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = child.env(PYTHONUNBUFFERED="1")
    assert env["PYTHONPATH"].split(os.pathsep) == [str(REPO), "/elsewhere"]
    assert env["PYTHONUNBUFFERED"] == "1" and env["PATH"] == os.environ["PATH"]
    code = "import gpulab, sys; print(gpulab.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd="/", capture_output=True, text=True, timeout=60
    ).stdout
    assert out.strip() == str(REPO / "gpulab" / "__init__.py")


def test_kill_tree_reaches_a_grandchild_after_the_child_has_exited():
    # The child starts a sleeper in its own group and exits at once: what an
    # orphaned compiler or a forked worker looks like.
    code = "import subprocess, sys; p = subprocess.Popen(['sleep', '60']); print(p.pid, flush=True)"
    proc = child.spawn([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    grandchild = int(proc.stdout.readline())
    proc.wait(timeout=30)
    assert _alive(grandchild)
    child.kill_tree(proc)
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_kill_tree_asks_with_sigterm_first(tmp_path):
    said = tmp_path / "said"
    code = (
        "import signal, sys, time, pathlib\n"
        "def bye(*a):\n"
        f"    pathlib.Path({str(said)!r}).write_text('term'); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = child.spawn([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    child.kill_tree(proc, term_s=10)
    assert said.read_text() == "term" and proc.returncode == 0


def test_json_lines_skip_chatter_and_end_with_the_child():
    code = (
        "import json; print('a library says hello'); print(json.dumps({'type': 'x'}));"
        "print('[1, 2]'); print(json.dumps({'type': 'y'}))"
    )
    proc = child.spawn([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    events = child.Events(child.json_line_reader(proc.stdout), deadline=time.monotonic() + 30)
    assert [e["type"] for e in events] == ["x", "y"] and events.stopped is None
    child.kill_tree(proc, exit_s=5)


def test_a_silent_child_stops_at_the_deadline_and_on_cancel():
    for cancel_after, want in ((None, Status.TIMEOUT), (0.2, Status.CANCELLED)):
        proc = child.spawn(
            [sys.executable, "-c", "import time; time.sleep(60)"], stdout=subprocess.PIPE, text=True
        )
        cancel = threading.Event()
        if cancel_after:
            threading.Timer(cancel_after, cancel.set).start()
        t0 = time.monotonic()
        events = child.Events(
            child.json_line_reader(proc.stdout),
            deadline=t0 + (30 if cancel_after else 0.3),
            cancel=cancel,
        )
        assert list(events) == [] and events.stopped == want
        assert time.monotonic() - t0 < 5
        child.kill_tree(proc)
        assert proc.returncode is not None


def test_frames_from_a_private_pipe():
    read_fd, write_fd = os.pipe()
    try:
        write_frame(write_fd, {"type": "stage", "text": "one"})
        write_frame(write_fd, {"type": "result", "result": {}})
        os.close(write_fd)
        events = child.Events(child.frame_reader(read_fd), deadline=time.monotonic() + 10)
        assert [e["type"] for e in events] == ["stage", "result"] and events.stopped is None
    finally:
        os.close(read_fd)
