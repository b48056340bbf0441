"""A grading worker: one student of a batch, every task of theirs in turn,
each through gpulab.lab.check.Lab.check, the check `gpulab check` runs
(its own child process, the sandbox under it: docs/grading.md).

    python -m gpulab.gradebook.worker BATCH.json --index I

`--index` defaults to $SLURM_ARRAY_TASK_ID, so the same command is a Slurm
array task (gpulab.gradebook.slurm). The worker never opens the gradebook:
it writes one result file per task into the batch's results folder
(`<student>/<exercise>.json`, written whole or not at all), and prints one
JSON line per task on stdout for a local progress bar. A task whose result
file exists is skipped, so a worker started again (Ctrl-C, a requeued array
task) goes on where it stopped. A task that cannot be graded (the judge
would not start, a file gone) is a result too, with status `error`, and the
next task runs.

On a GPU a task with speed points is timed, and so is the reference kernel
(`kernels/<exercise>.py`) on the same GPU in the same batch: once per GPU
(its NVML UUID) and exercise, kept beside the results and copied into each
result file, so speed is scored as the ratio of the two
(gpulab.gradebook.score) whichever GPU the student's job landed on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, cast

from gpulab.fsutil import atomic_write_json, file_lock
from gpulab.gradebook.plan import read_batch
from gpulab.gradebook.records import (
    CheckJson,
    DoneEvent,
    ReferenceRecord,
    ResultRecord,
    TaskJson,
    WorkerEvent,
)

if TYPE_CHECKING:
    from gpulab.course.content import Lesson
    from gpulab.wire.result import CheckResult


def stack() -> str:
    """The versions a run was graded with, read without importing them."""
    parts = [f"python {platform.python_version()}"]
    for dist in ("gpulab", "torch", "triton", "jax"):
        try:
            parts.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(parts)


def gpu_identity() -> tuple[str, str]:
    """(name, UUID) of the first GPU this process may use, or ("", "")."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return "", ""
    try:
        from gpulab.gpu import nvml

        with nvml.opened() as nv:
            env = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
            index = int(env) if env.isdigit() else 0
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            return nvml.text(nv.nvmlDeviceGetName(handle)), nvml.text(nv.nvmlDeviceGetUUID(handle))
    except Exception:  # noqa: BLE001 - no NVML, no driver, no GPU: a CPU worker
        return "", ""


def _stamp() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _say(event: WorkerEvent) -> None:
    print(json.dumps(event), flush=True)


# (lesson, file, timeout, timing, device) -> the check's result as JSON:
# gpulab.lab.check.Lab.check's, or a recorded one (tests replay a class).
Check = Callable[["Lesson", Path, float, bool, str], CheckJson]


def _as_json(result: CheckResult) -> CheckJson:
    """The result's JSON (`gpulab check --json`'s), which CheckJson
    describes as far as the gradebook reads it."""
    return cast("CheckJson", result.to_json())


def run_judge(lesson: Lesson, file: Path, timeout: float, timing: bool, device: str) -> CheckJson:
    """A check as `gpulab check` runs it (gpulab.lab.check.Lab), as its JSON:
    no workspace (nothing recorded there, no compiler cache kept), the
    batch's limit."""
    from gpulab.lab.check import CheckOptions, Lab

    options = CheckOptions(limit=timeout, timing=timing, record=False)
    return _as_json(Lab(None, device=device).check(lesson, file, options=options))


