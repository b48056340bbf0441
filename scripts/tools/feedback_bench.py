"""How long a learner waits for a check (issue 32): cold, and with the lab's
spare judge, after an edit and for an unchanged file.

    python scripts/tools/feedback_bench.py OUT.json [EXERCISE...] [--device cpu|cuda]
        [--think SECONDS] [--repeat N] [--learner] [--early auto|on|off|held-after]

For each exercise (default: softmax, matmul, flash_attention), in a fresh
workspace holding the reference solution as the learner's file:

  cold          the first check, nothing prepared yet (what `gpulab check`
                costs), through the lab's spares (`runner.Spares`);
  edit          then the learner "thinks" for --think seconds, saves an
                edit (the file renamed over, the per-file compiler cache
                removed, as a changed kernel would miss it), and checks
                again through the spare the lab started meanwhile (on 8
                CPUs or more it started as the cold check began);
  unchanged     the same file checked again after thinking (cache kept);
  edit, no timing   a spare for a `--no-timing` check started as the learner
                starts to think, an edit, the check (the verdict alone).

(Before 2026-12-04 evening, `edit` used a spare started as the thinking
began, not the lab's loop: BENCHMARKS.md's earlier rows.)

With --learner, an exercise that has a file in scripts/tools/learner/ is
checked with that file (a learner's kernel as the lesson teaches it) instead
of the reference; its rows say `"file": "learner"`.

--early picks when the next check's spare starts (`runner.Spares(early=)`):
`auto` as the lab does (as a check begins, on 8 CPUs or more), `on`, `off`
(as a check ends, importing in the order of a spare that is not held), or
`held-after`: as a check ends, but held and let go at once, so its imports
are a held spare's (Dynamo and Triton before CUDA starts) without running
beside a check. The last three tell apart what slowed the correctness stage
of checks through early spares on the H200 (BENCHMARKS.md, "held spare").

Each row: wall seconds from the check's start to its result (and to the
`correct` and `graded` frames, when the lab shows those), the result's
`stages`, the status and grade. Headless (no textual); runs where the GPU
machine's Python is, from a checkout: PYTHONPATH=$PWD.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from gpulab.course.content import load_course
from gpulab.judge.policy import cache_dir
from gpulab.lab import runner
from gpulab.sandbox.ahead import RECORD
from gpulab.wire.events import Correct, Graded


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("exercises", nargs="*", default=["softmax", "matmul", "flash_attention"])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--think", type=float, default=15.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--learner", action="store_true")
    ap.add_argument("--early", choices=["auto", "on", "off", "held-after"], default="auto")
    args = ap.parse_args()
    args.import_s = fresh_import_s()
    print(f"fresh import torch, triton: {args.import_s} s", flush=True)
    course = load_course()
    rows = []
    for name in args.exercises:
        lesson = course.find(name)
        if lesson is None:
            print(f"no exercise {name}", file=sys.stderr)
            return 2
        for rep in range(args.repeat):
            rows += bench_one(lesson, args, rep)
            Path(args.out).write_text(json.dumps(meta(args, rows), indent=1))
    print_table(rows)
    return 0


def meta(args, rows) -> dict:
    import platform

    info = {"date": time.strftime("%Y-%m-%d %H:%M"), "host": platform.node(), "rows": rows}
    info.update(stack())
    info["think_s"] = args.think
    info["fresh_import_s"] = args.import_s
    return info


def stack() -> dict:
    """torch's and Triton's versions, and the GPU's name where there is one."""
    try:
        import torch
        import triton
    except ImportError:
        return {}
    info = {"torch": torch.__version__, "triton": triton.__version__}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info


def fresh_import_s() -> list[float]:
    """Wall seconds of `import torch, triton` in a fresh Python, twice: the
    issue's yardstick for the CPU goal (a check after an edit, through the
    spare, faster than this)."""
    import subprocess

    out = []
    for _ in range(2):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", "import torch, triton"], check=True)
        out.append(round(time.monotonic() - t0, 2))
    return out


