"""How long a spare judge takes to get ready (issue 32): `Prepared(ahead=True)`,
the sandboxes started and warmed, the judge's own CUDA and the grader imported.

    python scripts/tools/spare_ready.py OUT.json [--device cpu|cuda] [--repeat N]
        [--exercise softmax]

Each run is a fresh process, as a spare judge is: the seconds to import the
judge, and to prepare: `imports_s` (the part a spare started early does beside
the check before it) and `gpu_start_s` (CUDA's start and the warm-ups, after). A learner's "think" time shorter than `prepare_s` is
time they wait at the check's start (the result's `judge start-up` stage).
Headless; from a checkout: PYTHONPATH=$PWD.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ONE = """
import json, os, sys, time
t0 = time.monotonic()
from gpulab.judge.prepared import prepare_ahead
from gpulab.wire.protocol import CheckRequest
t1 = time.monotonic()
req = CheckRequest(exercise=sys.argv[1], function=sys.argv[2], file=sys.argv[3],
                   device=sys.argv[4], workspace=sys.argv[5])
p = prepare_ahead(json.dumps(req.to_json()))
t2 = time.monotonic()
if p is not None:
    p.finish_ahead()  # the GPU start, which a spare started early does after the check
t3 = time.monotonic()
ok = p is not None and p._sandbox is not None
print(json.dumps({"import_s": round(t1 - t0, 3), "prepare_s": round(t3 - t1, 3),
                  "imports_s": round(t2 - t1, 3), "gpu_start_s": round(t3 - t2, 3), "ready": ok}))
if p is not None:
    p.close()
from gpulab.judge.remote import kill_descendants
from gpulab.judge.prepared import remove_folders
kill_descendants()
remove_folders()
os._exit(0)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--exercise", default="softmax")
    args = ap.parse_args()
    from gpulab.course.content import load_course

    lesson = load_course().find(args.exercise)
    if lesson is None:
        raise SystemExit(f"no exercise {args.exercise}")
    root = Path(__file__).resolve().parents[2]
    file = str(root / "kernels" / f"{args.exercise}.py")
    rows = []
    for i in range(args.repeat):
        ws = f"/tmp/gpulab-spare-ready-{os.getpid()}-{i}"
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-c", ONE, args.exercise, lesson.function, file, args.device, ws],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
        wall = time.monotonic() - start
        try:
            row = json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            row = {"error": done.stderr[-2000:]}
        row["wall_s"] = round(wall, 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
    import torch
    import triton

    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "device": args.device,
        "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else platform.processor(),
        "cpus": os.cpu_count(),
        "load": os.getloadavg()[0],
        "torch": torch.__version__,
        "triton": triton.__version__,
        "exercise": args.exercise,
    }
    Path(args.out).write_text(json.dumps({"meta": meta, "runs": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
