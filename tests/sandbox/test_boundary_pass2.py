"""The sandbox boundary, second pass: what a check leaves behind for later
checks and for other users of the box (the workspace's compiler cache, the
spare judge). Real checks, real child processes, on the CPU."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.conftest import reference_source
from tests.sandbox.test_boundary import needs_namespaces, run_without_namespaces

REF = reference_source("softmax")

# A submission that leaves, in the only folder of the user's it may write
# (its file's compiler cache), a setuid and setgid copy of `id`, a folder
# every user may write, and the cache folder itself opened to all.
PLANT_SETUID = """
import os, shutil
_cache = os.environ["TRITON_CACHE_DIR"]
shutil.copy("/usr/bin/id", os.path.join(_cache, "id"))
os.chmod(os.path.join(_cache, "id"), 0o6755)
os.makedirs(os.path.join(_cache, "drop"), exist_ok=True)
os.chmod(os.path.join(_cache, "drop"), 0o777)
os.chmod(_cache, 0o777)
"""


def others_can_enter(path: Path, top: Path) -> bool:
    """Whether a user other than the owner (in its group or not) passes every
    folder from `top` down to `path`."""
    folders = [p for p in path.parents if p == top or p.is_relative_to(top)]
    return all(p.stat().st_mode & (stat.S_IXGRP | stat.S_IXOTH) for p in folders)


@needs_namespaces
def test_a_setuid_file_planted_in_the_cache_is_out_of_other_users_reach(grade, tmp_path):
    """The planted `id` runs as the user who checked, for anyone who can
    reach it (`setpriv --reuid=nobody .../id` printed euid=0 on a box where
    checks ran as root): the workspace's cache folder lets nobody else in."""
    if not Path("/usr/bin/id").exists():
        pytest.skip("needs /usr/bin/id")
    r = grade("softmax", PLANT_SETUID + REF)
    assert r["passed"], r["summary"]
    workspace = tmp_path / "workspace"
    planted = list((workspace / ".gpulab" / "cache").glob("*/id"))
    try:
        assert len(planted) == 1
        assert planted[0].stat().st_mode & stat.S_ISUID  # the plant itself worked
        assert not others_can_enter(planted[0], workspace)
        assert not others_can_enter(planted[0].parent / "drop" / "x", workspace)
    finally:
        for p in planted:
            p.unlink()  # not left in pytest's folders either


# Lesson 07's sandboxes write their trace into the judge's outbox, bound into
# them: this one opens it to all and leaves a setuid `id` there, then waits.
PLANT_OUTBOX = """
import os, shutil, time
for _line in open("/proc/self/mountinfo"):
    _at = _line.split()[4]
    if "gpulab-outbox-" in _at:
        os.chmod(_at, 0o755)
        shutil.copy("/usr/bin/id", os.path.join(_at, "id"))
        os.chmod(os.path.join(_at, "id"), 0o6755)
time.sleep(8)
"""


@needs_namespaces
def test_a_setuid_file_planted_in_the_outbox_is_out_of_other_users_reach(
    grade, tmp_path, monkeypatch
):
    """While the check runs (as long as its timeout, for a sandbox that
    sleeps), the outbox is a folder of the host's /tmp: `setpriv
    --reuid=nobody /tmp/gpulab-outbox-*/id` printed euid=0 there."""
    import threading
    import time

    if not Path("/usr/bin/id").exists():
        pytest.skip("needs /usr/bin/id")
    judge_tmp = tmp_path / "tmp"
    judge_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(judge_tmp))
    results: list[dict] = []
    check = threading.Thread(
        target=lambda: results.append(
            grade("find_bottleneck", PLANT_OUTBOX + reference_source("find_bottleneck"))
        )
    )
    check.start()
    try:
        planted: list[Path] = []
        deadline = time.monotonic() + 90
        while not planted and check.is_alive() and time.monotonic() < deadline:
            planted = list(judge_tmp.glob("gpulab-outbox-*/**/id"))
            time.sleep(0.1)
        assert planted, "the sandbox planted nothing"
        assert planted[0].stat().st_mode & stat.S_ISUID
        top = next(p for p in planted[0].parents if p.name.startswith("gpulab-outbox-"))
        assert not others_can_enter(planted[0], top)
    finally:
        check.join()
    assert results and results[0]["passed"], results


# chmod and utime with what is already there: each proves the right and
# changes nothing but the inode's ctime (a real submission would chmod 0).
TOUCH_DEVICES = """
import os
_CHANGED = []
for _node in ("/dev/null", "/dev/zero", "/dev/urandom"):
    try:
        os.chmod(_node, os.stat(_node).st_mode & 0o7777)
        _CHANGED.append(_node)
    except OSError:
        pass
with open("/dev/null", "w") as _f:
    _f.write("still writable")
"""


