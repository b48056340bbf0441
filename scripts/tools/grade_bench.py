"""How fast `gpulab grade run` grades a class: files per minute on this
machine, and on a GPU students per hour per GPU.

    python scripts/tools/grade_bench.py OUT.json [--students 60]
        [--exercises copy_ceiling,comm_cost,serving_roofline] [--jobs N]
        [--device cpu|cuda|auto] [--budget SECONDS]

Builds a course in a temporary folder with the real CLI (`gpulab grade
init`, `roster`, `collect`): every student hands in every exercise, the
even ones the reference (each with its own last line, so every file is a
file of its own), the odd ones the starter. Then times one `gpulab grade
run` (local workers, the real judge) from start to its last ingest. With
`--budget` the run is stopped by Ctrl-C after that many seconds and the
rate is taken from what it finished (`gpulab grade run` ingests that much).
Writes the figures, the machine (CPUs, load before and after), the
versions and the per-status counts as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("torch", "triton", "jax", "submitit", "copydetect"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _gpus() -> list[str]:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        return [line for line in out.stdout.splitlines() if line.startswith("GPU ")]
    except (OSError, subprocess.TimeoutExpired):
        return []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--students", type=int, default=60)
    ap.add_argument(
        "--exercises",
        default=None,
        help="default: copy_ceiling,comm_cost,serving_roofline (--replay: the three "
        "whose reference and starter results are recorded: copy_ceiling,comm_cost,softmax)",
    )
    ap.add_argument("--jobs", type=int, default=None, help="local workers (default: gpulab's)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    ap.add_argument(
        "--budget", type=float, default=None, help="stop the run after this many seconds"
    )
    ap.add_argument(
        "--replay",
        action="store_true",
        help="no judge: recorded results (tests/fixtures/gradebook) through the real worker "
        "and ingest, to time the gradebook's own steps on a large class",
    )
    args = ap.parse_args()
    default = "copy_ceiling,comm_cost," + ("softmax" if args.replay else "serving_roofline")
    exercises = [e for e in (args.exercises or default).split(",") if e]
    if args.replay:
        return replay(args, exercises)
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("GPULAB_CONTENT", None)

    with tempfile.TemporaryDirectory(prefix="gpulab-grade-bench-") as tmp:
        base = Path(tmp)
        env["GPULAB_HOME"] = str(base / "ws")
        ids = [f"s{i:03d}" for i in range(args.students)]
        (base / "class.csv").write_text(
            "id,name,email\n" + "".join(f"{s},Student {s},{s}@example.edu\n" for s in ids)
        )
        for n, s in enumerate(ids):
            for ex in exercises:
                src = REPO / ("kernels" if n % 2 == 0 else "exercises") / f"{ex}.py"
                dest = base / "subs" / s / f"{ex}.py"
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(src.read_text() + f"\n# handed in by {s}\n")
        course = base / "course"

        def gpulab(*argv: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, "-m", "gpulab", "grade", *argv],
                capture_output=True,
                text=True,
                env=env,
                cwd=course if course.exists() else base,
            )

        r = gpulab(
            "init",
            str(course),
            "--exercises",
            ",".join(exercises),
            "--roster",
            str(base / "class.csv"),
        )
        if r.returncode:
            raise SystemExit(r.stderr)
        toml = course / "gradebook.toml"
        toml.write_text(toml.read_text().replace('device = "auto"', f'device = "{args.device}"'))
        t0 = time.monotonic()
        r = gpulab("collect", str(base / "subs"))
        collect_s = time.monotonic() - t0
        load_before = os.getloadavg()
        run_argv = [sys.executable, "-m", "gpulab", "grade", "run"]
        if args.jobs:
            run_argv += ["--jobs", str(args.jobs)]
        t0 = time.monotonic()
        proc = subprocess.Popen(
            run_argv, env=env, cwd=course, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        stopped = False
        try:
            out, err = proc.communicate(timeout=args.budget)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            stopped = True
            out, err = proc.communicate()
        seconds = time.monotonic() - t0
        load_after = os.getloadavg()
        status = json.loads(gpulab("status", "--json").stdout)
        counts: dict[str, int] = {}
        for g in status["grades"]:
            counts[g["status"]] = counts.get(g["status"], 0) + 1
        graded = sum(n for s, n in counts.items() if s not in ("pending", "missing"))
        runs = json.loads(
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import json,sqlite3,sys; c=sqlite3.connect(sys.argv[1]);"
                    "print(json.dumps([r[0] for r in c.execute('SELECT result FROM runs')]))",
                    str(course / "gradebook.sqlite"),
                ],
                capture_output=True,
                text=True,
            ).stdout
        )
        durations = sorted(json.loads(r).get("duration_s") or 0 for r in runs)
    gpus = _gpus()
    record = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "cpu": _cpu_model(),
            "gpus": gpus,
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in load_after],
        },
        "versions": _versions(),
        "device": args.device,
        "jobs": args.jobs,
        "students": args.students,
        "exercises": exercises,
        "files": args.students * len(exercises),
        "graded": graded,
        "stopped_by_budget": stopped,
        "collect_s": round(collect_s, 2),
        "run_s": round(seconds, 1),
        "files_per_minute": round(graded / seconds * 60, 2),
        "students_per_hour": round(graded / len(exercises) / seconds * 3600, 1),
        "students_per_hour_per_gpu": (
            round(graded / len(exercises) / seconds * 3600 / len(gpus), 1)
            if gpus and args.device != "cpu"
            else None
        ),
        "check_s_median": durations[len(durations) // 2] if durations else None,
        "check_s_max": durations[-1] if durations else None,
        "statuses": counts,
        "run_exit": proc.returncode,
        "run_tail": (out + err)[-1500:],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(
        json.dumps(
            {
                k: record[k]
                for k in (
                    "files",
                    "graded",
                    "run_s",
                    "files_per_minute",
                    "students_per_hour",
                    "statuses",
                )
            }
        )
    )
    return 0


def replay(args: argparse.Namespace, exercises: list[str]) -> int:
    """The gradebook's own cost (collect, plan, workers' bookkeeping, ingest,
    exports) for a large class, the judge replaced by recorded results."""
    import contextlib
    import io

    sys.path.insert(0, str(REPO))
    from gpulab.course.content import load_course
    from gpulab.gradebook import exports
    from gpulab.gradebook.collect import collect
    from gpulab.gradebook.folder import CourseFolder, import_roster
    from gpulab.gradebook.ingest import ingest
    from gpulab.gradebook.plan import stale, write_batch
    from gpulab.gradebook.roster import parse_roster
    from gpulab.gradebook.worker import Worker

    recorded = REPO / "tests" / "fixtures" / "gradebook" / "cpu"

    def check(lesson, file, timeout, timing, device):  # the recorded result of the file's kind
        kind = "ref" if "# honest" in file.read_text() else "starter"
        data = json.loads((recorded / f"{lesson.exercise}_{kind}.json").read_text())
        return {**data, "file": str(file)}

    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="gpulab-grade-replay-") as tmp:
        base = Path(tmp)
        ids = [f"s{i:04d}" for i in range(args.students)]
        (base / "class.csv").write_text("id,name\n" + "".join(f"{s},Student {s}\n" for s in ids))
        for n, s in enumerate(ids):
            for ex in exercises:
                honest = n % 2 == 0
                src = REPO / ("kernels" if honest else "exercises") / f"{ex}.py"
                dest = base / "subs" / s / f"{ex}.py"
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(src.read_text() + f"\n# {'honest' if honest else 'wrong'} {s}\n")
        root = base / "course"
        root.mkdir()
        (root / "gradebook.toml").write_text(
            "".join(f'[[assignment]]\nexercise = "{ex}"\npoints = 10\n\n' for ex in exercises)
        )
        folder = CourseFolder.open(root, load_course())
        import_roster(folder.conn, parse_roster(base / "class.csv"))
        t = time.monotonic()
        collect(folder.conn, root, base / "subs", folder.cfg.exercises)
        times["collect_s"] = time.monotonic() - t
        t = time.monotonic()
        tasks = stale(folder.conn, folder.cfg, folder.course)
        times["plan_s"] = time.monotonic() - t
        batch = write_batch(root, tasks, device="cpu", timeout=None, content_root=REPO)
        worker = Worker(batch, check=check)
        t = time.monotonic()
        with contextlib.redirect_stdout(io.StringIO()):
            for i in range(len(worker.batch["students"])):
                worker.grade_student(i)
        times["workers_s"] = time.monotonic() - t
        t = time.monotonic()
        report = ingest(folder.conn, folder.cfg, root)
        times["ingest_s"] = time.monotonic() - t
        t = time.monotonic()
        exports.canvas(folder.conn, folder.cfg)
        exports.long(folder.conn, folder.cfg)
        times["exports_s"] = time.monotonic() - t
    record = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "mode": "replay (no judge: recorded results through the real worker and ingest)",
        "machine": {
            "cpus": os.cpu_count(),
            "cpu": _cpu_model(),
            "load": [round(x, 2) for x in os.getloadavg()],
        },
        "versions": _versions(),
        "students": args.students,
        "exercises": exercises,
        "files": len(tasks),
        "ingested": report.added,
        "statuses": report.statuses,
        **{k: round(v, 2) for k, v in times.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
