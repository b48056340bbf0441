"""The fork server (gpulab.judge.forks, gpulab.sandbox.forkserver): a CPU
check's sandboxes forked from a process that did their imports once.

Each test drives a judge's own set-up (gpulab.judge.prepared) in a child
process, since the judge must be the subreaper that adopts the forked
keepers. What must hold: a forked sandbox is confined exactly as an exec'd
one (the same isolation report), it is named so that the judge can ask it
where it is stuck, and a server that is not alone in its process (a thread a
fork would not copy) restarts each sandbox afresh instead of forking it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.xdist_group("forks")

SCRIPT = """
import json, os, sys
from pathlib import Path
from gpulab.judge.remote import harden_judge, kill_descendants
from gpulab.judge import forks, prepared
from gpulab.wire.check_request import CheckRequest
from gpulab.wire.sandbox_start import FORKED_NAME

harden_judge()
mode = sys.argv[1]
if mode == "threaded":
    class Threaded(forks.ForkServer):
        def boot(self):
            start = "import threading, time; threading.Thread(target=time.sleep, args=(600,), daemon=True).start(); "
            return start + super().boot()
    made = prepared.start_forks
    def start_threaded():
        server = made()
        server.close()
        server = Threaded(server_env, server_cwd)
        prepared.remote.SPARED.add(server.pid())
        return server
    from gpulab.judge import remote
    prepared.remote = remote
    server_cwd = Path(prepared._folder("gpulab-forks-"))
    server_env = remote.sandbox_env("cpu", server_cwd)
    prepared.start_forks = start_threaded
if mode == "exec":
    os.environ[forks.SWITCH] = "0"
request = CheckRequest(exercise="softmax", function="softmax", file=sys.argv[2], device="cpu",
                       content_root=sys.argv[3])
prep = prepared.Prepared(request)
box = prep.fresh()
replay = prep.fresh_replay()
out = {"forked": type(box.proc).__name__ == "Forked", "isolation": box.isolation,
       "replay_isolation": replay.isolation}
from gpulab.judge.stuck import sandbox_pids
mine = sandbox_pids(os.getpid())  # both sandboxes, below this judge only
out["named"] = sum(Path(f"/proc/{pid}/comm").read_bytes().strip() == FORKED_NAME for pid in mine)
out["all_found"] = len(mine)
out["stuck_finds"] = len(sandbox_pids(box.proc.pid))
box.close()
out["exit"] = box.proc.wait(timeout=10)
replay.close()
server_folder = prep.forks.folder if prep.forks else None
prep.close()
out["server_folder_left"] = bool(server_folder and server_folder.exists())
out["server"] = server_folder is not None
print(json.dumps(out))
kill_descendants()
prepared.remove_folders()
"""


def _run(mode: str) -> dict:
    p = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode, str(REPO / "kernels" / "softmax.py"), str(REPO)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs() -> dict[str, dict]:
    return {mode: _run(mode) for mode in ("fork", "exec", "threaded")}


def test_a_forked_sandbox_is_confined_as_an_execd_one(runs):
    fork, exec_ = runs["fork"], runs["exec"]
    assert fork["forked"] and not exec_["forked"]
    assert fork["isolation"] == exec_["isolation"], (fork, exec_)
    assert fork["replay_isolation"] == exec_["replay_isolation"]
    assert any(line.startswith("namespaces: user, pid") for line in fork["isolation"]) or any(
        "none" in line for line in exec_["isolation"]
    )


def test_forked_sandboxes_are_named_and_the_stuck_report_finds_them(runs):
    assert runs["fork"]["named"] == runs["fork"]["all_found"] == 2  # the check's and the replay's
    assert runs["exec"]["named"] == 0 and runs["exec"]["all_found"] == 2
    assert runs["fork"]["stuck_finds"] == 1
    assert runs["exec"]["stuck_finds"] == 1
    assert runs["fork"]["exit"] == runs["exec"]["exit"] == 0


def test_the_check_removes_its_fork_servers_folder(runs):
    # A process grading many files (the batch tests' children) closes each
    # check and never reaches the judge's own end, which removes the rest.
    assert runs["fork"]["server"] and not runs["fork"]["server_folder_left"]
    assert not runs["exec"]["server"]


def test_a_server_not_alone_in_its_process_restarts_each_sandbox_afresh(runs):
    threaded = runs["threaded"]
    assert threaded["forked"]  # asked of the server, which exec'd the keeper
    assert threaded["named"] == 0 and threaded["all_found"] == 2  # exec'd: their own command lines
    assert threaded["isolation"] == runs["exec"]["isolation"]
    assert threaded["stuck_finds"] == 1
    assert threaded["exit"] == 0


def test_a_spawn_the_server_never_answered_reads_as_a_sandbox_that_never_started():
    from gpulab.judge import forks

    class Gone:
        def settle(self, forked: forks.Forked) -> None:
            forked._answer(-1, "the fork server ended")

    forked = forks.Forked(Gone())  # type: ignore[arg-type]
    assert forked.pid == -1 and forked.why == "the fork server ended"
    assert forked.poll() == 125 and forked.wait(timeout=0.1) == 125


def test_a_forked_sandbox_holds_no_capability_whatever_the_uid(grade):
    """A process that made a user namespace holds every capability in it; an
    exec cleared them for a uid other than 0, a fork does not: the keeper
    clears them itself (gpulab.sandbox.namespaces.clear_capabilities)."""
    from tests.conftest import reference_source

    src = (
        "_SETS = {l.split(':')[0]: int(l.split()[1], 16) for l in open('/proc/self/status')"
        " if l.startswith(('CapEff', 'CapPrm', 'CapInh', 'CapBnd', 'CapAmb'))}\n"
    ) + reference_source("softmax").replace("def softmax(x", "def _softmax(x")
    src += "\ndef softmax(x):\n    assert not any(_SETS.values()), _SETS\n    return _softmax(x)\n"
    r = grade("softmax", src, timing=False)
    assert r["passed"], r["summary"]


def test_a_process_that_adopts_no_orphans_starts_no_fork_server():
    """A forked keeper's first parent exits at once: outside a subreaper
    (a test grading in its own process) it would go to init, out of the
    judge's reach, so such a process execs its sandboxes instead."""
    code = (
        "from gpulab.judge import forks, prepared\n"
        "from gpulab.judge.remote import harden_judge\n"
        "assert not forks.subreaper() and prepared.start_forks() is None\n"
        "harden_judge()\n"
        "server = prepared.start_forks()\n"
        "assert forks.subreaper() and server is not None\n"
        "server.close()\n"
        "prepared.remove_folders()\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
