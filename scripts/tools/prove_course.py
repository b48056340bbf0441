"""`gpulab dev check`'s proof (every starter fails its grader, every
reference passes), run several lessons at a time: on a GPU machine of many
cores the sequential proof takes most of a device call.

    python scripts/tools/prove_course.py OUT.json [EXERCISE...] [--jobs N] [--device D]

Correctness only (no timing), so checks that share the GPU do not spoil a
measurement. Writes per exercise its problems (none when sound) and seconds.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpulab.cli.commands.dev import check_lesson
from gpulab.course.content import load_course


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("exercises", nargs="*")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    course = load_course()
    lessons = [e for e in course.exercises if not args.exercises or e.exercise in args.exercises]

    def one(lesson) -> dict:
        t0 = time.monotonic()
        try:
            problems = check_lesson(lesson, device=args.device)
        except Exception as e:  # one broken lesson must not hide the rest
            problems = [f"crashed: {type(e).__name__}: {e}"]
        row = {
            "exercise": lesson.exercise,
            "problems": problems,
            "seconds": round(time.monotonic() - t0, 1),
        }
        print(json.dumps(row), flush=True)
        return row

    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(one, lessons))
    bad = [r for r in rows if r["problems"] and not r["problems"][0].startswith("skipped")]
    Path(args.out).write_text(
        json.dumps({"date": time.strftime("%Y-%m-%d %H:%M"), "rows": rows}, indent=1)
    )
    print(f"{len(rows) - len(bad)} of {len(rows)} sound")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
