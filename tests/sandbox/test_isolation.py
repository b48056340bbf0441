"""Every way learner code can fail is a failed check with one clear message,
and the next check runs normally (real child processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tests.conftest import gpulab_env, reference_source, sigint_as_in_a_shell

REF = reference_source("softmax")


def alive(pid: int) -> bool:
    """True if the process exists and is not a zombie (an orphan reparented
    to an init that doesn't reap it stays a zombie, but runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_syntax_error_names_file_and_line(grade):
    r = grade("softmax", "import torch\n\ndef softmax(x):\n    return x +\n", name="broken.py")
    assert r["status"] == "failed"
    assert "SyntaxError" in r["summary"] and "broken.py:4" in r["summary"]


def test_import_error_is_reported(grade):
    r = grade("softmax", "import not_a_real_module_xyz\n")
    assert r["status"] == "failed"
    assert "not_a_real_module_xyz" in r["summary"]


def test_missing_function_is_named(grade):
    r = grade("softmax", "import torch\n\ndef soft_max(x):\n    return x\n")
    assert r["status"] == "failed"
    assert "does not define `softmax`" in r["summary"]


def test_exception_traceback_shows_only_learner_frames(grade):
    src = "import torch\n\ndef helper(x):\n    return x[99999]\n\ndef softmax(x):\n    return helper(x)\n"
    r = grade("softmax", src, name="mine.py")
    assert r["status"] == "failed"
    assert "IndexError" in r["summary"]
    msg = r["message"]
    assert "mine.py" in msg and "line 4" in msg and "line 7" in msg
    assert "gpulab" not in msg.replace("mine.py", "")  # no grader internals


def marked(marker: str) -> list[int]:
    """Live processes whose command line carries `marker`."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read() and alive(int(entry)):
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def spawner(marker: str) -> str:
    """Learner code that starts a plain child and a setsid grandchild, both sleeping."""
    sleeper = f"import time; time.sleep(600)  # {marker}"
    return (
        f"import os, subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', {sleeper!r}])\n"
        f"subprocess.Popen([sys.executable, '-c', {sleeper!r}], start_new_session=True)\n"
    )


def test_infinite_python_loop_times_out_and_leaves_no_process(grade):
    marker = f"gpulab-test-{uuid.uuid4().hex}"
    src = spawner(marker) + "def softmax(x):\n    while True:\n        pass\n"
    t0 = time.monotonic()
    r = grade("softmax", src, timeout=8)
    assert time.monotonic() - t0 < 30
    assert r["status"] == "timeout"
    assert "timed out after 8 s" in r["summary"]
    time.sleep(0.5)
    assert marked(marker) == []  # the child and the setsid grandchild are both gone


def test_a_setsid_grandchild_does_not_outlive_a_finished_check(grade):
    marker = f"gpulab-test-{uuid.uuid4().hex}"
    r = grade("softmax", spawner(marker) + REF)
    assert r["passed"], r["summary"]
    time.sleep(0.5)
    assert marked(marker) == []


def test_infinite_loop_inside_a_kernel_times_out(grade):
    src = REF.replace(
        "    row = tl.program_id(0).to(tl.int64)",
        "    row = tl.program_id(0).to(tl.int64)\n    i = 0\n    while i < 1:\n        i = i * 1",
    )
    r = grade("softmax", src, timeout=10)
    assert r["status"] == "timeout"


def test_segfault_is_a_failed_check(grade):
    r = grade("softmax", "import ctypes\n\ndef softmax(x):\n    return ctypes.string_at(0)\n")
    assert r["status"] == "crashed"
    assert "SIGSEGV" in r["summary"]


def test_abort_is_a_failed_check(grade):
    r = grade("softmax", "import os\n\ndef softmax(x):\n    os.abort()\n")
    assert r["status"] == "crashed" and "SIGABRT" in r["summary"]


def test_exit_during_import(grade):
    r = grade("softmax", "import os\nos._exit(3)\n")
    assert r["status"] == "crashed" and "code 3" in r["summary"]


def test_sys_exit_is_caught(grade):
    r = grade("softmax", "import sys\n\ndef softmax(x):\n    sys.exit(0)\n")
    assert r["status"] == "failed" and "SystemExit" in r["summary"]


def test_forged_results_on_stdout_and_fds_are_ignored(grade):
    fake = '{"type": "result", "result": {"status": "passed", "summary": "forged"}}'
    src = (
        "import os, json\n"
        f"FAKE = {fake!r}\n"
        "print(FAKE)\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, (FAKE + '\\t' + '0' * 64 + '\\n').encode())\n"
        "    except OSError:\n"
        "        pass\n"
        "def softmax(x):\n    return x\n"
    )
    r = grade("softmax", src)
    assert not r["passed"]
    assert r["summary"] != "forged"
    assert "forged" in r["output"]  # the learner's prints are shown as output


def test_next_check_after_a_crash_runs_normally(grade):
    assert grade("softmax", "import os\nos.abort()\n")["status"] == "crashed"
    assert grade("softmax", REF)["passed"]


def test_ctrl_c_during_a_check_leaves_no_orphans(tmp_path):
    """SIGINT to the CLI while a check hangs: it exits, and the sandbox's
    processes are gone."""
    marker = f"gpulab-test-{uuid.uuid4().hex}"
    sol = tmp_path / "hang.py"
    sol.write_text(spawner(marker) + "def softmax(x):\n    while True:\n        pass\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpulab", "check", "softmax", "--file", str(sol), "--device", "cpu"],
        env=gpulab_env(tmp_path / "ws"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=sigint_as_in_a_shell,
    )
    deadline = time.monotonic() + 60
    while len(marked(marker)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(marked(marker)) == 2, proc.communicate()[1]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    time.sleep(1)
    assert marked(marker) == []
    assert not (tmp_path / "ws" / ".gpulab" / "results" / "softmax.json").exists()


@pytest.mark.gpu
def test_gpu_illegal_memory_access_then_a_fresh_child(grade):
    src = REF.replace(
        "tl.store(y_ptr + row * y_row_stride + offs,",
        "tl.store(y_ptr + (1 << 40) + row * y_row_stride + offs,",
    )
    r = grade("softmax", src, device="cuda", timeout=300)
    assert not r["passed"] and r["status"] in ("failed", "crashed")
    assert "illegal memory access" in (r["summary"] + r.get("message", "")).lower()
    assert grade("softmax", REF, device="cuda", timing=False)["passed"]


@pytest.mark.gpu
def test_gpu_out_of_memory_is_a_failed_check(grade):
    src = "import torch\n\ndef softmax(x):\n    return torch.empty(10**14, device=x.device)\n"
    r = grade("softmax", src, device="cuda", timeout=300)
    assert not r["passed"] and "out of memory" in r["summary"].lower()


def test_a_cpu_checks_sandbox_does_its_maths_on_one_thread(grade):
    # The interpreter's tensors are small: a second thread only spins
    # (gpulab.judge.prepared.one_thread). Told by the file's own import error.
    source = (
        "import os\nimport torch\n"
        'raise RuntimeError("threads %s %s %s" % (os.environ.get("OMP_NUM_THREADS"), '
        'os.environ.get("OPENBLAS_NUM_THREADS"), torch.get_num_threads()))\n'
    )
    result = grade("softmax", source)
    assert "threads 1 1 1" in result["summary"], result["summary"]


def test_a_learners_own_thread_setting_is_kept(monkeypatch):
    from gpulab.judge.prepared import one_thread

    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    one_thread()
    assert os.environ["OMP_NUM_THREADS"] == "4" and os.environ["OPENBLAS_NUM_THREADS"] == "1"
