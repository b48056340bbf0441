"""Run every slow-but-correct variant through `gpulab check --explain --json`
on a GPU and write what the diagnosis said (issue 21, for the H200 machine).

    python scripts/research/explain_gpu.py OUT.json [EXERCISE,...] [--jobs N]

Per variant: status, grade, roofline fraction, the diagnosis list (kind,
evidence, severity) and what --explain cost (`explain.seconds`, after the
timing). Every timed check carries a diagnosis even without --explain: for
the references the check also runs without it, `diagnosis_without_explain`
records what it said and `auto_seconds` what that automatic part cost.
OUT.json is rewritten as each variant ends, so a run cut short keeps what it
measured; EXERCISE,... runs only those exercises' variants. `--jobs N` runs N
variants at once, each in a workspace of its own: compiles overlap, and
timing phases still take turns (the GPU's timing lock), but one variant's
correctness runs can land in another's timing, so the times are noisier
(the output records `jobs`). Expected top kinds are those asserted on the CPU
in tests/diagnosis/test_diagnosis.py; the `match` field says whether the GPU agrees.
Not run in CI: it needs a GPU (about a minute a variant).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SLOW = ROOT / "tests" / "fixtures" / "slow_kernels"
VARIANTS = [  # (file, exercise, expected top kind); None: the reference, no expectation
    ("softmax_one_program.py", "softmax", "too_few_programs"),
    ("softmax_three_pass.py", "softmax", "extra_bytes"),
    ("softmax_one_warp.py", "softmax", "register_spills"),
    ("bandwidth_small_blocks.py", "bandwidth", "low_occupancy"),
    ("bandwidth_few_programs.py", "bandwidth", "too_few_programs"),
    ("matmul_no_dot.py", "matmul", "no_tensor_cores"),
    # No grouped order: the CPU derives the wave's footprint against L2; the
    # GPU run says whether the timing (and DRAM bytes, with Nsight) agree.
    ("matmul_row_major.py", "matmul", "extra_bytes"),
    ("matmul_small_tiles.py", "matmul", "wrong_roof"),
    ("matmul_spills.py", "matmul", "register_spills"),
    ("flash_attention_no_dot.py", "flash_attention", "no_tensor_cores"),
    ("flash_attention_one_program_per_head.py", "flash_attention", "too_few_programs"),
    ("flash_attention_spills.py", "flash_attention", "register_spills"),
    ("rope_rmsnorm_unfused.py", "rope_rmsnorm", "extra_bytes"),
    ("rope_rmsnorm_one_head.py", "rope_rmsnorm", "low_occupancy"),
    (str(ROOT / "kernels" / "softmax.py"), "softmax", None),
    (str(ROOT / "kernels" / "bandwidth.py"), "bandwidth", None),
    (str(ROOT / "kernels" / "matmul.py"), "matmul", None),
    (str(ROOT / "kernels" / "flash_attention.py"), "flash_attention", None),
    (str(ROOT / "kernels" / "rope_rmsnorm.py"), "rope_rmsnorm", None),
]


def check(exercise: str, file: Path, ws: Path, explain: bool) -> tuple[dict, float]:
    cmd = [
        sys.executable,
        "-m",
        "gpulab",
        "--workspace",
        str(ws),
        "check",
        exercise,
        "--file",
        str(file),
        "--json",
        "--device",
        os.environ.get("EXPLAIN_DEVICE", "cuda"),  # cpu: try the script here
    ] + (["--explain"] if explain else [])
    t = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    except subprocess.TimeoutExpired:
        return {"status": "error", "summary": "timed out after 600 s"}, time.monotonic() - t
    took = time.monotonic() - t
    try:
        return json.loads(proc.stdout), took
    except ValueError:
        return {"status": "error", "summary": proc.stderr[-2000:]}, took


def run_variant(name: str, exercise: str, expected: str | None, ws_root: Path) -> dict:
    file = Path(name) if Path(name).is_absolute() else SLOW / name
    ws = ws_root / f"{exercise}-{file.stem}"
    plain, t_plain = check(exercise, file, ws, explain=False) if expected is None else ({}, 0.0)
    res, t_explain = check(exercise, file, ws, explain=True)
    diag = res.get("diagnosis") or []
    timing = res.get("timing") or {}
    row = {
        "variant": file.name,
        "exercise": exercise,
        "expected": expected,
        "top": diag[0]["kind"] if diag else None,
        "match": (diag[0]["kind"] if diag else None) == expected,
        "status": res.get("status"),
        "summary": res.get("summary"),
        "grade": timing.get("grade"),
        "roofline_fraction": timing.get("roofline_fraction"),
        "diagnosis": [{k: d.get(k) for k in ("kind", "severity", "evidence")} for d in diag],
        "explain": {k: v for k, v in (res.get("explain") or {}).items() if k != "facts"},
        "diagnosis_without_explain": [d["kind"] for d in plain.get("diagnosis") or []],
        "auto_seconds": (plain.get("explain") or {}).get("seconds"),
        "seconds_plain": round(t_plain, 1),
        "seconds_explain": round(t_explain, 1),
    }
    print(
        f"{file.name}: top={row['top']} expected={expected} grade={row['grade']}", file=sys.stderr
    )
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description="Every slow variant through --explain on a GPU.")
    ap.add_argument("out", nargs="?", default="explain_gpu.json", type=Path)
    ap.add_argument("exercises", nargs="?", help="EXERCISE,... (all by default)")
    ap.add_argument("--jobs", type=int, default=1, help="variants at once (default 1)")
    ap.add_argument("--only", help="VARIANT,... (file names, e.g. matmul_spills.py)")
    a = ap.parse_args()
    out_path, jobs = a.out, a.jobs
    only = set(a.exercises.split(",")) if a.exercises else None
    # Workspaces (Triton caches, logs) outside OUT: the device call sends OUT back.
    ws_root = Path(tempfile.mkdtemp(prefix="gpulab-explain-ws-"))
    todo = [v for v in VARIANTS if not only or v[1] in only]
    if a.only:
        todo = [v for v in todo if Path(v[0]).name in a.only.split(",")]
    rows: list[dict] = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_variant, *v, ws_root) for v in todo]
        for future in as_completed(futures):
            rows.append(future.result())  # as each ends: a run cut short keeps them
            out_path.write_text(json.dumps({"jobs": jobs, "rows": rows}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
