"""Validate `--explain`'s Nsight Compute step on a GPU with ncu (issue 21).

    python scripts/research/nsight_gpu.py OUT_DIR

Writes into OUT_DIR:
- nsight_gpu.json: per submission (kernels/softmax.py and the three-pass
  slow variant), the plain check's, --explain's without ncu on PATH and
  --explain's with it: wall time, status, the top diagnosis, explain.nsight
  (less its CSV) and the basis; the `probe` below (run first); ncu's version and its
  --help lines about ports.
- ncu_<name>.csv: the raw CSV the step parsed (explain.nsight.csv).
- probe_<variant>.log: ncu's own output for the confinement probe.

The probe runs ncu, as the step does, on a small torch program that confines
itself first with the judge's policy: without confinement, with the policy
every sandbox gets, and with the policy plus the `profiler` field. If the
step fails in the check, it says which part of the confinement ncu needs.
Not run in CI: it needs a GPU and ncu (about two minutes).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
SUBMISSIONS = [
    ("reference", ROOT / "kernels" / "softmax.py"),
    ("three_pass", ROOT / "tests" / "fixtures" / "slow_kernels" / "softmax_three_pass.py"),
]
PROBE = r"""
import json, sys
import torch
torch.cuda.init()
x = torch.randn(1 << 24, device="cuda")
policy = json.loads(sys.argv[1])
if policy:
    from gpulab.sandbox.isolation import Policy, apply
    print("in force:", apply(Policy.parse(policy)), flush=True)
torch.cuda.profiler.start()
y = x * 2  # 64 MiB read, 64 MiB written
torch.cuda.synchronize()
torch.cuda.profiler.stop()
print("probe done", flush=True)
"""


def check(file: Path, ws: Path, explain: bool, with_ncu: bool) -> tuple[dict, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ncu = shutil.which("ncu")
    if not with_ncu and ncu:  # the same PATH without ncu's folder
        drop = os.path.dirname(ncu)
        env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != drop)
    cmd = [sys.executable, "-m", "gpulab", "--workspace", str(ws), "check", "softmax"]
    cmd += ["--file", str(file), "--json", "--device", "cuda"] + (["--explain"] if explain else [])
    t = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    except subprocess.TimeoutExpired:
        return {"status": "error", "summary": "timed out after 300 s"}, time.monotonic() - t
    took = time.monotonic() - t
    try:
        return json.loads(proc.stdout), took
    except ValueError:
        return {"status": "error", "summary": (proc.stdout + proc.stderr)[-3000:]}, took


def brief(result: dict, took: float) -> dict:
    ex = result.get("explain") or {}
    nsight = dict(ex.get("nsight") or {})
    nsight.pop("csv", None)
    return {
        "seconds": round(took, 1),
        "status": result.get("status"),
        "summary": result.get("summary"),
        "diagnosis": [
            {k: d.get(k) for k in ("kind", "severity", "evidence")}
            for d in result.get("diagnosis") or []
        ],
        "nsight": nsight,
        "basis": ex.get("basis"),
        "steps": ex.get("steps"),
        "error": ex.get("error"),
    }


def probe(out: Path) -> dict:
    """ncu on a self-confining program: what the confinement lets through."""
    from gpulab.explain import nsight
    from gpulab.judge.policy import policy_for

    ncu = shutil.which("ncu")
    if not ncu:
        return {"error": "ncu not on PATH"}
    private = Path(tempfile.mkdtemp(prefix="gpulab-probe-"))
    base = policy_for(
        {"file": str(ROOT / "kernels" / "softmax.py"), "exercise": "softmax"},
        "cuda",
        private,
        private,
    ).to_json()
    variants = {
        "unconfined": {},
        "sandbox": base,
        "profiler": {**base, "profiler": nsight.profiler_policy(ncu).to_json()},
    }
    rows = {}
    for name, policy in variants.items():
        log = private / f"{name}.csv"
        cmd = nsight.command(ncu, log, "sm_90") + [sys.executable, "-c", PROBE, json.dumps(policy)]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(private)}
        t = time.monotonic()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
            rc, text = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired:
            rc, text = "timeout", ""
        csv = log.read_text(errors="replace") if log.exists() else ""
        (out / f"probe_{name}.log").write_text(text + "\n--- log file ---\n" + csv)
        kernels, problem = nsight.parse(csv)
        rows[name] = {
            "rc": rc,
            "seconds": round(time.monotonic() - t, 1),
            "kernels": [nsight.kernel_facts(k) for k in kernels],
            "problem": problem,
            "tail": text[-600:],
        }
    shutil.rmtree(private, ignore_errors=True)
    return rows


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "nsight_gpu_out")
    out.mkdir(parents=True, exist_ok=True)
    ws = Path(tempfile.mkdtemp(prefix="gpulab-nsight-ws-"))  # not under OUT: sent back
    ncu = shutil.which("ncu")
    report: dict = {"ncu": ncu}

    def save() -> None:  # after every step: a run cut short keeps what it measured
        (out / "nsight_gpu.json").write_text(json.dumps(report, indent=1))

    if ncu:
        version = subprocess.run([ncu, "--version"], capture_output=True, text=True)
        helptext = subprocess.run([ncu, "--help"], capture_output=True, text=True).stdout
        report["ncu_version"] = version.stdout.strip()[-300:]
        report["ncu_help_ports"] = [
            ln.strip() for ln in helptext.splitlines() if "port" in ln.lower() or "connection" in ln
        ]
    # The probe first: if the check's step fails, it says which part of the
    # confinement ncu needs, and it is the cheaper half.
    report["probe"] = probe(out)
    for k, v in report["probe"].items():
        if isinstance(v, dict):
            print("probe", k, v.get("rc"), v.get("problem") or "", len(v.get("kernels") or []))
    save()
    for name, file in SUBMISSIONS:
        runs: dict = {}
        report[name] = runs
        for label, explain, with_ncu in (
            ("plain", False, True),
            ("explain_without_ncu", True, False),
            ("explain_with_ncu", True, True),
        ):
            result, took = check(file, ws, explain, with_ncu)
            runs[label] = brief(result, took)
            csv = ((result.get("explain") or {}).get("nsight") or {}).get("csv")
            if csv:
                (out / f"ncu_{name}.csv").write_text(csv)
            print(name, label, runs[label]["status"], runs[label]["seconds"], "s", flush=True)
            print("  ", (runs[label]["basis"] or ["-"])[-1], flush=True)
            save()
        runs["nsight_seconds"] = round(
            runs["explain_with_ncu"]["seconds"] - runs["explain_without_ncu"]["seconds"], 1
        )
        save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
