"""`gpulab grade run` with the real judge in the loop, for three files only
(each real CPU check costs seconds): an honest one, a wrong one and one
that kills itself. The batch is interrupted with Ctrl-C once the first
result is in; the next run grades only what is left, and no worker, judge
or sandbox outlives the interrupt."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, gpulab_env, sigint_as_in_a_shell

FILES = {
    "s1": (REPO / "kernels" / "copy_ceiling.py").read_text(),
    "s2": (REPO / "exercises" / "copy_ceiling.py").read_text(),
    "s3": "import os\n\nos.kill(os.getpid(), 9)\n",
}


def _left_behind(batch: str) -> list[str]:
    """Processes whose command line names the batch (its workers)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if batch in cmd:
            out.append(cmd)
    return out


@pytest.mark.slow
def test_a_class_graded_by_the_judge_interrupted_and_resumed(tmp_path):
    roster = tmp_path / "class.csv"
    roster.write_text("id,name\n" + "".join(f"{s},Student {s}\n" for s in FILES), encoding="utf-8")
    subs = tmp_path / "subs"
    for s, text in FILES.items():
        (subs / s).mkdir(parents=True)
        (subs / s / "copy_ceiling.py").write_text(text)
    env = gpulab_env(tmp_path / "ws")
    course = tmp_path / "course"

    def gpulab(*args: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "gpulab", "grade", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=course,
            timeout=600,
            **kw,
        )

    init = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpulab",
            "grade",
            "init",
            str(course),
            "--exercises",
            "copy_ceiling",
            "--roster",
            str(roster),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert init.returncode == 0, init.stderr
    text = (course / "gradebook.toml").read_text().replace('device = "auto"', 'device = "cpu"')
    (course / "gradebook.toml").write_text(text.replace("timeout = 0", "timeout = 240"))
    assert gpulab("collect", str(subs)).returncode == 0

    run = subprocess.Popen(
        [sys.executable, "-m", "gpulab", "grade", "run", "--jobs", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=course,
        preexec_fn=sigint_as_in_a_shell,
    )
    results = course / "work" / "results"
    deadline = time.monotonic() + 400
    while not list(results.rglob("copy_ceiling.json")) and time.monotonic() < deadline:
        assert run.poll() is None, run.communicate()
        time.sleep(0.2)
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 130, err
    assert "interrupted:" in out and "left to grade" in out
    batch = next((course / "work" / "batches").glob("*.json")).stem
    time.sleep(1)
    assert _left_behind(batch) == []
    db = course / "gradebook.sqlite"
    first = sqlite3.connect(db).execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    assert 1 <= first < 3

    again = gpulab("run", "--jobs", "1")
    assert again.returncode == 0, again.stderr
    rows = (
        sqlite3.connect(db)
        .execute(
            "SELECT s.student, r.status, r.summary, COUNT(*) FROM runs r"
            " JOIN submissions s ON s.id = r.submission_id GROUP BY s.student ORDER BY s.student"
        )
        .fetchall()
    )
    # Every file graded once: what the first run finished was not graded again.
    assert [(r[0], r[1], r[3]) for r in rows] == [
        ("s1", "passed", 1),
        ("s2", "failed", 1),
        ("s3", "crashed", 1),
    ], rows
    assert gpulab("run").stdout.startswith("nothing to grade")
    status = json.loads(gpulab("status", "--json").stdout)
    finals = {g["student"]: g["final"] for g in status["grades"]}
    assert finals == {"s1": 10.0, "s2": 0.0, "s3": 0.0}
