"""A real Slurm: a single-node cluster (Debian's slurm-wlm with munge) made
in a temporary folder, its daemons started here and stopped after. A small
array runs through submitit (`gpulab grade run --executor slurm`) and
through the emitted sbatch script, with the real judge in each task, and
the gradebook ingests what they wrote. The node offers one `gpu` GRES (a
stand-in file, no GPU), so `--gres=gpu:1` is scheduled as on a GPU cluster.

Skipped, with the reason, where slurm or munge is not installed, or the
test does not run as root (slurmd runs jobs as their users)."""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, gpulab_env

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(pidfile: Path) -> None:
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, 15)
    except ProcessLookupError:
        return
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass


@pytest.fixture
def slurm():
    """SLURM_CONF of a one-node cluster whose daemons run for this test."""
    missing = [d for d in DAEMONS if shutil.which(d) is None]
    if missing:
        pytest.skip(
            f"slurm is not installed ({', '.join(missing)} missing: apt-get install slurm-wlm munge)"
        )
    if os.geteuid() != 0:
        pytest.skip("a test cluster's slurmd runs jobs as their users: it needs root")
    # munged wants its socket's folders open to all (execute), which pytest's
    # own temporary folders are not; and a short path fits a sockaddr_un.
    base = Path(tempfile.mkdtemp(prefix="gpulab-slurm-"))
    base.chmod(0o755)
    for sub in ("state", "spool", "log", "run"):
        (base / sub).mkdir(mode=0o755)
    key = base / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    sock = base / "run" / "munge.sock"
    subprocess.run(
        [
            "munged",
            f"--socket={sock}",
            f"--key-file={key}",
            f"--pid-file={base / 'run' / 'munged.pid'}",
            f"--log-file={base / 'log' / 'munged.log'}",
            f"--seed-file={base / 'run' / 'munged.seed'}",
        ],
        check=True,
        timeout=30,
    )
    host = socket.gethostname()
    conf = base / "slurm.conf"
    conf.write_text(
        f"""ClusterName=gpulabtest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={base / "state"}
SlurmdSpoolDir={base / "spool"}
SlurmctldPidFile={base / "run" / "slurmctld.pid"}
SlurmdPidFile={base / "run" / "slurmd.pid"}
SlurmctldLogFile={base / "log" / "slurmctld.log"}
SlurmdLogFile={base / "log" / "slurmd.log"}
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
GresTypes=gpu
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} Gres=gpu:1 State=UNKNOWN
PartitionName=grading Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""",
        encoding="utf-8",
    )
    # A GPU GRES backed by a stand-in file: scheduled like a GPU, no GPU there.
    (base / "gres.conf").write_text(f"NodeName={host} Name=gpu File=/dev/null\n", encoding="utf-8")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    try:
        subprocess.run(["slurmctld", "-f", str(conf)], check=True, env=env, timeout=30)
        subprocess.run(["slurmd", "-f", str(conf)], check=True, env=env, timeout=30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = subprocess.run(
                ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=env, timeout=30
            )
            if out.stdout.strip() == "idle":
                break
            time.sleep(0.5)
        else:
            logs = "".join(
                (base / "log" / n).read_text()[-1500:] for n in ("slurmctld.log", "slurmd.log")
            )
            pytest.fail(f"the test cluster's node never became idle:\n{logs}")
        yield str(conf)
    finally:
        for name in ("slurmd.pid", "slurmctld.pid", "munged.pid"):
            _stop(base / "run" / name)
        shutil.rmtree(base, ignore_errors=True)


def _wait_until_done(env: dict, job: str) -> None:
    deadline = time.monotonic() + 500
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["squeue", "-h", "-j", job], capture_output=True, text=True, env=env, timeout=30
        )
        if not out.stdout.strip():
            return
        time.sleep(1)
    raise AssertionError(f"Slurm job {job} still queued or running")


