"""Boil the CSV that scripts/tools/gpu_session.sh's `ncu:` step writes down to the
figures BENCHMARKS.md quotes, one block per kernel.

    python3 scripts/tools/ncu_summary.py ncu.csv [summary.json]

The input is several `ncu --csv --page details` outputs, each after a line
`### CASE`. Values are kept as ncu prints them (its units in the key).
"""

from __future__ import annotations

import csv
import io
import json
import sys

# (metric name as ncu prints it, in whichever section, short name)
WANTED = [
    ("gpu__time_duration.sum", "time"),
    ("Duration", "duration"),
    ("dram__bytes_read.sum", "dram_read"),
    ("dram__bytes_write.sum", "dram_write"),
    ("lts__t_bytes.sum", "l2_bytes"),
    ("DRAM Throughput", "dram_pct"),
    ("Memory Throughput", "mem_pct"),
    ("Compute (SM) Throughput", "sm_pct"),
    ("SM Frequency", "sm_clock"),
    ("DRAM Frequency", "dram_clock"),
    ("Registers Per Thread", "regs"),
    ("Achieved Occupancy", "occupancy"),
    ("Theoretical Occupancy", "occupancy_max"),
    ("Issue Slots Busy", "issue_busy"),
    ("Warp Cycles Per Issued Instruction", "cycles_per_issue"),
    ("Executed Instructions", "instructions"),
    ("L2 Hit Rate", "l2_hit"),
    ("Block Size", "block"),
    ("Grid Size", "grid"),
    ("Dynamic Shared Memory Per Block", "smem_dyn"),
]
STALL = "smsp__average_warps_issue_stalled_"


def parse(text: str) -> dict:
    cases: dict[str, list[dict]] = {}
    case, lines = None, []

    def flush():
        if case is None:
            return
        rows = [r for r in csv.reader(io.StringIO("\n".join(lines))) if len(r) > 10]
        if not rows:
            cases[case] = []
            return
        head, body = rows[0], rows[1:]
        col = {h: i for i, h in enumerate(head)}
        kernels: dict[str, dict] = {}
        for r in body:
            kid = r[col["ID"]]
            k = kernels.setdefault(kid, {"kernel": r[col["Kernel Name"]][:90], "stalls": {}})
            name, unit, value = r[col["Metric Name"]], r[col["Metric Unit"]], r[col["Metric Value"]]
            for metric, short in WANTED:
                if name == metric and short not in k:
                    k[short] = f"{value} {unit}".strip()
            if name.startswith(STALL) and name.endswith("_per_issue_active.ratio"):
                try:
                    k["stalls"][name[len(STALL) : -len("_per_issue_active.ratio")]] = float(value)
                except ValueError:
                    pass
        for k in kernels.values():
            top = sorted(k["stalls"].items(), key=lambda kv: -kv[1])[:6]
            k["stalls"] = {n: round(v, 2) for n, v in top}
        cases[case] = list(kernels.values())

    for line in text.splitlines():
        if line.startswith("### "):
            flush()
            case, lines = line[4:].strip(), []
        elif line.startswith('"'):
            lines.append(line)
    flush()
    return cases


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    cases = parse(open(sys.argv[1]).read())
    for case, kernels in cases.items():
        print(f"== {case}: {len(kernels)} kernel(s) profiled")
        for k in kernels:
            print("  ", json.dumps(k))
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            json.dump(cases, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
