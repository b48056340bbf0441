"""`--executor slurm`: the batch on the cluster the university already runs.

One Slurm array task per student (not per file: 300 tasks, not 6,600),
each `gpulab.gradebook.worker` for that student, with `--gres=gpu:N`, a
partition, an account and a time limit from the options, and the array's
parallelism capped (`%P`). Two ways to submit, neither a scheduler of ours:

- through submitit (PyPI, maintained), which writes and submits the sbatch
  script itself and pickles the worker's entry point by name;
- `emit_sbatch`: a plain `#SBATCH --array=0-N%P` script for clusters where
  the instructor submits by hand.

Either way the tasks write result files into the batch's results folder on
the shared file system, and `gpulab grade ingest` reads them.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict


class SlurmError(Exception):
    """Slurm (or submitit) could not be used; the message says why."""


class SlurmParams(TypedDict, total=False):
    """submitit.SlurmExecutor.update_parameters's keywords that a batch sets."""

    job_name: str
    time: int  # minutes
    array_parallelism: int
    cpus_per_task: int
    gres: str
    partition: str
    account: str


@dataclass(frozen=True)
class SlurmOptions:
    partition: str = ""
    account: str = ""
    time_min: int = 60  # each student's array task
    gpus: int = 1  # --gres=gpu:N; 0 for a CPU partition
    parallel: int = 16  # array tasks running at once (%P)
    cpus: int = 4
    python: str = sys.executable

    def directives(self) -> list[str]:
        out = []
        if self.gpus:
            out.append(f"--gres=gpu:{self.gpus}")
        if self.partition:
            out.append(f"--partition={self.partition}")
        if self.account:
            out.append(f"--account={self.account}")
        hours, minutes = divmod(self.time_min, 60)
        out.append(f"--time={hours:02d}:{minutes:02d}:00")
        out.append(f"--cpus-per-task={self.cpus}")
        return out


def emit_sbatch(batch: Path, students: int, opts: SlurmOptions, logs: Path) -> str:
    """A plain sbatch script: one array task per student of `batch`."""
    if students < 1:
        raise SlurmError("the batch has no students to grade")
    lines = [
        "#!/bin/bash",
        f"# gpulab grade: batch {batch.stem}, {students} students, one array task each.",
        "# Submit with `sbatch THIS_FILE`; when the tasks are done, `gpulab grade ingest`.",
        "#SBATCH --job-name=gpulab-grade",
        f"#SBATCH --array=0-{students - 1}%{max(1, opts.parallel)}",
        *(f"#SBATCH {d}" for d in opts.directives()),
        f"#SBATCH --output={logs}/%A_%a.out",
        "set -euo pipefail",
        f"exec {shlex.quote(opts.python)} -m gpulab.gradebook.worker "
        f'{shlex.quote(str(batch))} --index "$SLURM_ARRAY_TASK_ID"',
        "",
    ]
    return "\n".join(lines)


def submit(batch: Path, students: int, opts: SlurmOptions, folder: Path) -> str:
    """Submit the batch as one array through submitit; the array's job id."""
    if shutil.which("sbatch") is None:
        raise SlurmError("sbatch is not on PATH: run this on the cluster's login node")
    try:
        import submitit
    except ImportError:
        raise SlurmError("submitit is not installed: pip install submitit") from None
    from gpulab.gradebook.worker import grade_student

    executor = submitit.SlurmExecutor(folder=str(folder / "%j"), python=opts.python)
    params: SlurmParams = {
        "job_name": "gpulab-grade",
        "time": opts.time_min,
        "array_parallelism": max(1, opts.parallel),
        "cpus_per_task": opts.cpus,
    }
    if opts.gpus:
        params["gres"] = f"gpu:{opts.gpus}"
    if opts.partition:
        params["partition"] = opts.partition
    if opts.account:
        params["account"] = opts.account
    executor.update_parameters(**params)
    try:
        jobs = executor.map_array(grade_student, [str(batch)] * students, list(range(students)))
    except (subprocess.CalledProcessError, OSError, submitit.core.utils.FailedJobError) as exc:
        raise SlurmError(f"sbatch refused the array: {exc}") from None
    if not jobs:
        raise SlurmError("submitit submitted no job")
    return str(jobs[0].job_id).split("_")[0]


def running(job_id: str) -> bool:
    """Whether any task of the array is still queued or running (squeue)."""
    try:
        out = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%i"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return True  # cannot tell: keep waiting for result files
    if out.returncode != 0:
        return "Invalid job id" not in out.stderr
    return bool(out.stdout.strip())
