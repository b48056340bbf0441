"""The sandbox boundary against a hostile submission (issue 27): the judge
opens nothing the sandbox controls, a check dies whole, and the sandbox sees
no other process, no grader's bytecode, no socket and no shared folder of the
host's. Real checks, real child processes, on the CPU."""

from __future__ import annotations

import os
import py_compile
import signal
import socket
import subprocess
import sys
import time
import uuid
from importlib.util import cache_from_source
from pathlib import Path

import pytest

from tests.conftest import REPO, gpulab_env, reference_source
from tests.sandbox.test_isolation import marked

REF = reference_source("softmax")


def namespaces_here() -> bool:
    probe = "import ctypes, sys; sys.exit(ctypes.CDLL(None).unshare(0x10000000 | 0x20000))"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


needs_namespaces = pytest.mark.skipif(
    not namespaces_here(), reason="the kernel refuses user namespaces here"
)

# A submission that tries everything at import and reports what worked in
# the exception its softmax raises (the judge shows it as the summary).
PROBE = """
import glob, os, socket
FOUND = []
SECRET = {secret!r}
for entry in os.listdir("/proc"):
    if entry.isdigit():
        try:
            if SECRET.encode() in open(f"/proc/{{entry}}/environ", "rb").read():
                FOUND.append("environ of " + entry)
        except OSError:
            pass
for pyc in {pycs!r}:
    try:
        open(pyc, "rb").read(16)
        FOUND.append("read " + os.path.basename(pyc))
    except OSError:
        pass
for path in ("/dev/shm/{marker}", "/tmp/{marker}", os.path.join(os.getcwd(), "{marker}")):
    try:
        with open(path, "wb") as f:
            f.write(b"x" * (1 << 20))
    except OSError:
        pass
# The judge used to create its tensor arena by name in this folder.
for i in range(4):
    try:
        os.symlink({victim!r}, os.path.join(os.getcwd(), f"arena-{{i}}.bin"))
    except OSError:
        pass
for address in ({unix!r}, "\\0" + {abstract!r}):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(address)
        FOUND.append("connected to " + address.strip("\\0"))
    except OSError:
        pass
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", {udp}))
    FOUND.append("sent UDP")
except OSError:
    pass
"""


@needs_namespaces
def test_a_hostile_import_reaches_nothing_outside_its_check(grade, tmp_path, monkeypatch):
    marker = f"gpulab-test-{uuid.uuid4().hex}"
    secret = f"token-{uuid.uuid4().hex}"
    monkeypatch.setenv("GPULAB_TEST_SECRET", secret)  # in the lab's and the judge's environment
    victim = tmp_path / "instructor-notes.txt"
    victim.write_text("precious")
    # Lesson 09's answer key and a kernel grader, compiled where Python would.
    pycs = []
    for module in ("gpulab/gpu/serving.py", "gpulab/judge/graders/softmax.py"):
        src = REPO / module
        pyc = cache_from_source(str(src))
        py_compile.compile(str(src), cfile=pyc)
        pycs.append(pyc)
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(tmp_path / "agent.sock"))
    listening.listen()
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind("\0" + marker)
    abstract.listen()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    src = PROBE.format(
        secret=secret,
        pycs=pycs,
        marker=marker,
        victim=str(victim),
        unix=str(tmp_path / "agent.sock"),
        abstract=marker,
        udp=udp.getsockname()[1],
    )
    src += "\ndef softmax(x):\n    raise RuntimeError('found: ' + '; '.join(FOUND))\n"
    try:
        r = grade("softmax", src)
    finally:
        listening.close()
        abstract.close()
    assert r["status"] == "failed"
    assert r["summary"].rstrip().endswith("found:"), r["summary"]
    with pytest.raises(BlockingIOError):
        udp.recv(16)
    assert victim.read_text() == "precious"
    assert not Path(f"/dev/shm/{marker}").exists()
    assert not Path(f"/tmp/{marker}").exists()
    assert any(s.startswith("namespaces: user, pid, mount, network") for s in r["isolation"])


