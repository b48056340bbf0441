"""Trusted grading on a GPU: honest references through the judge (CUDA IPC,
judge-timed batches), beside the bench's in-process timing, and cheats
that must fail. Usage: python scripts/tools/trusted_grading_gpu.py OUT.json [EX ...]
(EX: exercises whose reference to grade, all five by default; `cheats`: none,
only the softmax cheats; `nocheats`: the references alone)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from gpulab.course.content import load_course  # noqa: E402
from gpulab.lab.runner import run_check  # noqa: E402

# Each cheat is the tail of a submission whose head is the reference; the
# same files are tests/judge/test_trusted_grading.py's.
CHEATS = REPO / "tests" / "fixtures" / "cheats"


def summarise(r: dict) -> dict:
    t = r.get("timing") or {}
    return {
        "status": r["status"],
        "summary": r["summary"],
        "message": r.get("message", "")[-600:],
        "notes": r.get("notes", []),
        "isolation": r.get("isolation"),
        "verdict": r.get("verdict"),
        "duration_s": r.get("duration_s"),
        "stages": r.get("stages"),
        "cases": [
            {
                k: c.get(k)
                for k in (
                    "shape",
                    "dtype",
                    "ms",
                    "reps",
                    "rse",
                    "roofline_fraction",
                    "speedup",
                    "batch_reps",
                    "judge_flush_ms",
                    "judge_copy_ms",
                    "batches",
                    "clocks",
                )
            }
            for c in t.get("cases", [])
        ],
    }


def main() -> None:
    out_path = Path(sys.argv[1])
    args = sys.argv[2:]
    cheats = "nocheats" not in args
    exercises = [a for a in args if a != "nocheats"] or [
        "softmax",
        "bandwidth",
        "matmul",
        "rope_rmsnorm",
        "flash_attention",
    ]
    if exercises == ["cheats"]:
        exercises = []
    course = load_course()
    results: dict = {}
    tmp = Path("/tmp/trusted")
    tmp.mkdir(exist_ok=True)
    for ex in exercises:
        t0 = time.time()
        r = run_check(
            course.find(ex),
            REPO / "kernels" / f"{ex}.py",
            device="cuda",
            timeout=500,
            workspace="/tmp/gpulab-ws",
        ).to_json()
        results[f"honest:{ex}"] = summarise(r)
        if ex == "rope_rmsnorm":
            results[f"honest:{ex}"]["notes"] = r.get("notes", [])[-8:]
        print(ex, r["status"], r["summary"][:200], f"{time.time() - t0:.0f}s", flush=True)
        out_path.write_text(json.dumps(results, indent=1))
    ref = (REPO / "kernels" / "softmax.py").read_text()
    for cheat in sorted(CHEATS.glob("*.py")) if cheats else []:
        name = cheat.stem
        f = tmp / f"{name}.py"
        f.write_text(ref + "\n" + cheat.read_text())
        r = run_check(
            course.find("softmax"),
            f,
            device="cuda",
            timeout=500,
            workspace="/tmp/gpulab-ws",
        ).to_json()
        results[f"cheat:{name}"] = summarise(r)
        print(name, r["status"], r["summary"][:300], flush=True)
        out_path.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
