"""Other users of the same machine: what they can put in the shared temp
folder, or read of a learner's workspace, must not reach the learner's files.

Shown with real files and processes, by modes and by what is followed; none
of these needs a second user (the shared folder is played by tmp_path)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpulab.gpu import gpulock

REPO = Path(__file__).resolve().parents[1]


def _victims_file(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    target = home / ".bashrc"
    target.write_text("# mine\n")
    target.chmod(0o644)
    return target


@pytest.mark.parametrize("suffix", [".lock", ".gate"])
def test_a_link_at_the_gpu_lock_is_refused_and_its_target_left_alone(tmp_path, monkeypatch, suffix):
    # Another user links gpulab-gpu0.gate to the learner's ~/.bashrc: the
    # lock opened it and made it 0666, so they could write it (and run code
    # as the learner at their next login).
    shared = tmp_path / "tmp"
    shared.mkdir()
    monkeypatch.setenv("GPULAB_LOCK_DIR", str(shared))
    target = _victims_file(tmp_path)
    (shared / f"gpulab-gpu0{suffix}").symlink_to(target)
    with pytest.raises(OSError, match="cannot open the GPU lock"):
        with gpulock.gpu_in_use(gpu=0):
            pass
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert target.read_text() == "# mine\n"


def test_a_hard_link_at_the_gpu_lock_is_not_made_world_writable(tmp_path, monkeypatch):
    # Where fs.protected_hardlinks is 0, another user may link a file of the
    # learner's at the lock's name: it is the learner's own, so the lock's
    # chmod 0666 went through.
    shared = tmp_path / "tmp"
    shared.mkdir()
    monkeypatch.setenv("GPULAB_LOCK_DIR", str(shared))
    target = _victims_file(tmp_path)
    os.link(target, shared / "gpulab-gpu0.lock")
    with gpulock.gpu_in_use(gpu=0):
        pass
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_the_holder_file_is_written_under_a_name_nobody_can_guess(tmp_path, monkeypatch):
    # `.gpulab-gpu0.holder.<pid>` was written (and made 0666) through any
    # link found there: pids are easy to guess.
    shared = tmp_path / "tmp"
    shared.mkdir()
    monkeypatch.setenv("GPULAB_LOCK_DIR", str(shared))
    target = _victims_file(tmp_path)
    (shared / f".gpulab-gpu0.holder.{os.getpid()}").symlink_to(target)
    with gpulock.gpu_timing_lock("mine", gpu=0):
        assert gpulock.holder(0)["what"] == "mine"
    assert target.read_text() == "# mine\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


FIFO = """
import sys
from gpulab.gpu.gpulock import gpu_in_use
try:
    with gpu_in_use(gpu=0):
        print("held")
except OSError as exc:
    print("refused:", exc)
