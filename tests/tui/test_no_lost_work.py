"""No lost work: type in the lab's editor, SIGKILL the lab, and what was
typed more than a couple of seconds before is on disk, whole (atomic writes:
never a truncated file), and the progress files still parse."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest
from conftest import REPO, gpulab_env

pytest.importorskip("textual")
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _tmux(sock: str, *args: str) -> str:
    return subprocess.run(
        ["tmux", "-L", sock, *args], capture_output=True, text=True, timeout=30
    ).stdout


def _wait(sock: str, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in _tmux(sock, "capture-pane", "-p", "-t", "lab"):
            return
        time.sleep(0.2)
    raise AssertionError(
        f"{text!r} never appeared:\n{_tmux(sock, 'capture-pane', '-p', '-t', 'lab')}"
    )


@pytest.mark.slow
def test_sigkill_loses_at_most_the_last_seconds_of_typing(tmp_path):
    home = tmp_path / "workspace"
    env = gpulab_env(home)
    # An existing workspace: no welcome screen, straight to the lesson.
    path = subprocess.run(
        # Lesson 02 opens on its first step, softmax_row.
        [sys.executable, "-m", "gpulab", "where", "softmax_row"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    exports = " ".join(f"{k}={shlex.quote(env[k])}" for k in ("GPULAB_HOME", "PYTHONPATH"))
    sock = f"gpulab-kill-{uuid.uuid4().hex[:8]}"
    command = (
        f"cd {shlex.quote(str(REPO))} && exec env {exports} TERM=xterm-256color "
        f"{shlex.quote(sys.executable)} -m gpulab"
    )
    _tmux(sock, "new-session", "-d", "-s", "lab", "-x", "100", "-y", "30", command)
    try:
        pid = int(_tmux(sock, "display-message", "-p", "-t", "lab", "#{pane_pid}").strip())
        _wait(sock, "Lesson 01 —", 60)  # the lesson shown (the list steps aside at 100)
        _tmux(sock, "send-keys", "-t", "lab", "C-p")
        _wait(sock, "Search for commands", 10)
        _tmux(sock, "send-keys", "-t", "lab", "-l", "lesson: open 02")
        _wait(sock, "Triton 101: softmax", 10)
        _tmux(sock, "send-keys", "-t", "lab", "Enter")
        _wait(sock, "gpulab — 02", 10)
        _tmux(sock, "send-keys", "-t", "lab", "e")
        _wait(sock, "EDIT — Esc to stop", 10)  # the footer: typing goes into the file
        _tmux(sock, "send-keys", "-t", "lab", "C-End")
        marker = f"# kept-{uuid.uuid4().hex[:6]}"
        _tmux(sock, "send-keys", "-t", "lab", "Enter")
        _tmux(sock, "send-keys", "-t", "lab", "-l", marker)
        # Typed once the lab shows it: on a busy machine (CI's two cores, both
        # running tests) the keys take a while to reach it, and a key still
        # in tmux's pipe was never typed into the lab.
        _wait(sock, marker, 20)
        time.sleep(3.0)  # stop typing for longer than the autosave delay (~1 s)
        # What a learner reads before walking away: the status line's "saved".
        _wait(sock, "· saved ·", 15)
        _tmux(sock, "send-keys", "-t", "lab", "-l", "  # typed just before the kill")
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
    finally:
        _tmux(sock, "kill-server")
    text = open(path).read()
    assert marker in text
    # Whole, never half-written: the starter plus what was typed (the line
    # break typed before the marker may land anywhere in it).
    starter = (REPO / "exercises" / "softmax_row.py").read_text()
    rest = text.replace(marker, "").replace("  # typed just before the kill", "")
    assert rest.replace("\n", "") == starter.replace("\n", "")
    state = home / ".gpulab" / "state.json"
    if state.exists():
        json.loads(state.read_text())
    assert not list((home / "exercises").glob(".*.tmp"))