def bench_one(lesson, args, rep: int) -> list[dict]:
    ws = Path(tempfile.mkdtemp(prefix="gpulab-feedback-"))
    path = ws / "exercises" / f"{lesson.exercise}.py"
    path.parent.mkdir(parents=True)
    own = Path(__file__).parent / "learner" / f"{lesson.exercise}.py"
    which = "learner" if args.learner and own.is_file() else "reference"
    text = (own if which == "learner" else lesson.reference_path).read_text()
    path.write_text(text)
    out = []
    # The check's arguments, spelt once: the spare made for a request must be
    # the one the next run_check asks for.
    opts = {"timeout": args.timeout, "device": args.device, "workspace": str(ws)}

    def request(timing: bool):
        return runner.check_request(lesson, path, timing=timing, **opts)

    def check(kind: str, timing: bool, spares: runner.Spares | None) -> None:
        t0 = time.monotonic()
        seen: dict[str, float] = {}

        def on_event(ev: object) -> None:
            # When the lab shows the verdict on correctness, and the grade.
            kind = {Correct: "correct", Graded: "graded"}.get(type(ev))
            if kind is not None:
                seen.setdefault(f"{kind}_s", round(time.monotonic() - t0, 2))

        r = runner.run_check(
            lesson, path, timing=timing, spares=spares, on_event=on_event, **opts
        ).to_json()
        wall = time.monotonic() - t0
        row = {
            "exercise": lesson.exercise,
            "file": which,
            "rep": rep,
            "kind": kind,
            "wall_s": round(wall, 2),
            "status": r.get("status"),
            "warm": r.get("warm"),
            "grade": (r.get("timing") or {}).get("grade"),
            "summary": str(r.get("summary", ""))[:200],
            **seen,
            "stages": r.get("stages"),
            "slowest": r.get("slowest"),
            "compiled_ahead": r.get("compiled_ahead"),
            # Per timed case: the kernel's and the baseline's median ms (a
            # shorter warm-up must not move them).
            "timed": [
                [c.get("name"), c.get("ms"), c.get("baseline_ms")]
                for c in (r.get("timing") or {}).get("cases", [])
            ],
        }
        row["early"] = args.early
        out.append(row)
        print(json.dumps(row), flush=True)
        if args.early == "held-after" and spares is not None:
            respare(spares, request(timing))

    def edit(n: int) -> None:
        # A save as editors make it, and a compiler cache the new kernel misses.
        # (Its contents: the folder itself is the spare's, bound into its sandbox.)
        request = runner.check_request(lesson, path, workspace=str(ws))
        cache = cache_dir(request, ws)
        for entry in cache.iterdir() if cache.is_dir() else ():
            if entry.name == RECORD:  # an edit leaves the last check's record
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        new = path.with_suffix(".saving")
        new.write_text(text + f"\n# edit {n}\n")
        os.replace(new, path)

    # The lab's loop: a first check (nothing prepared yet), then the learner
    # thinks, edits and checks again, through the spares the lab keeps (on 8
    # CPUs or more the next check's spare starts as a check begins).
    spares = new_spares(args)
    try:
        check("cold", True, spares)
        time.sleep(args.think)
        edit(len(out))
        check("edit", True, spares)
        time.sleep(args.think)
        check("unchanged", True, spares)
    finally:
        spares.close()
    # Correctness only: another request, so its own spare, started as the
    # learner starts to think.
    spares = new_spares(args)
    try:
        spares.prepare(request(False))
        time.sleep(args.think)
        edit(len(out))
        check("edit, no timing", False, spares)
    finally:
        spares.close()
    shutil.rmtree(ws, ignore_errors=True)
    return out


def new_spares(args) -> runner.Spares:
    early = {"auto": None, "on": True}.get(args.early, False)
    return runner.Spares(early=early)


def respare(spares: runner.Spares, request) -> None:
    """--early held-after: the spare the check started as it ended, replaced
    by one that starts held (a held spare's imports) and is let go at once."""
    with spares._lock:  # a bench's reach inside: the lab never does this
        old, spares._spare = spares._spare, None
    if old is not None:
        old.close()
    spares.prepare(request, hold=True)
    spares.prepare(request)


def print_table(rows: list[dict]) -> None:
    head = f"{'exercise':<16} {'kind':<16} {'wall s':>7} {'correct':>8} {'graded':>7}"
    print(f"{head} {'warm':>5}  grade  status")
    for r in rows:
        marks = f"{r.get('correct_s', '-'):>8} {r.get('graded_s', '-'):>7}"
        print(
            f"{r['exercise']:<16} {r['kind']:<16} {r['wall_s']:>7.2f} {marks}"
            f" {str(r['warm']):>5}  {str(r['grade'] or '-'):<5}  {r['status']}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