"""


def test_a_fifo_at_the_gpu_lock_is_refused_not_waited_on(tmp_path):
    # Another user's fifo, readable by all: the lock could not open it for
    # writing and opened it for reading, which waits for a writer for ever,
    # with no word said.
    shared = tmp_path / "tmp"
    shared.mkdir()
    os.mkfifo(shared / "gpulab-gpu0.lock", 0o444)
    env = {**os.environ, "GPULAB_LOCK_DIR": str(shared), "PYTHONPATH": str(REPO)}
    try:
        out = subprocess.run(
            [sys.executable, "-c", FIFO], env=env, capture_output=True, text=True, timeout=30
        ).stdout
    except subprocess.TimeoutExpired:
        pytest.fail("the lock waited on a fifo another user put at its name")
    assert out.startswith("refused:") and "not a plain file" in out, out


def test_a_holder_file_shows_its_owner_and_no_terminal_escapes(tmp_path, monkeypatch):
    # The holder file is anyone's to write: `gpulab bench` printed its words
    # to the learner's terminal as they were (OSC 52 sets the clipboard), and
    # its "user" named whoever the writer liked.
    monkeypatch.setenv("GPULAB_LOCK_DIR", str(tmp_path))
    evil = {
        "user": "admin",
        "pid": 1,
        "what": "x\x1b]52;c;ZWNobyBoaQ==\x07\x1b[2J",
        "since": 0,
    }
    (tmp_path / "gpulab-gpu0.holder").write_text(json.dumps(evil))
    said = gpulock.describe(gpulock.holder(0))
    assert "\x1b" not in said and "\x07" not in said, said
    import pwd

    assert said.startswith(pwd.getpwuid(os.getuid()).pw_name + " "), said


def _umask(mask: int) -> int:
    return os.umask(mask)


def test_a_new_workspace_is_its_owners_alone(tmp_path):
    # With umask 022 the workspace was 0755: every user of the box could
    # list it and read what gpulab wrote there with the umask (traces).
    from gpulab.lab.workspace import Workspace

    old = _umask(0o022)
    try:
        ws = Workspace.open(tmp_path / "home" / "gpulab")
    finally:
        os.umask(old)
    for folder in (ws.root, ws.state_dir):
        assert not stat.S_IMODE(folder.stat().st_mode) & 0o077, oct(folder.stat().st_mode)
    # One an older gpulab made: its own folder in it is tightened.
    older = tmp_path / "older"
    (older / ".gpulab").mkdir(parents=True)
    (older / ".gpulab").chmod(0o755)
    assert not stat.S_IMODE(Workspace.open(older).state_dir.stat().st_mode) & 0o077


def test_a_checks_trace_is_its_owners_alone(tmp_path):
    # nvtx_profile's trace (the solution's ranges and operators) was 0644 in
    # a traces folder made with the umask: readable by every user.
    from types import SimpleNamespace

    from gpulab.judge.graders.nvtx_profile import copy_untrusted, trace_file

    # A traces folder as an older gpulab made it (0755): tightened too.
    (tmp_path / "old" / "traces").mkdir(parents=True)
    (tmp_path / "old" / "traces").chmod(0o755)
    old = _umask(0o022)
    try:
        old_ws = SimpleNamespace(request=SimpleNamespace(workspace=str(tmp_path / "old")))
        assert not stat.S_IMODE(trace_file(old_ws).parent.stat().st_mode) & 0o077
        ctx = SimpleNamespace(request=SimpleNamespace(workspace=str(tmp_path / "ws")))
        wanted = trace_file(ctx)
        written = tmp_path / "written.json"
        written.write_text("{}")
        copy_untrusted(written, wanted)
    finally:
        os.umask(old)
    assert not stat.S_IMODE(wanted.parent.stat().st_mode) & 0o077
    assert not stat.S_IMODE(wanted.stat().st_mode) & 0o077


SERVE_STARTS_S = 60


def test_the_serve_cookie_is_not_sent_to_another_users_server_on_this_host(tmp_path):
    # A browser sends a cookie to every port of the host that set it. The
    # session cookie of a lab on 127.0.0.1:PORT (Path=/) reached any server
    # another user ran on 127.0.0.1, once the learner's browser went there
    # (a link, or any page sending it there): replayed, it opened the lab,
    # which edits and checks files as the learner.
    pytest.importorskip("textual_serve")
    import asyncio
    import re
    import select
    import signal
    import socket
    import threading
    import time

    import aiohttp
    from conftest import gpulab_env

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        ["timeout", "-s", "INT", "-k", "10", "120", sys.executable, "-m", "gpulab", "serve"]
        + ["--port", str(port)],
        env=gpulab_env(tmp_path / "workspace"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    # The other user's server: records what the browser sends it.
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    other.listen(1)
    received: list[bytes] = []

    def answer() -> None:
        conn, _ = other.accept()
        with conn:
            received.append(conn.recv(65536))
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")

    threading.Thread(target=answer, daemon=True).start()
    try:
        seen, deadline = "", time.monotonic() + SERVE_STARTS_S
        fd = proc.stdout.fileno()
        while not re.search(r"\?token=[\w-]+\s", seen) and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.5)[0]:
                seen += os.read(fd, 65536).decode()
        url = re.search(r"(http://\S+\?token=[\w-]+)\s", seen).group(1)

        async def browse() -> str:
            # aiohttp's jar, as a browser's, keeps cookies by host, not port.
            jar = aiohttp.CookieJar(unsafe=True)
            async with aiohttp.ClientSession(cookie_jar=jar) as s:
                for _ in range(100):
                    try:
                        async with s.get(url) as r:
                            assert r.status == 200
                            break
                    except aiohttp.ClientConnectorError:
                        await asyncio.sleep(0.2)
                other_port = other.getsockname()[1]
                async with s.get(f"http://127.0.0.1:{other_port}/") as r:
                    await r.read()
            return received[0].decode("latin-1") if received else ""

        sent = asyncio.run(asyncio.wait_for(browse(), 60))
        assert sent.startswith("GET /"), sent
        assert "gpulab-session" not in sent, sent
    finally:
        other.close()
        for sig in (signal.SIGINT, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass


INDUCTOR_DIR = """
import os
os.umask(0o022)
from torch._inductor.runtime.cache_dir_utils import cache_dir
print(cache_dir())
"""


def test_a_trusted_childs_inductor_cache_is_no_name_another_user_can_take(tmp_path, monkeypatch):
    # Inductor's default cache is <temp>/torchinductor_<user>. Another user
    # made it first (0777) and rewrote the .py files the learner's
    # `gpulab profile graph_breaks` had compiled into it: the next run
    # imported them and ran their code as the learner.
    pytest.importorskip("torch")
    import getpass
    import tempfile

    from gpulab.lab import child

    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    planted = shared / f"torchinductor_{getpass.getuser()}"
    planted.mkdir()
    planted.chmod(0o777)
    out = subprocess.run(
        [sys.executable, "-c", INDUCTOR_DIR],
        env=child.env(TMPDIR=str(shared)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    used = Path(out.stdout.strip())
    assert out.returncode == 0 and used.is_absolute(), out.stderr[-2000:]
    st = used.lstat()
    assert used != planted and stat.S_ISDIR(st.st_mode)
    assert st.st_uid == os.getuid() and not st.st_mode & 0o077, (used, oct(st.st_mode))


SQUAT = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_who_keeps_the_gpu_lock_without_a_note_is_named(tmp_path, monkeypatch):
    # Any user may take the gate and keep it, writing no holder file (or one
    # of another pid): a waiting check said only "another process", so the
    # learner could not tell whom to ask. /proc/locks says which process holds it.
    if not Path("/proc/locks").exists():
        pytest.skip("needs /proc/locks")
    import pwd

    monkeypatch.setenv("GPULAB_LOCK_DIR", str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-c", SQUAT, str(tmp_path / "gpulab-gpu7.gate"), "1.5"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "held"
    messages: list[str] = []
    with gpulock.gpu_in_use(gpu=7, on_wait=messages.append, poll_s=0.05):
        pass
    proc.wait(10)
    assert messages and f"pid {proc.pid}" in messages[0], messages
    assert pwd.getpwuid(os.getuid()).pw_name in messages[0], messages


def test_gpulab_profile_keeps_its_traces_folder_to_its_owner(tmp_path):
    # nsys, ncu and torch.profiler write with the umask (0644): the folder
    # they write in is what keeps them from other users, an older one too.
    from conftest import gpulab_env

    ws = tmp_path / "ws"
    (ws / "traces").mkdir(parents=True)
    (ws / "traces").chmod(0o755)
    r = subprocess.run(
        [sys.executable, "-m", "gpulab", "profile", "graph_breaks", "--print-command"],
        env=gpulab_env(ws),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert not stat.S_IMODE((ws / "traces").stat().st_mode) & 0o077


def test_a_workspace_others_may_write_is_refused(tmp_path):
    # $GPULAB_HOME in a shared scratch folder, made first (0777) by another
    # user: `gpulab reset` left the learner's exercise 0666 there (the mode
    # of the attacker's file it replaced), and every file in it was theirs
    # to swap.
    from gpulab.lab.workspace import Workspace, WorkspaceError

    shared = tmp_path / "scratch" / "gpulab-me"
    (shared / "exercises").mkdir(parents=True)
    shared.chmod(0o777)
    with pytest.raises(WorkspaceError, match="any user may write"):
        Workspace.open(shared)
    assert not (shared / ".gpulab").exists()


def test_a_workspace_of_another_user_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a folder of another user's")
    import pwd

    from gpulab.lab.workspace import Workspace, WorkspaceError

    nobody = pwd.getpwnam("nobody")
    theirs = tmp_path / "gpulab-me"
    theirs.mkdir()
    os.chown(theirs, nobody.pw_uid, nobody.pw_gid)
    with pytest.raises(WorkspaceError, match="belongs to nobody"):
        Workspace.open(theirs)


def test_gpulab_probe_shows_other_users_process_names_without_escapes():
    # NVML names a process by its executable's path, which its owner chose:
    # ESC ] 52 in it wrote the clipboard of whoever ran `gpulab probe`.
    # (The table as `gpulab probe` prints it; NVML itself needs a GPU.)
    import io

    from rich.console import Console

    from gpulab.lab.probe import _gpu_table

    name = "/home/mallory/\x1b]52;c;ZWNobyBoaQ==\x1b\\\x1b[2Jpython"
    gpu = {
        "index": 0,
        "fields": {
            "name": {"value": "NVIDIA H200"},
            "processes": {"value": [{"pid": 4242, "name": name, "type": "C", "used_mib": 1}]},
        },
    }
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=200).print(_gpu_table(gpu))
    assert "\x1b]" not in out.getvalue() and "\x1b[2J" not in out.getvalue()
    assert "4242" in out.getvalue()