@needs_namespaces
def test_the_sandbox_cannot_change_the_hosts_device_nodes(grade):
    """As root (uid 0 keeps its capabilities in the user namespace), a
    sandbox chmodded the host's /dev/null through its bind: mode 0 there
    would leave every other user of the box without one."""
    before = {n: os.stat(n).st_ctime_ns for n in ("/dev/null", "/dev/zero")}
    src = TOUCH_DEVICES + REF.replace("def softmax(x", "def _softmax(x")
    src += "\ndef softmax(x):\n    assert not _CHANGED, _CHANGED\n    return _softmax(x)\n"
    r = grade("softmax", src)
    assert r["passed"], r["summary"]
    assert {n: os.stat(n).st_ctime_ns for n in before} == before


def mounts_below_sys() -> list[str]:
    """Mount points under /sys on this host (cgroup v1 puts a dozen there)."""
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return [p for p in points if p.startswith("/sys/") and os.path.isdir(p)]


@needs_namespaces
def test_the_mounts_below_a_read_only_tree_are_read_only_too(grade):
    """/sys is bound read-only, its own mounts came along read-write: as root
    a sandbox chmodded the host's /sys/fs/cgroup and cgroup.procs files."""
    below = mounts_below_sys()
    if not below:
        pytest.skip("no mount below /sys on this host")
    before = {p: os.stat(p).st_ctime_ns for p in below}
    src = (
        "import os\n_CHANGED = []\n"
        f"for _p in {below!r}:\n"
        "    try:\n"
        "        os.chmod(_p, os.stat(_p).st_mode & 0o7777)\n"
        "        _CHANGED.append(_p)\n"
        "    except OSError:\n"
        "        pass\n"
        "_OPEN = sorted(os.listdir('/sys'))\n"  # still readable
    ) + REF.replace("def softmax(x", "def _softmax(x")
    src += (
        "\ndef softmax(x):\n    assert _OPEN and not _CHANGED, _CHANGED\n    return _softmax(x)\n"
    )
    r = grade("softmax", src)
    assert r["passed"], r["summary"]
    assert {p: os.stat(p).st_ctime_ns for p in below} == before


def test_no_other_copy_of_gpulab_on_the_import_path_is_readable(grade, tmp_path, monkeypatch):
    """`pip install -e .` puts the course's content, kernels/ included, in
    site-packages/gpulab/_content: a submission read softmax's reference
    from there (and could print it into its output). Here the copy is on
    PYTHONPATH, which the judge hands the sandbox as it does site-packages."""
    other = tmp_path / "elsewhere"
    kernels = other / "gpulab" / "_content" / "kernels"
    kernels.mkdir(parents=True)
    (kernels / "softmax.py").write_text("ANSWER = 'reference'\n")
    graders = other / "gpulab" / "judge" / "graders"
    graders.mkdir(parents=True)
    (graders / "serving_roofline.py").write_text("KEY = 'answer'\n")
    monkeypatch.setenv("PYTHONPATH", str(other))
    src = (
        "import sys\n_READ = []\n"
        "for _d in sys.path:\n"
        "    for _f in ('/gpulab/_content/kernels/softmax.py',"
        " '/gpulab/judge/graders/serving_roofline.py'):\n"
        "        try:\n"
        "            _READ.append(open(_d + _f).read())\n"
        "        except OSError:\n"
        "            pass\n"
        f"_SEEN = {str(other)!r} in sys.path\n"
    ) + REF.replace("def softmax(x", "def _softmax(x")
    src += "\ndef softmax(x):\n    assert _SEEN and not _READ, [r[:60] for r in _READ]\n    return _softmax(x)\n"
    r = grade("softmax", src)
    assert r["passed"], r["summary"]


@needs_namespaces
def test_without_namespaces_the_users_files_keep_their_modes(tmp_path):
    """Where the kernel refuses namespaces (Ubuntu 24.04's AppArmor rule,
    simulated as test_boundary does) Landlock still refuses reading a key
    outside the policy, but not making it and its folder readable by all:
    gpulab.sandbox.modes's seccomp filter refuses the chmod."""
    ssh = tmp_path / "home" / ".ssh"
    ssh.mkdir(parents=True, mode=0o700)
    key = ssh / "id_rsa"
    key.write_text("private")
    key.chmod(0o600)
    sol = tmp_path / "mine.py"
    sol.write_text(
        "import os\n"
        f"for _p, _m in (({str(key)!r}, 0o644), ({str(ssh)!r}, 0o755)):\n"
        "    try:\n"
        "        os.chmod(_p, _m)\n"
        "    except OSError:\n"
        "        pass\n" + REF
    )
    r = run_without_namespaces(tmp_path, sol)
    assert (stat.S_IMODE(key.stat().st_mode), stat.S_IMODE(ssh.stat().st_mode)) == (0o600, 0o700)
    assert r["passed"], r["summary"]
    assert "no chmod, chown, utime or xattr calls" in r["isolation"]


