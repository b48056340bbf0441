"""Every reference graded with the replay on and off, on the same warm GPU
(issue 44: the compiled-kernel replay must grade as the sandbox's own
timing does, within 2 points of the roofline).

    python scripts/tools/replay_compare.py OUT.json [EXERCISE ...] [--budget S]

For each exercise (default: the five kernel exercises with timing), the
reference `kernels/EX.py` is checked with the replay on: each timed row
then holds both times, the replay's (graded) and the sandbox's own batch
(`claimed_ms`, measured as a check without the replay measures), so one
check gives both grades (the roofline fraction scales with 1/time). With
--both it is also checked with GPULAB_GPU_REPLAY=0, in the same workspace.
Each row: status, grade, roofline fraction, speedup, the check's stages
and wall time, and each timed case's time (replayed and claimed). The
summary line says which exercises differ by more than 2 points. Headless;
runs from a checkout on the GPU machine: PYTHONPATH=$PWD.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

EXERCISES = ["bandwidth", "softmax", "matmul", "flash_attention", "rope_rmsnorm"]


def check(ex: str, replay: str, home: str, limit: float) -> dict:
    env = dict(os.environ, GPULAB_GPU_REPLAY=replay, GPULAB_HOME=home)
    start = time.perf_counter()
    try:
        p = subprocess.run(
            [sys.executable, "-m", "gpulab", "check", ex, "--file", f"kernels/{ex}.py", "--json"],
            capture_output=True,
            text=True,
            timeout=limit,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "wall_s": limit}
    wall = time.perf_counter() - start
    try:
        r = json.loads(p.stdout)
    except ValueError:
        return {"status": "unreadable", "rc": p.returncode, "stderr": p.stderr[-2000:]}
    t = r.get("timing") or {}
    return {
        "status": r.get("status"),
        "summary": r.get("summary"),
        "grade": t.get("grade"),
        "fraction": t.get("roofline_fraction"),
        "speedup": t.get("speedup"),
        "wall_s": round(wall, 2),
        "stages": r.get("stages"),
        "slowest": r.get("slowest"),
        "notes": [n[:300] for n in r.get("notes") or []],
        "message": (r.get("message") or "")[-1500:],
        "cases": [
            {
                "name": c.get("name"),
                "ms": c.get("ms"),
                "claimed_ms": c.get("claimed_ms"),
                "fraction": c.get("roofline_fraction"),
            }
            for c in t.get("cases", [])
        ],
        "claimed_fraction": _claimed_fraction(t.get("cases", [])),
    }


def _claimed_fraction(cases: list[dict]) -> float | None:
    """The geometric mean roofline fraction by the sandbox's own times."""
    import math

    xs = [
        c["roofline_fraction"] * c["ms"] / c["claimed_ms"]
        for c in cases
        if c.get("roofline_fraction") and c.get("ms") and c.get("claimed_ms")
    ]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("exercises", nargs="*")
    ap.add_argument("--budget", type=float, default=540.0)
    ap.add_argument("--both", action="store_true", help="also check with the replay off")
    args = ap.parse_args()
    import torch
    import triton

    out: dict = {
        "date": time.strftime("%Y-%m-%d"),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "rows": {},
    }
    home = tempfile.mkdtemp(prefix="replay-compare-")
    deadline = time.monotonic() + args.budget
    for ex in args.exercises or EXERCISES:
        row = {}
        for replay in ("1", "0") if args.both else ("1",):
            left = deadline - time.monotonic()
            if left < 30:
                row[f"replay{replay}"] = {"status": "not run (budget)"}
                continue
            row[f"replay{replay}"] = check(ex, replay, home, min(left, 240))
            r = row[f"replay{replay}"]
            print(
                ex,
                f"replay={replay}",
                r.get("status"),
                r.get("summary"),
                r.get("wall_s"),
                flush=True,
            )
        on, off = row.get("replay1", {}), row.get("replay0", {})
        if on.get("fraction") is not None and on.get("claimed_fraction") is not None:
            row["points"] = round(100 * (on["fraction"] - on["claimed_fraction"]), 2)
        if on.get("fraction") is not None and off.get("fraction") is not None:
            row["points_vs_replay_off"] = round(100 * (on["fraction"] - off["fraction"]), 2)
        out["rows"][ex] = row
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    differ = {
        ex: r.get("points") for ex, r in out["rows"].items() if abs(r.get("points") or 99) > 2
    }
    print(
        "replay on minus off, roofline points:",
        {ex: r.get("points") for ex, r in out["rows"].items()},
    )
    print("more than 2 points apart (or not compared):", differ or "none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
