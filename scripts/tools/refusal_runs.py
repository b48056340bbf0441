"""Does the judge ever refuse an honest kernel (issue 32)? Checks the
reference solutions again and again, each after the GPU sat idle, and counts
refusals and the spread of grades.

    python scripts/tools/refusal_runs.py OUT.json [EXERCISE...] [--deadline S]
        [--idle S] [--clock-below MHZ --idle-max S] [--learner] [--device cuda]

Round-robin over the exercises (default: softmax, matmul, flash_attention,
rope_rmsnorm, bandwidth) until --deadline seconds have passed. Each run is
the lab's way: a spare judge started for the request while the GPU sits idle
for --idle seconds (the learner thinking), then a full timed check. The file
is unchanged, so the compiler cache is warm and the timed batches come soon
after the idle: the harshest case for a GPU whose clocks have dropped (the
refusal the issue saw came on the first check after the GPU idled at
345 MHz). Each row records the SM clock when the check began (NVML), the
status, grade, roofline fraction and speedup, and the wall time.

With --clock-below, each idle goes on (up to --idle-max seconds) until NVML
reads the SM clock at or below MHZ: after 8 s of idle the H200 still ran at
1980 MHz, so only a longer idle starts a check from idle clocks. With
--learner, an exercise that has a learner's file in scripts/tools/learner/
is checked with it too, in turn with the reference (rows say which `file`).

Headless: runs from a checkout with PYTHONPATH=$PWD, and writes OUT.json
after every run, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from feedback_bench import stack  # beside this file (sys.path[0] when run as a script)

from gpulab.course.content import load_course
from gpulab.lab import runner

DEFAULT = ["softmax", "matmul", "flash_attention", "rope_rmsnorm", "bandwidth"]


def sm_clock_mhz() -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        return int(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
    except Exception:  # no NVML here (a CPU box): the row says so with None
        return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("exercises", nargs="*", default=DEFAULT)
    ap.add_argument("--deadline", type=float, default=540.0)
    ap.add_argument("--idle", type=float, default=8.0)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--timeout", type=float, default=200.0)
    ap.add_argument("--clock-below", type=int, default=0)
    ap.add_argument("--idle-max", type=float, default=60.0)
    ap.add_argument("--learner", action="store_true")
    args = ap.parse_args()
    course = load_course()
    start = time.monotonic()
    slots: list[dict[str, Any]] = []
    for name in args.exercises:
        lesson = course.find(name)
        if lesson is None:
            raise SystemExit(f"no exercise {name}")
        own = Path(__file__).parent / "learner" / f"{lesson.exercise}.py"
        files = [("reference", lesson.reference_path)]
        if args.learner and own.is_file():
            files.append(("learner", own))
        for which, source in files:
            ws = Path(tempfile.mkdtemp(prefix=f"gpulab-refusal-{name}-"))
            path = ws / "exercises" / f"{lesson.exercise}.py"
            path.parent.mkdir(parents=True)
            path.write_text(source.read_text())
            request = runner.check_request(
                lesson, path, timeout=args.timeout, device=args.device, workspace=str(ws)
            )
            slots.append(
                {
                    "lesson": lesson,
                    "file": which,
                    "path": path,
                    "ws": ws,
                    "request": request,
                    "spares": None,
                }
            )
    rows: list[dict[str, Any]] = []
    try:
        i = 0
        while time.monotonic() - start < args.deadline:
            slot = slots[i % len(slots)]
            i += 1
            if slot["spares"] is None:
                slot["spares"] = runner.Spares()
            slot["spares"].prepare(slot["request"])
            idle0 = time.monotonic()
            time.sleep(args.idle)
            clock = sm_clock_mhz()
            while (
                args.clock_below
                and clock is not None
                and clock > args.clock_below
                and time.monotonic() - idle0 < args.idle_max
            ):
                time.sleep(1.0)
                clock = sm_clock_mhz()
            idled = time.monotonic() - idle0
            t0 = time.monotonic()
            r = runner.run_check(
                slot["lesson"],
                slot["path"],
                timeout=args.timeout,
                device=args.device,
                workspace=str(slot["ws"]),
                spares=slot["spares"],
            ).to_json()
            timing = r.get("timing") or {}
            row = {
                "exercise": slot["lesson"].exercise,
                "file": slot["file"],
                "run": i,
                "idle_s": round(idled, 1),
                "sm_mhz_at_start": clock,
                "wall_s": round(time.monotonic() - t0, 2),
                "warm": r.get("warm"),
                "status": r.get("status"),
                "grade": timing.get("grade"),
                "roofline_fraction": timing.get("roofline_fraction"),
                "speedup": timing.get("speedup"),
                "summary": str(r.get("summary", ""))[:300],
                "notes": [str(n)[:300] for n in r.get("notes") or []],
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
            Path(args.out).write_text(json.dumps(report(args, rows), indent=1))
    finally:
        for slot in slots:
            if slot["spares"] is not None:
                slot["spares"].close()
            shutil.rmtree(slot["ws"], ignore_errors=True)
    rep = report(args, rows)
    Path(args.out).write_text(json.dumps(rep, indent=1))
    for name, s in rep["per_exercise"].items():
        print(name, json.dumps(s))
    return 0


def report(args: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
    per: dict[str, Any] = {}
    for name, which in dict.fromkeys((r["exercise"], r["file"]) for r in rows):
        mine = [r for r in rows if r["exercise"] == name and r["file"] == which]
        fr = [r["roofline_fraction"] for r in mine if r["roofline_fraction"]]
        per[f"{name} ({which})"] = {
            "runs": len(mine),
            "passed": sum(r["status"] == "passed" for r in mine),
            "refused": [r["run"] for r in mine if r["status"] != "passed"],
            "grades": sorted({str(r["grade"]) for r in mine}),
            "roofline_fraction_min_max": [min(fr), max(fr)] if fr else None,
            "roofline_fraction_stdev": statistics.pstdev(fr) if len(fr) > 1 else None,
            "wall_s_median": statistics.median(r["wall_s"] for r in mine) if mine else None,
        }
    info: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "idle_s": args.idle,
        "clock_below_mhz": args.clock_below,
        "idle_max_s": args.idle_max,
        "per_exercise": per,
        "rows": rows,
    }
    info.update(stack())
    return info


if __name__ == "__main__":
    raise SystemExit(main())