@needs_namespaces
def test_a_cache_filled_past_its_limits_is_emptied_after_the_check(grade, tmp_path):
    """The compiler cache is the only folder a check leaves on the user's
    disk: 256 MiB a file, but any number of files, which stayed for good."""
    src = (
        "import os\n"
        "_c = os.environ['TRITON_CACHE_DIR']\n"
        "for _i in range(50_001):\n"  # gpulab.judge.policy.CACHE_ENTRIES, and one
        "    open(os.path.join(_c, f'f{_i}'), 'wb').close()\n"
    ) + REF
    r = grade("softmax", src)
    assert r["passed"], r["summary"]
    caches = tmp_path / "workspace" / ".gpulab" / "cache"
    left = sum(1 for _ in caches.rglob("*"))
    assert left <= 1, left  # at most the file's own (empty) folder


@needs_namespaces
def test_without_namespaces_the_users_terminal_is_not_readable(tmp_path):
    """Landlock let the sandbox read all of /dev: it opened the user's
    terminal and read the keys typed into it (b'hunter2\\n')."""
    import pty

    master, slave = pty.openpty()
    try:
        sol = tmp_path / "mine.py"
        sol.write_text(
            "import os\n_OPENED = []\n"
            "try:\n"
            f"    os.close(os.open({os.ttyname(slave)!r}, os.O_RDONLY | os.O_NONBLOCK))\n"
            "    _OPENED.append('the terminal')\n"
            "except OSError:\n"
            "    pass\n" + REF.replace("def softmax(x", "def _softmax(x") + "\n"
            "def softmax(x):\n    assert not _OPENED, _OPENED\n    return _softmax(x)\n"
        )
        r = run_without_namespaces(tmp_path, sol)
    finally:
        os.close(master)
        os.close(slave)
    assert r["passed"], r["summary"]


# A login as pam_keyinit makes it: a session keyring of its own, with a
# secret in it; then the check, which inherits it.
KEYRING_LOGIN = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
keyctl, add_key = {keyctl}, {add_key}
assert libc.syscall(keyctl, 1, None) > 0  # KEYCTL_JOIN_SESSION_KEYRING, anonymous
assert libc.syscall(add_key, b"user", b"gpulab-test-secret", b"hunter2", 7, -3) > 0
os.execv(sys.executable, [sys.executable, "-m", "gpulab", "check", "softmax",
                          "--file", {sol!r}, "--device", "cpu", "--json"])
