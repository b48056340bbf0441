"""Write gpulab/data/cost_reference.json: the cost model's estimate of each
reference solution, so a learner's estimate can say "the reference moves
1.0x" beside their own (gpulab.gpu.costmodel.reference_for).

For each kernel exercise with a bytes formula, runs the real CPU check of
kernels/<exercise>.py (`gpulab check --device cpu --json`, the same judge,
replay and counting a learner's check goes through) and keeps its `cost`:
the case it was counted on, bytes moved over the minimum, and the best
fraction of the roof. Run it again after changing a reference kernel or
the counting (tests/judge/test_cost_advice.py fails when the triad's has
drifted).

    python scripts/tools/cost_reference.py [EXERCISE ...]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "gpulab" / "data" / "cost_reference.json"
EXERCISES = ("bandwidth", "softmax", "matmul", "flash_attention", "rope_rmsnorm")


def estimate(exercise: str, home: Path) -> dict | None:
    """The reference's `cost` from a real CPU check, or None."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpulab",
            "check",
            exercise,
            "--file",
            str(ROOT / "kernels" / f"{exercise}.py"),
            "--device",
            "cpu",
            "--json",
            "--timeout",
            "900",
        ],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "GPULAB_HOME": str(home)},
        timeout=1200,
    )
    try:
        result = json.loads(done.stdout)
    except ValueError:
        print(f"{exercise}: no result\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    cost = result.get("cost")
    if not result.get("passed") or not isinstance(cost, dict):
        print(f"{exercise}: {result.get('summary')}", file=sys.stderr)
        return None
    return cost


def main(argv: list[str]) -> int:
    wanted = argv or list(EXERCISES)
    data = json.loads(OUT.read_text("utf-8")) if OUT.exists() else {}
    with tempfile.TemporaryDirectory() as home:
        for exercise in wanted:
            cost = estimate(exercise, Path(home))
            if cost is None:
                return 1
            data[exercise] = {
                cost["case"]: {
                    "ratio": round(cost["ratio"], 4),
                    "footprint_ratio": round(cost["footprint_ratio"], 4),
                    "best_fraction": round(cost["best_fraction"], 4),
                    "gpu": cost["gpu_key"],
                }
            }
            print(f"{exercise}: {cost['case']}: {cost['ratio']:.2f}x", file=sys.stderr)
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
