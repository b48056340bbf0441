"""What `--explain` adds to a CPU check (issue 21: under 2 s without Nsight).

    python scripts/research/explain_cost.py OUT.json [EXERCISE ...] [--runs N]

For each exercise's reference solution: N pairs of `gpulab check --json`
without and with `--explain`, alternating, each in a fresh workspace (no
cached case descriptions or compiled kernels: the first explanation of a
submission, the dearest), then N pairs in one warm workspace. Records wall
times, the difference of each pair, and what the explanation reported of
itself (`explain.steps`, `not_compiled`, the kinds found), with the machine's
core count, load, and the torch and Triton versions.
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

ROOT = Path(__file__).resolve().parents[2]


def check(exercise: str, ws: Path, explain: bool) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "gpulab", "check", exercise, "--file"]
    cmd += [str(ROOT / "kernels" / f"{exercise}.py"), "--json", "--device", "cpu"]
    cmd += ["--explain"] if explain else []
    env = {**os.environ, "GPULAB_HOME": str(ws)}
    t = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    took = time.monotonic() - t
    try:
        return took, json.loads(proc.stdout)
    except ValueError:
        return took, {"status": "error", "summary": proc.stderr[-500:]}


def pair(exercise: str, ws: Path) -> dict:
    plain, _ = check(exercise, ws, False)
    explained, res = check(exercise, ws, True)
    ex = res.get("explain") or {}
    return {
        "plain_s": round(plain, 2),
        "explain_s": round(explained, 2),
        "added_s": round(explained - plain, 2),
        "status": res.get("status"),
        "steps": ex.get("steps"),
        "not_compiled": ex.get("not_compiled"),
        "kinds": [d.get("kind") for d in res.get("diagnosis") or []],
        "load": round(os.getloadavg()[0], 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description="What --explain adds to a CPU check.")
    ap.add_argument("out", nargs="?", default="explain_cost.json", type=Path)
    ap.add_argument("exercises", nargs="*", default=["softmax", "matmul", "flash_attention"])
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    out, exercises, runs = a.out, a.exercises, a.runs
    import torch
    import triton

    report: dict = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cores": os.cpu_count(), "cpu": platform.processor() or platform.machine()},
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
        "rows": [],
    }
    report["versions"]["triton"] = triton.__version__
    for exercise in exercises:
        for _ in range(runs):
            ws = Path(tempfile.mkdtemp(prefix="gpulab-cost-"))
            try:
                report["rows"].append(
                    {"exercise": exercise, "workspace": "fresh", **pair(exercise, ws)}
                )
            finally:
                shutil.rmtree(ws, ignore_errors=True)
        warm = Path(tempfile.mkdtemp(prefix="gpulab-cost-"))
        try:
            check(exercise, warm, True)  # fills the caches
            for _ in range(runs):
                report["rows"].append(
                    {"exercise": exercise, "workspace": "warm", **pair(exercise, warm)}
                )
        finally:
            shutil.rmtree(warm, ignore_errors=True)
        for kind in ("fresh", "warm"):
            added = [
                r["added_s"]
                for r in report["rows"]
                if r["exercise"] == exercise and r["workspace"] == kind
            ]
            print(
                f"{exercise} {kind}: added {statistics.mean(added):+.2f} s (runs {added})",
                file=sys.stderr,
            )
        out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
