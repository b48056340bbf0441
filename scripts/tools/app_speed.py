"""Measure gpulab's own speed on this machine (run it on a 2-core CPU box).

    python scripts/tools/app_speed.py [--suite] [--json PATH]

- `gpulab --help`: median of 7 runs (target < 0.3 s);
- the first TUI screen: start `python -m gpulab` in a real terminal (tmux,
  80x24) and poll the screen until the first frame is drawn (target < 1 s),
  then again until the lesson's text is;
- each ready exercise's CPU check of its reference (Triton interpreter,
  correctness only; target < 15 s);
- with --suite, the whole test suite (target < 10 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _env(home: str) -> dict[str, str]:
    env = dict(os.environ, GPULAB_HOME=home)
    # As installed, gpulab's modules have their bytecode cached; a shell that
    # sets PYTHONDONTWRITEBYTECODE (some sandboxes do) would recompile them
    # on every start and time the compiler.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def time_help(home: str) -> float:
    runs = []
    for _ in range(7):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "gpulab", "--help"],
            env=_env(home),
            capture_output=True,
            check=True,
        )
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def time_first_screen(home: str, marker: str = "gpulab — 01") -> float | None:
    """Seconds from process start until `marker` is on the screen: by default
    the title bar naming the open lesson, drawn with the first frame; with
    "Lesson 01 —", the lesson's own heading, which the Lesson pane renders
    just after that frame. (At 80 columns the lesson list starts folded
    away, so a lesson name from the list, the marker until 2026-11-30,
    never appears.)"""
    if not shutil.which("tmux"):
        return None
    # A workspace that has been opened before: the welcome screen is a
    # one-time modal; the lesson is what a returning learner sees.
    subprocess.run([sys.executable, "-m", "gpulab", "list"], env=_env(home), capture_output=True)
    name = f"gpulab-speed-{os.getpid()}"
    cmd = (
        f"cd {REPO} && env -u PYTHONDONTWRITEBYTECODE GPULAB_HOME={home} {sys.executable} -m gpulab"
    )
    times = []
    for run in range(4):  # the first writes the TUI modules' bytecode: not counted
        t0 = time.perf_counter()
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", name, "-x", "80", "-y", "24", cmd], check=True
        )
        seen = None
        while time.perf_counter() - t0 < 20:
            screen = subprocess.run(
                ["tmux", "capture-pane", "-p", "-t", name], capture_output=True, text=True
            ).stdout
            if marker in screen:
                seen = time.perf_counter() - t0
                break
            time.sleep(0.01)
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
        if seen is not None and run > 0:
            times.append(seen)
        time.sleep(0.3)
    return statistics.median(times) if times else None


def time_checks(home: str) -> dict[str, float]:
    sys.path.insert(0, str(REPO))
    from gpulab.course.content import load_course

    out = {}
    for lesson in load_course().lessons:
        if not lesson.ready or lesson.missing_requirements():
            continue
        t0 = time.perf_counter()
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "gpulab",
                "check",
                lesson.exercise,
                "--file",
                str(lesson.reference_path),
                "--device",
                "cpu",
                "--no-timing",
            ],
            env=_env(home),
            capture_output=True,
            text=True,
        )
        out[lesson.exercise] = round(time.perf_counter() - t0, 2)
        if r.returncode != 0:
            out[lesson.exercise + " (FAILED)"] = r.returncode
    return out


def time_suite() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-x"], cwd=REPO)
    return time.perf_counter() - t0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--suite", action="store_true")
    p.add_argument("--json")
    args = p.parse_args()
    home = tempfile.mkdtemp(prefix="gpulab-speed-")
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "help_s": round(time_help(home), 3),
        "first_screen_s": time_first_screen(home),
        "lesson_text_s": time_first_screen(home, "Lesson 01 —"),
        "checks_s": time_checks(home),
    }
    if args.suite:
        report["suite_s"] = round(time_suite(), 1)
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
