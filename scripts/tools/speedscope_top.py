"""Where a check's time goes, from a py-spy speedscope profile of all its
processes (`py-spy record --subprocesses --format speedscope -o P.json --
python -m gpulab check ...`).

    python scripts/tools/speedscope_top.py P.json [--top N] [--match TEXT]

Per thread with samples: its seconds, then the functions with the most
inclusive time (a function counted once per sample however deep it recurs),
gpulab's own frames and those matching --match first.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--match", default="gpulab")
    ap.add_argument("--min-s", type=float, default=0.5)
    args = ap.parse_args()
    d = json.load(open(args.profile))
    frames = d["shared"]["frames"]
    for prof in d["profiles"]:
        weights = prof.get("weights") or []
        total = sum(weights)
        unit = {"seconds": 1.0, "milliseconds": 1e-3, "microseconds": 1e-6}.get(
            prof.get("unit", "seconds"), 1.0
        )
        if total * unit < args.min_s:
            continue
        incl: Counter[int] = Counter()
        for stack, w in zip(prof["samples"], weights, strict=True):
            for f in set(stack):
                incl[f] += w
        print(f"\n## {prof['name']}: {total * unit:.1f} s sampled")
        shown = 0
        for f, w in incl.most_common():
            fr = frames[f]
            where = f"{fr.get('file', '')}:{fr.get('line', '')}"
            if args.match and args.match not in where and args.match not in fr["name"]:
                continue
            print(f"  {w * unit:7.2f} s  {fr['name'][:50]:<50} {where[-70:]}")
            shown += 1
            if shown >= args.top:
                break
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