@pytest.mark.slow
def test_a_slurm_array_through_submitit_and_through_sbatch(slurm, tmp_path):
    env = gpulab_env(tmp_path / "ws", SLURM_CONF=slurm)
    course = tmp_path / "course"
    students = {"s1": "kernels", "s2": "exercises", "s3": "kernels"}
    roster = tmp_path / "class.csv"
    roster.write_text(
        "id,name\n" + "".join(f"{s},Student {s}\n" for s in students), encoding="utf-8"
    )

    def gpulab(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "gpulab", "grade", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=course if course.exists() else tmp_path,
            timeout=600,
        )

    assert (
        gpulab(
            "init", str(course), "--exercises", "copy_ceiling", "--roster", str(roster)
        ).returncode
        == 0
    )
    toml = course / "gradebook.toml"
    toml.write_text(
        toml.read_text()
        .replace('device = "auto"', 'device = "cpu"')
        .replace("timeout = 0", "timeout = 240")
    )

    def hand_in(*who: str) -> None:
        subs = tmp_path / f"subs-{'-'.join(who)}"
        for s in who:
            (subs / s).mkdir(parents=True)
            shutil.copy(REPO / students[s] / "copy_ceiling.py", subs / s / "copy_ceiling.py")
        assert gpulab("collect", str(subs)).returncode == 0

    # Through submitit: one array task per student, gres gpu:1, waited for and ingested.
    hand_in("s1", "s2")
    run = gpulab(
        "run",
        "--executor",
        "slurm",
        "--gpus",
        "1",
        "--cpus",
        "1",
        "--parallel",
        "2",
        "--time",
        "10",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "submitted Slurm array" in run.stdout and "2 tasks" in run.stdout
    db = sqlite3.connect(course / "gradebook.sqlite")
    got = db.execute(
        "SELECT s.student, r.status, r.host FROM runs r JOIN submissions s ON s.id = r.submission_id ORDER BY 1"
    ).fetchall()
    assert [(g[0], g[1]) for g in got] == [("s1", "passed"), ("s2", "failed")], run.stdout
    assert {g[2] for g in got} == {socket.gethostname()}
    assert list((course / "work" / "slurm").rglob("*_submitted.pkl"))  # submitit's own files

    # Through the emitted sbatch script, submitted by hand, then ingested.
    hand_in("s3")
    script = tmp_path / "grade.sbatch"
    emitted = gpulab(
        "run", "--emit-sbatch", str(script), "--gpus", "1", "--cpus", "1", "--parallel", "4"
    )
    assert emitted.returncode == 0, emitted.stderr
    text = script.read_text()
    assert "#SBATCH --array=0-0%4" in text and "#SBATCH --gres=gpu:1" in text
    sub = subprocess.run(
        ["sbatch", "--parsable", str(script)], capture_output=True, text=True, env=env, timeout=60
    )
    assert sub.returncode == 0, sub.stderr
    _wait_until_done(env, sub.stdout.strip().split(";")[0])
    ingest = gpulab("ingest")
    assert ingest.returncode == 0 and "ingested 1 results (1 passed)" in ingest.stdout, (
        ingest.stdout + ingest.stderr
    )
    assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 3


def test_the_emitted_script_without_a_cluster(tmp_path, monkeypatch):
    """The sbatch script's directives, and a clear refusal where sbatch is
    missing (no cluster needed: runs everywhere)."""
    from gpulab.gradebook.slurm import SlurmError, SlurmOptions, emit_sbatch, submit

    opts = SlurmOptions(partition="gpu", account="cs149", time_min=90, gpus=1, parallel=8, cpus=6)
    text = emit_sbatch(tmp_path / "b.json", 300, opts, tmp_path / "logs")
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    for directive in (
        "#SBATCH --array=0-299%8",
        "#SBATCH --gres=gpu:1",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=cs149",
        "#SBATCH --time=01:30:00",
        "#SBATCH --cpus-per-task=6",
        f"#SBATCH --output={tmp_path / 'logs'}/%A_%a.out",
    ):
        assert directive in lines
    assert lines[-1].endswith(
        "-m gpulab.gradebook.worker " + f"{tmp_path / 'b.json'}" + ' --index "$SLURM_ARRAY_TASK_ID"'
    )
    assert "--gres" not in emit_sbatch(tmp_path / "b.json", 3, SlurmOptions(gpus=0), tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SlurmError, match="sbatch is not on PATH"):
        submit(tmp_path / "b.json", 3, opts, tmp_path)
