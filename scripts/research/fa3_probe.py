"""Run one FA3 schedule on one shape in this process and print its error and
time; the parent mode runs a list of them, each in a child with a timeout,
so a schedule that deadlocks shows as a hang instead of stopping the run.

    python3 scripts/research/fa3_probe.py                  # the built-in list (GPU)
    python3 scripts/research/fa3_probe.py --stress         # hundreds of launches each
    python3 scripts/research/fa3_probe.py --chosen         # the reference's schedules, 1000 each
    python3 scripts/research/fa3_probe.py B H S D causal '{"num_wg": 3}'
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

STRESS = [  # the same, but 300 launches each: a race that deadlocks rarely
    (4, 32, 4096, 64, False, {"num_wg": 3, "pingpong": True, "reps": 300}),
    (4, 32, 4096, 64, False, {"num_wg": 3, "pingpong": False, "reps": 300}),
    (1, 32, 16384, 64, False, {"num_wg": 3, "pingpong": False, "reps": 60}),
    (4, 32, 4096, 64, False, {"num_wg": 2, "reps": 300}),
    (4, 32, 4096, 64, True, {"num_wg": 3, "pingpong": True, "reps": 300}),
    (4, 32, 4096, 64, True, {"num_wg": 3, "pingpong": False, "reps": 300}),
]

# The reference's own schedules (SCHEDULES in the kernel file) on the bench
# shapes, a thousand launches each: the ones gpulab bench and the grader run.
CHOSEN = [
    (4, 32, 4096, 64, False),
    (4, 32, 4096, 64, True),
    (4, 16, 4096, 128, False),
    (4, 16, 4096, 128, True),
    (1, 32, 16384, 64, False),
    (1, 16, 16384, 128, True),
]

CASES = [  # (B, H, S, D, causal, schedule)
    (4, 32, 4096, 64, False, {"num_wg": 3, "pingpong": True}),
    (4, 32, 4096, 64, False, {"num_wg": 3, "pingpong": False}),
    (1, 1, 4096, 64, False, {"num_wg": 3, "pingpong": True}),
    (1, 1, 4032, 64, False, {"num_wg": 3, "pingpong": True}),
    (4, 32, 4032, 64, False, {"num_wg": 3, "pingpong": True}),
    (4, 32, 4032, 64, False, {"num_wg": 3, "pingpong": False}),
    (1, 4, 4096, 64, False, {"num_wg": 3, "pingpong": False}),
    (1, 132, 1024, 64, False, {"num_wg": 3, "pingpong": False}),
    (4, 32, 4096, 64, True, {"num_wg": 3, "pingpong": False}),
    (4, 32, 4096, 64, False, {"num_wg": 2}),
]


def one(B, H, S, D, causal, sched) -> dict:
    import torch

    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "scripts" / "sweeps"))
    import sweep_common

    fa3 = sweep_common.fa3_module()  # GPULAB_FA3_FILE picks a candidate file

    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    reps = sched.pop("reps", 10)
    fa3.launch(q, k, v, o, causal, 1 / math.sqrt(D), schedule=sched)
    torch.cuda.synchronize()
    want = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), is_causal=causal
    )
    err = float((o.float() - want).abs().max())
    t0 = time.perf_counter()
    for _ in range(reps):
        fa3.launch(q, k, v, o, causal, 1 / math.sqrt(D), schedule=sched)
    torch.cuda.synchronize()
    return {"err": err, "ms": (time.perf_counter() - t0) / reps * 1e3, "reps": reps}


def main() -> int:
    if len(sys.argv) > 1 and not sys.argv[1].startswith("--"):
        B, H, S, D = (int(x) for x in sys.argv[1:5])
        print(json.dumps(one(B, H, S, D, sys.argv[5] == "1", json.loads(sys.argv[6]))))
        return 0
    rows = []
    if "--chosen" in sys.argv:
        todo = [(B, H, S, D, c, {"reps": 1000 if S == 4096 else 250}) for B, H, S, D, c in CHOSEN]
    else:
        todo = STRESS if "--stress" in sys.argv else CASES
    for B, H, S, D, causal, sched in todo:
        args = [
            sys.executable,
            __file__,
            str(B),
            str(H),
            str(S),
            str(D),
            str(int(causal)),
            json.dumps(sched),
        ]
        try:
            r = subprocess.run(args, capture_output=True, text=True, timeout=40)
            res = (
                json.loads(r.stdout.strip().splitlines()[-1])
                if r.returncode == 0
                else {
                    "error": r.stderr.strip().splitlines()[-1][:200] if r.stderr else r.returncode
                }
            )
        except subprocess.TimeoutExpired:
            res = {"error": "hung (40 s)"}
        row = {"B": B, "H": H, "S": S, "D": D, "causal": causal, "schedule": sched, **res}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if out := os.environ.get("OUT"):
        tag = (
            "_" + Path(os.environ["GPULAB_FA3_FILE"]).stem
            if os.environ.get("GPULAB_FA3_FILE")
            else ""
        )
        name = (
            "fa3_chosen.json"
            if "--chosen" in sys.argv
            else "fa3_stress.json"
            if "--stress" in sys.argv
            else "fa3_probe.json"
        )
        Path(out, name.replace(".json", tag + ".json")).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