@needs_namespaces
def test_a_setsid_double_fork_dies_with_its_judge(tmp_path):
    """SIGKILL the judge in the middle of a check: nothing it started lives on."""
    marker = f"gpulab-test-{uuid.uuid4().hex}"
    sleeper = f"import time; time.sleep(600)  # {marker}"
    sol = tmp_path / "hopper.py"
    sol.write_text(
        "import os, subprocess, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        subprocess.Popen([sys.executable, '-c', {sleeper!r}], start_new_session=True)\n"
        "    os._exit(0)\n"
        f"subprocess.Popen([sys.executable, '-c', {sleeper!r}])\n"
        "time.sleep(600)\n"
        "def softmax(x):\n    return x\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpulab", "check", "softmax", "--file", str(sol), "--device", "cpu"],
        env=gpulab_env(tmp_path / "ws"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while len(marked(marker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(marked(marker)) == 2
        judges = [p for p in marked("gpulab.judge.main") if _parent(p) == proc.pid]
        assert len(judges) == 1
        os.kill(judges[0], signal.SIGKILL)
        deadline = time.monotonic() + 5
        while marked(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marked(marker) == []
    finally:
        proc.kill()
        proc.wait()


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return -1


def test_the_sandbox_cannot_truncate_the_judges_memory(grade):
    """The arena's descriptor, kept and truncated: sealed, so the judge's
    mapping stays whole and the check goes on to grade the kernel."""
    src = (
        "import glob, os, socket\n"
        "def shrink(fd):\n"
        "    for size in (0, 1 << 40):\n"
        "        try:\n"
        "            os.ftruncate(fd, size)\n"
        "            print('resized', flush=True)\n"
        "        except OSError:\n"
        "            print('refused', flush=True)\n"
        "_recv = socket.recv_fds\n"
        "def recv_fds(sock, bufsize, maxfds, flags=0):\n"
        "    msg, fds, fl, addr = _recv(sock, bufsize, maxfds, flags)\n"
        "    for fd in fds:\n"
        "        shrink(fd)\n"
        "    return msg, fds, fl, addr\n"
        "socket.recv_fds = recv_fds\n"
        "def shrink_files():\n"  # where the judge used to keep its arenas
        "    for path in glob.glob('arena-*.bin'):\n"
        "        fd = os.open(path, os.O_RDWR)\n"
        "        shrink(fd)\n"
        "        os.close(fd)\n"
    ) + REF.replace("def softmax(x", "def _softmax(x")
    src += "\ndef softmax(x):\n    shrink_files()\n    return _softmax(x)\n"
    r = grade("softmax", src)
    assert "refused" in r["output"] and "resized" not in r["output"], r["output"]
    assert r["passed"], r["summary"]


def test_a_deeply_nested_frame_is_the_submissions_failure(grade):
    src = (
        "import os, struct, sys\n"
        "def softmax(x):\n"
        "    frame = b'{\"type\": \"ok\", \"v\": ' + b'[' * 100000 + b']' * 100000 + b'}'\n"
        "    os.write(int(sys.argv[1]), struct.pack('<I', len(frame)) + frame)\n"
        "    import time; time.sleep(30)\n"
    )
    r = grade("softmax", src)
    assert r["status"] == "failed", r["summary"]
    assert "private channel" in r["summary"]


def test_frames_nest_only_so_deep():
    from gpulab.wire import protocol

    r, w = os.pipe()

    def frame(obj_text: bytes) -> None:
        os.write(w, len(obj_text).to_bytes(4, "little") + obj_text)

    frame(b'{"type": "x", "s": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "v": [[1]]}')
    assert protocol.read_frame(r)["v"] == [[1]]
    frame(b'{"type": "x", "v": ' + b"[" * 40 + b"]" * 40 + b"}")
    with pytest.raises(protocol.ProtocolError, match="deeper"):
        protocol.read_frame(r)


# Links planted in the workspace's traces folder outlive the check: for
# `gpulab profile --nsys`/`--ncu` (their -o names these files) to follow.
PLANT = """
import os
FOUND = []
for name in ("find_bottleneck.json", "find_bottleneck.nsys-rep", "nvtx_profile.json", "x"):
    path = os.path.join({traces!r}, name)
    try:
        if os.path.lexists(path):
            os.unlink(path)
        os.symlink({victim!r}, path)
        FOUND.append(name)
    except OSError:
        pass
"""


@needs_namespaces
def test_a_check_leaves_no_link_in_the_workspaces_traces(grade, tmp_path):
    victim = tmp_path / "instructor-notes.txt"
    victim.write_text("precious")
    traces = tmp_path / "workspace" / "traces"
    traces.mkdir(parents=True)
    # One planted before this gpulab (a sandbox wrote this folder then):
    # the judge's copy replaces it, never writes through it.
    (traces / "find_bottleneck.json").symlink_to(victim)
    src = reference_source("find_bottleneck") + PLANT.format(traces=str(traces), victim=str(victim))
    r = grade("find_bottleneck", src)
    assert r["status"] == "passed", r["summary"]
    assert [p.name for p in traces.iterdir() if p.is_symlink()] == []
    assert victim.read_text() == "precious"
    trace = traces / "find_bottleneck.json"
    assert trace.is_file() and not trace.is_symlink()
    assert "traceEvents" in trace.read_text()


@pytest.mark.parametrize("honest", [True, False])
def test_the_outbox_copy_follows_no_link(tmp_path, honest):
    from gpulab.judge.graders.nvtx_profile import copy_untrusted

    secret = tmp_path / "secret.txt"
    secret.write_text("instructor only")
    written = tmp_path / "out" / "trace.json"
    written.parent.mkdir()
    if honest:
        written.write_text("{}")
    else:
        written.symlink_to(secret)
    wanted = tmp_path / "trace.json"
    if honest:
        copy_untrusted(written, wanted)
        assert wanted.read_text() == "{}"
    else:
        with pytest.raises(OSError):
            copy_untrusted(written, wanted)
        assert not wanted.exists()


@needs_namespaces
def test_where_namespaces_are_refused_the_check_runs_and_says_so(tmp_path):
    """A kernel that refuses new user namespaces (here: a limit of 0 set in an
    outer one): the keeper runs the sandbox without them, and `isolation`
    says so rather than claiming what is not in force."""
    sol = tmp_path / "mine.py"
    sol.write_text(REF)
    r = run_without_namespaces(tmp_path, sol)
    assert r["passed"], r["summary"]


def run_without_namespaces(tmp_path: Path, sol: Path) -> dict:
    """`gpulab check softmax` where the kernel refuses new user namespaces
    (a limit of 0 set in an outer one, where the test may set it)."""
    import json
    import shutil
    import subprocess
    import sys

    from tests.conftest import gpulab_env

    if not shutil.which("unshare"):
        pytest.skip("needs util-linux's unshare")
    inner = (
        "echo 0 > /proc/sys/user/max_user_namespaces && exec "
        f"{sys.executable} -m gpulab check softmax --file {sol} --device cpu --json"
    )
    proc = subprocess.run(
        ["unshare", "--user", "--map-current-user", "sh", "-c", inner],
        env=gpulab_env(tmp_path / "ws"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    r = json.loads(proc.stdout)
    assert r["isolation"][0].startswith("namespaces: none ("), r["isolation"]
    return r
