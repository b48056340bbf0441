"""Issue 47's graded part A on a GPU, in one device call (about 6-8 minutes).

    python scripts/tools/issue47_gpu.py OUT.json [steps] [bands]

steps: lesson 01's new steps (the five Triton puzzles, matmul_ceiling):
    each reference passes and each starter fails, with the words it fails on
    (on a GPU the puzzles run compiled; matmul_ceiling's figures are checked
    against gpulab's own timing of the same products).
bands: the letters, in a fresh workspace and again after
    `gpulab probe --bench --quick` there: the triad and lesson 02's softmax
    (as a learner writes it, and the reference) must get an A, the naive
    ones (a triad in two kernels, softmax in three passes) must not, and each
    letter must be the same before and after the probe.

Writes each check's status, summary and what its letter was measured
against; prints one line a check and the verdicts. Exit status 1 when a
verdict fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STEPS = ["triton_mask", "triton_grid", "triton_tile", "triton_reduce", "triton_launch"]
STEPS.append("matmul_ceiling")

# The triad in two kernels: alpha * x stored (fp32), read back and added to y:
# five passes over memory for the triad's three, a naive design.
TWO_KERNELS = """
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(t_ptr, x_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(t_ptr + offs, alpha * tl.load(x_ptr + offs, mask=mask).to(tl.float32), mask=mask)


@triton.jit
def add_kernel(out_ptr, t_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    s = tl.load(t_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, s.to(out_ptr.dtype.element_ty), mask=mask)


def triad(x, y, alpha):
    n = x.numel()
    t = torch.empty(n, dtype=torch.float32, device=x.device)
    out = torch.empty_like(x)
    grid = (triton.cdiv(n, 1024),)
    scale_kernel[grid](t, x, alpha, n, BLOCK=1024)
    add_kernel[grid](out, t, y, n, BLOCK=1024)
    return out
"""


def check(exercise: str, file: Path, home: Path, *extra: str) -> dict:
    t0 = time.monotonic()
    env = dict(os.environ, GPULAB_HOME=str(home), PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "gpulab", "check", exercise, "--file", str(file), "--json", *extra],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=280,
    )
    try:
        r = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"status": "crashed", "rc": proc.returncode, "stderr": proc.stderr[-2000:]}
    timing = r.get("timing") or {}
    bad = [c for c in r.get("cases", []) if not c.get("passed")]
    return {
        "status": r.get("status"),
        "summary": r.get("summary"),
        "grade": timing.get("grade"),
        "graded_on": (timing.get("graded_on") or {}).get("text"),
        "first_bad": (bad[0].get("detail") or "")[:400] if bad else "",
        "notes": r.get("notes", [])[:6],
        "seconds": round(time.monotonic() - t0, 1),
    }


def steps(home: Path) -> tuple[dict, list[str]]:
    out, problems = {}, []
    for ex in STEPS:
        ref = check(ex, ROOT / "kernels" / f"{ex}.py", home)
        starter = check(ex, ROOT / "exercises" / f"{ex}.py", home, "--no-timing")
        out[ex] = {"reference": ref, "starter": starter}
        print(f"{ex}: reference {ref['status']} ({ref['seconds']} s) {ref['summary']}")
        print(f"{ex}: starter {starter['status']}: {starter['first_bad'] or starter['summary']}")
        if ref["status"] != "passed":
            problems.append(f"{ex}'s reference did not pass: {ref['summary']}")
        if starter["status"] != "failed":
            problems.append(f"{ex}'s starter did not fail: {starter['status']}")
    return out, problems


def bands(home: Path, tmp: Path) -> tuple[dict, list[str]]:
    two = tmp / "bandwidth_two_kernels.py"
    two.write_text(TWO_KERNELS)
    slow = ROOT / "tests" / "fixtures" / "slow_kernels"
    variants = {  # name -> (exercise, file, a letter it must get (or "not A"))
        "triad, the reference": ("bandwidth", ROOT / "kernels" / "bandwidth.py", "A"),
        "triad in two kernels": ("bandwidth", two, "not A"),
        "softmax as a learner writes it": (
            "softmax",
            ROOT / "scripts" / "tools" / "learner" / "softmax.py",
            "A",
        ),
        "softmax, the reference": ("softmax", ROOT / "kernels" / "softmax.py", "A"),
        "softmax in three passes": ("softmax", slow / "softmax_three_pass.py", "not A"),
    }
    again = ["triad, the reference", "softmax as a learner writes it", "softmax in three passes"]
    out: dict = {"before_probe": {}, "after_probe": {}}
    problems = []
    ceilings = home / ".gpulab" / "ceilings"
    if ceilings.exists() and any(ceilings.iterdir()):
        problems.append(f"{ceilings} is not empty: the 'before the probe' runs are not")
    for name, (ex, file, want) in variants.items():
        r = out["before_probe"][name] = check(ex, file, home)
        print(f"before the probe, {name}: {r['summary']} [{r['graded_on']}] ({r['seconds']} s)")
        ok = r["grade"] == want if want != "not A" else r["grade"] not in (None, "A")
        if not ok:
            problems.append(f"{name}: letter {r['grade']}, expected {want}")
    env = dict(os.environ, GPULAB_HOME=str(home), PYTHONPATH=str(ROOT))
    probe = subprocess.run(
        [sys.executable, "-m", "gpulab", "probe", "--bench", "--quick"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=240,
    )
    out["probe"] = probe.stdout[-1500:]
    print(probe.stdout[-600:])
    for name in again:
        ex, file, _ = variants[name]
        r = out["after_probe"][name] = check(ex, file, home)
        before = out["before_probe"][name]["grade"]
        print(f"after the probe, {name}: {r['summary']} (before: {before})")
        if r["grade"] != before:
            problems.append(f"{name}: {before} before the probe, {r['grade']} after")
        if "copy ceiling this GPU measured" not in (r["summary"] or ""):
            problems.append(f"{name}: the summary does not say the measured copy ceiling")
    return out, problems


def main() -> int:
    out_path = Path(sys.argv[1])
    parts = sys.argv[2:] or ["steps", "bands"]
    tmp = Path(tempfile.mkdtemp(prefix="issue47-"))
    result: dict = {"parts": parts}
    problems: list[str] = []
    if "steps" in parts:
        result["steps"], found = steps(tmp / "steps-home")
        problems += found
    if "bands" in parts:
        result["bands"], found = bands(tmp / "bands-home", tmp)
        problems += found
    result["problems"] = problems
    out_path.write_text(json.dumps(result, indent=1))
    print("\n".join(["PROBLEMS:", *problems]) if problems else "every verdict holds")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