class Worker:
    def __init__(
        self, batch_path: Path, check: Check = run_judge, gpu: tuple[str, str] | None = None
    ) -> None:
        from gpulab.course.content import load_course

        self.check = check
        self.batch = read_batch(batch_path)
        self.results = Path(self.batch["results"])
        self.course = load_course(Path(self.batch["content_root"]))
        self.device = str(self.batch.get("device") or "auto")
        if gpu is None:
            gpu = ("", "") if self.device == "cpu" else gpu_identity()
        self.gpu, self.uuid = gpu
        self.stack = stack()
        self.host = socket.gethostname()

    def timeout(self) -> float:
        from gpulab.lab.plan import default_timeout

        limit = self.batch.get("timeout")
        if isinstance(limit, (int, float)) and limit > 0:
            return float(limit)
        return default_timeout(self.device, bool(self.gpu))[0]

    def grade_student(self, index: int) -> int:
        """Grade students[index]'s tasks; the number graded now."""
        students = self.batch["students"]
        if not 0 <= index < len(students):
            raise SystemExit(
                f"index {index} is not a student of this batch (0..{len(students) - 1})"
            )
        entry = students[index]
        done = 0
        for task in entry["tasks"]:
            out = self.results / task["student"] / f"{task['exercise']}.json"
            if out.is_file():
                _say({"event": "skipped", "student": task["student"], "exercise": task["exercise"]})
                continue
            _say({"event": "start", "student": task["student"], "exercise": task["exercise"]})
            record = self.grade(task)
            atomic_write_json(out, record)
            done += 1
            res = record["result"]
            done_line: DoneEvent = {
                "event": "done",
                "student": task["student"],
                "exercise": task["exercise"],
                "status": res.get("status"),
                "summary": res.get("summary"),
                "seconds": record["seconds"],
            }
            _say(done_line)
        return done

    def grade(self, task: TaskJson) -> ResultRecord:
        from gpulab.wire.result import CheckResult
        from gpulab.wire.status import Status

        started, t0 = _stamp(), time.monotonic()
        lesson = self.course.find(task["exercise"])
        reference: ReferenceRecord | None = None
        try:
            if lesson is None or lesson.error:
                raise RuntimeError(
                    f"exercise {task['exercise']!r} is not in the course at {lesson}"
                )
            if not Path(task["file"]).is_file():
                raise RuntimeError(f"{task['file']}: the submission's file is gone")
            timing = bool(task.get("timing")) and bool(self.gpu)
            if timing:
                reference = self.reference(task["exercise"])
            result = self.check(lesson, Path(task["file"]), self.timeout(), timing, self.device)
        except Exception as exc:  # noqa: BLE001 - one task's failure is its row, never the batch's end
            result = _as_json(
                CheckResult(Status.ERROR, f"could not grade: {exc}", message=str(exc))
            )
        return {
            "format": 1,
            "batch": self.batch["batch"],
            "key": f"{self.batch['batch']}/{task['student']}/{task['exercise']}",
            "student": task["student"],
            "exercise": task["exercise"],
            "submission": task["submission"],
            "sha256": task["sha256"],
            "grader_version": task["grader_version"],
            "reference_sha": task["reference_sha"],
            "device": self.device,
            "gpu": self.gpu,
            "gpu_uuid": self.uuid,
            "host": self.host,
            "stack": self.stack,
            "started_at": started,
            "finished_at": _stamp(),
            "seconds": round(time.monotonic() - t0, 2),
            "result": result,
            "reference": reference,
        }

    def reference(self, exercise: str) -> ReferenceRecord | None:
        """The reference kernel's timed check on this GPU, once per batch and
        GPU: the first worker on it runs it (under a lock), the others read it."""
        lesson = self.course.find(exercise)
        if lesson is None:
            return None
        path = self.results / "_reference" / f"{exercise}.{self.uuid or self.host}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(path.with_suffix(".lock")):
            if path.is_file():
                try:
                    kept = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    kept = None
                # What a worker wrote here (below): anything else is timed again.
                if isinstance(kept, dict):
                    return cast("ReferenceRecord", kept)
            result = self.check(lesson, lesson.reference_path, self.timeout(), True, self.device)
            data: ReferenceRecord = {
                "gpu": self.gpu,
                "gpu_uuid": self.uuid,
                "at": _stamp(),
                "result": result,
            }
            atomic_write_json(path, data)
            return data


def grade_student(batch_path: str, index: int) -> int:
    """The function a Slurm array task runs (submitit pickles it by name)."""
    return Worker(Path(batch_path)).grade_student(index)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpulab.gradebook.worker")
    parser.add_argument("batch", help="the batch file (work/batches/<id>.json)")
    parser.add_argument(
        "--index", type=int, default=None, help="the student (default: $SLURM_ARRAY_TASK_ID)"
    )
    args = parser.parse_args(argv)
    index = args.index
    if index is None:
        env = os.environ.get("SLURM_ARRAY_TASK_ID", "")
        if not env.isdigit():
            parser.error("--index is needed outside a Slurm array task")
        index = int(env)
    # SIGTERM (scancel, a time limit, the local run's Ctrl-C) unwinds like
    # Ctrl-C: run_check then stops the judge and its sandboxes.
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        Worker(Path(args.batch)).grade_student(index)
    except KeyboardInterrupt:
        return 130
    except (OSError, ValueError) as exc:
        print(f"gpulab grade worker: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