"""


def test_the_sandbox_reads_no_key_of_the_users_session_keyring(tmp_path):
    """Namespaces and Landlock in force, the sandbox still held the login's
    session keyring and read the secret in it (b'hunter2')."""
    import json
    import platform
    import subprocess
    import sys

    from tests.conftest import gpulab_env

    numbers = {"x86_64": (250, 248), "aarch64": (219, 217)}.get(platform.machine())
    if numbers is None:
        pytest.skip("keyctl's number not known here")
    keyctl, add_key = numbers
    sol = tmp_path / "mine.py"
    sol.write_text(
        "import ctypes\n_libc = ctypes.CDLL(None, use_errno=True)\n_READ = []\n"
        f"_id = _libc.syscall({keyctl}, 10, -3, b'user', b'gpulab-test-secret', 0)\n"
        "if _id > 0:\n"
        "    _buf = ctypes.create_string_buffer(64)\n"
        f"    _n = _libc.syscall({keyctl}, 11, _id, _buf, 64)\n"
        "    _READ.append(_buf.raw[: max(_n, 0)] if _n >= 0 else 'found, unreadable')\n"
        + REF.replace("def softmax(x", "def _softmax(x")
        + "\ndef softmax(x):\n    assert not _READ, _READ\n    return _softmax(x)\n"
    )
    login = KEYRING_LOGIN.format(keyctl=keyctl, add_key=add_key, sol=str(sol))
    proc = subprocess.run(
        [sys.executable, "-c", login],
        env=gpulab_env(tmp_path / "ws"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode and "AssertionError" in proc.stderr:
        pytest.skip(f"no keyrings here: {proc.stderr[-200:]}")
    r = json.loads(proc.stdout)
    assert r["passed"], r["summary"]


@needs_namespaces
def test_another_pythons_bytecode_of_a_grader_is_hidden_too(grade):
    """Only this interpreter's `.cpython-311.pyc` names were hidden: a
    checkout also run with another Python keeps that one's bytecode of
    lesson 09's answer key and of every grader beside it, and a submission
    read them."""
    import py_compile

    from tests.conftest import REPO

    made = []
    try:
        for module in ("gpulab/gpu/serving.py", "gpulab/judge/graders/softmax.py"):
            src = REPO / module
            other = src.parent / "__pycache__" / f"{src.stem}.cpython-399.pyc"
            if not other.exists():
                py_compile.compile(str(src), cfile=str(other))
                made.append(other)
        src = (
            f"_READ = []\nfor _p in {[str(p) for p in made]!r}:\n"
            "    try:\n"
            "        open(_p, 'rb').read(16)\n"
            "        _READ.append(_p)\n"
            "    except OSError:\n"
            "        pass\n"
        ) + REF.replace("def softmax(x", "def _softmax(x")
        src += "\ndef softmax(x):\n    assert not _READ, _READ\n    return _softmax(x)\n"
        r = grade("softmax", src)
    finally:
        for p in made:
            p.unlink(missing_ok=True)
    assert made
    assert r["passed"], r["summary"]


@needs_namespaces
def test_a_cache_filled_by_a_check_that_times_out_is_emptied_too(grade, tmp_path):
    """A check stopped at its timeout ends by SIGTERM, and its judge never
    closed what it prepared: 50,001 files stayed in the cache."""
    src = (
        "import os, time\n"
        "_c = os.environ['TRITON_CACHE_DIR']\n"
        "for _i in range(50_001):\n"
        "    open(os.path.join(_c, f'f{_i}'), 'wb').close()\n"
        "time.sleep(600)\n"
    ) + REF
    r = grade("softmax", src, timeout=20)
    assert r["status"] == "timeout", r["summary"]
    caches = tmp_path / "workspace" / ".gpulab" / "cache"
    left = sum(1 for _ in caches.rglob("*"))
    assert left <= 1, left


@needs_namespaces
@pytest.mark.skipif(os.geteuid() != 0, reason="only uid 0 keeps capabilities across exec")
def test_a_check_run_as_root_runs_the_sandbox_without_capabilities(grade):
    """uid 0 mapped to itself kept every capability in the sandbox's user
    namespace: open_tree cloned the package's mount without the empty files
    over the graders (Landlock still refused reading them), and chmod went
    through read-write binds to the host's inodes."""
    src = (
        "import ctypes\n_libc = ctypes.CDLL(None, use_errno=True)\n"
        "_EFF = [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0]\n"
        "_CLONE = _libc.syscall(428, -100, b'/usr', 1)  # open_tree(OPEN_TREE_CLONE)\n"
    ) + REF.replace("def softmax(x", "def _softmax(x")
    src += (
        "\ndef softmax(x):\n"
        "    assert int(_EFF, 16) == 0 and _CLONE < 0, (_EFF, _CLONE)\n"
        "    return _softmax(x)\n"
    )
    r = grade("softmax", src)
    assert r["passed"], r["summary"]


def test_the_mode_filter_refuses_every_known_call_and_allows_the_rest():
    """The filter's program, read as the kernel reads it: each refused call
    of x86-64 and aarch64 jumps to the refusal, an x32 call and another
    architecture's calls are refused, anything else is allowed."""
    from gpulab.sandbox import modes

    def run(rows, arch, nr):
        data = {0: nr, 4: arch}
        acc, pc = 0, 0
        while True:
            code, jt, jf, k = rows[pc]
            if code == modes._LD_W_ABS:
                acc, pc = data[k], pc + 1
            elif code == modes._RET_K:
                return k
            else:
                hit = acc == k if code == modes._JEQ_K else acc >= k
                pc += 1 + (jt if hit else jf)

    refused = modes._RET_ERRNO | 1
    for machine in ("x86_64", "aarch64"):
        arch, calls = modes._CALLS[machine]
        rows = modes.program(machine)
        assert rows is not None
        for nr in calls:
            assert run(rows, arch, nr) == refused, (machine, nr)
        for nr in (0, 1, 2, 3, 39, 56, 57, 59, 63, 64, 257, 221):  # read, write, open, clone...
            if nr not in calls:
                assert run(rows, arch, nr) == modes._RET_ALLOW, (machine, nr)
        assert run(rows, 0x40000003, 15) == refused  # i386's chmod through int 0x80
    x86 = modes.program("x86_64")
    assert x86 is not None
    assert run(x86, 0xC000003E, 0x40000000 | 90) == refused  # x32's chmod
    assert modes.program("sparc") is None
