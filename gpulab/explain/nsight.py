"""Nsight Compute for `--explain`, the judge's side: whether it can run here
(and why not), its command line, a parser for its CSV, and what the numbers
mean against the exercise's minimum bytes.

Pure functions over text and plain data: nothing here starts a process
(gpulab.explain.judge.nsight_step does, in a sandbox of its own). The parser
never raises: odd input gives what could be read and a problem line.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpulab.explain.facts import (
    CaseFacts,
    Finding,
    GpuFacts,
    KernelFacts,
    NcuKernel,
    NsightSummary,
)
from gpulab.wire.sandbox_start import ProfilerPolicy

if TYPE_CHECKING:
    from gpulab.explain.kinds import Sections

# ncu's frontend and the profiled process talk over TCP on localhost, on the
# first free port from --port (49152 by default) among --max-connections (64
# by default). Both are passed explicitly so the profiled sandbox's Landlock
# rule opens exactly these ports.
PORT_BASE, PORT_COUNT = 49152, 64
DRAM_READ, DRAM_WRITE = "dram__bytes_read.sum", "dram__bytes_write.sum"
DURATION = "gpu__time_duration.sum"
_STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
# The WarpStateStats section's reasons (warps stalled per issued instruction,
# by cause). "selected" (the warp that issues) is not a stall; "gmma" (waiting
# for wgmma) exists on sm_90 only, and ncu rejects a metric the GPU lacks.
STALL_REASONS = {
    "long_scoreboard": "waiting for global memory (long scoreboard)",
    "short_scoreboard": "waiting for shared memory or special functions (short scoreboard)",
    "barrier": "waiting at a barrier for the other warps of the program",
    "wait": "fixed-latency dependencies (wait)",
    "math_pipe_throttle": "math pipes busy",
    "mio_throttle": "shared-memory queue full (MIO throttle)",
    "lg_throttle": "global-memory queue full (LG throttle)",
    "not_selected": "ready, but another warp issued (not selected)",
    "no_instruction": "no instruction fetched yet",
    "branch_resolving": "branch resolving",
    "dispatch_stall": "dispatch stall",
    "drain": "draining stores at exit",
    "imc_miss": "constant cache miss",
    "membar": "memory barrier",
    "misc": "miscellaneous",
    "sleeping": "sleeping",
    "tex_throttle": "texture queue full",
}
GMMA = {"gmma": "waiting for wgmma (tensor cores)"}
NOT_MEASURED = "the estimate rests on the compiled code, the launch and the timing"
# Measured DRAM bytes this far above the minimum are worth a finding (ncu
# writes the L2 back before each pass, so a one-pass kernel reads ~1.0× and
# writes a little less: BENCHMARKS.md "Counters" measured 0.91× on the H200).
EXTRA_RATIO = 1.25

_TIME = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3}
_TIME.update({"s": 1.0, "second": 1.0})
_BYTES = {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12}
_BYTES.update({"kib": 1024, "mib": 2**20, "gib": 2**30, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9})


def availability(
    which: Any = shutil.which,
    params: str = "/proc/driver/nvidia/params",
    euid: int | None = None,
) -> tuple[str | None, str]:
    """(path of ncu or None, why not). `which`, `params`, `euid`: the PATH
    lookup, the driver's parameters file and the user, for tests."""
    ncu = which("ncu")
    if not ncu:
        return None, f"Nsight Compute (ncu) is not on PATH: {NOT_MEASURED}"
    try:
        with open(params) as f:
            admin_only = "RmProfilingAdminOnly: 1" in f.read()
    except OSError:
        admin_only = False
    if admin_only and (os.geteuid() if euid is None else euid) != 0:
        return None, (
            "Nsight Compute is installed, but the driver keeps GPU counters for "
            f"administrators (RmProfilingAdminOnly=1): {NOT_MEASURED}"
        )
    return str(ncu), ""


def install_root(ncu: str) -> str:
    """The folder ncu's files live under (`<root>/bin/ncu` or `<root>/ncu`,
    a link or a wrapper script into `<root>/nsight-compute-*/`)."""
    real = Path(os.path.realpath(ncu)).parent
    return str(real.parent if real.name == "bin" else real)


def stall_metrics(arch: str = "") -> list[str]:
    reasons = {**STALL_REASONS, **(GMMA if arch == "sm_90" else {})}
    return [_STALL.format(r) for r in reasons]


def command(ncu: str, log_file: str | Path, arch: str = "") -> list[str]:
    """ncu's argv, before the profiled program's. Few metrics (few replay
    passes); only what runs between cudaProfilerStart and Stop; the CSV to a
    file of the judge's, never into the learner's output."""
    metrics = [DRAM_READ, DRAM_WRITE, DURATION, *stall_metrics(arch)]
    return [
        ncu,
        "--profile-from-start",
        "off",
        "--target-processes",
        "all",  # the sandbox runs below its keeper (gpulab.sandbox.namespaces)
        "--clock-control",
        "none",  # the clocks the check timed at, as BENCHMARKS.md's counters
        "--port",
        str(PORT_BASE),
        "--max-connections",
        str(PORT_COUNT),
        "--metrics",
        ",".join(metrics),
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--log-file",
        str(log_file),
    ]


def profiler_policy(ncu: str) -> ProfilerPolicy:
    """What the profiled sandbox's policy opens for ncu (judge-built): its
    install folder, read-only. No TCP: the injected library connects to the
    frontend as the process starts, before the sandbox confines itself, and
    the connection it holds outlives Landlock's rules (on the H200,
    2026-12-02, ncu 2025.3.1: a program confined with no TCP at all was
    profiled as fully as an unconfined one, `benchmarks/h200-2026-12-02-explain/
    nsight_probe_*.log`). Opening ncu's ports would have let a submission
    reach whatever listens there, another user's ncu included."""
    return ProfilerPolicy("ncu", [install_root(ncu)])


# --- the CSV -----------------------------------------------------------------------


def _number(text: str, unit: str = "") -> float | None:
    t = (text or "").strip().replace(",", "")
    if not t or t.lower() in ("n/a", "nan", "-"):
        return None
    try:
        value = float(t)
    except ValueError:
        return None
    u = (unit or "").strip().lower()
    return value * _TIME.get(u, _BYTES.get(u, 1.0))


def _rows(text: str) -> list[list[str]]:
    lines = [ln for ln in (text or "").splitlines() if ln.strip() and not ln.startswith("==")]
    try:
        return list(csv.reader(io.StringIO("\n".join(lines))))
    except csv.Error:
        return []


def parse(text: str) -> tuple[list[NcuKernel], str]:
    """ncu's `--csv --page raw` text -> ([{id, name, metrics: {name: value
    in bytes/seconds/ratio}}], problem). The raw page: a header row of
    column names, a row of units (empty under the launch columns), one row
    per profiled kernel; ncu's own ==PROF==/==ERROR== lines around them.
    The details page (a row per metric) is read too."""
    errors = [ln.strip() for ln in (text or "").splitlines() if ln.startswith("==ERROR==")]
    rows = _rows(text)
    head_at = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if head_at is None:
        why = "; ".join(errors)[:300] or "no table in ncu's output (no kernel profiled?)"
        return [], why
    head, body = rows[head_at], rows[head_at + 1 :]
    col = {h: i for i, h in enumerate(head)}
    if "Metric Name" in col and "Metric Value" in col:
        return _details(col, body, errors)
    units: list[str] = []
    kn = col["Kernel Name"]
    if body and len(body[0]) > kn and not body[0][kn].strip():  # the units row
        units, body = body[0], body[1:]
    kernels: list[NcuKernel] = []
    bad = 0
    for r in body:
        if len(r) != len(head):
            bad += 1
            continue
        metrics: dict[str, float] = {}
        for name, i in col.items():
            if "__" in name:  # a metric (dram__..., smsp__...); launch columns are words
                v = _number(r[i], units[i] if i < len(units) else "")
                if v is not None:
                    metrics[name] = v
        kernels.append(
            {"id": r[col.get("ID", 0)], "name": r[col["Kernel Name"]], "metrics": metrics}
        )
    problem = "; ".join(errors)[:300]
    if bad:
        problem = (problem + "; " if problem else "") + f"{bad} row(s) of the wrong width skipped"
    if not kernels and not problem:
        problem = "ncu profiled no kernel between cudaProfilerStart and Stop"
    return kernels, problem


def _details(
    col: dict[str, int], body: list[list[str]], errors: list[str]
) -> tuple[list[NcuKernel], str]:
    by_id: dict[str, NcuKernel] = {}
    need = max(col["Metric Name"], col["Metric Value"], col["Kernel Name"])
    for r in body:
        if len(r) <= need:
            continue
        k = by_id.setdefault(
            r[col.get("ID", 0)],
            {"id": r[col.get("ID", 0)], "name": r[col["Kernel Name"]], "metrics": {}},
        )
        unit = r[col["Metric Unit"]] if "Metric Unit" in col and len(r) > col["Metric Unit"] else ""
        v = _number(r[col["Metric Value"]], unit)
        if v is not None:
            k["metrics"][r[col["Metric Name"]]] = v
    return list(by_id.values()), "; ".join(errors)[:300]


# --- what the numbers say -------------------------------------------------------------


def kernel_facts(kernel: NcuKernel) -> KernelFacts:
    """One kernel: DRAM bytes read + written, duration, the top 3 stall
    reasons with their share of all stalled warps (per issued instruction)."""
    m = kernel.get("metrics") or {}
    stalls = {}
    for name, value in m.items():
        if name.startswith("smsp__average_warps_issue_stalled_") and value > 0:
            reason = name[len("smsp__average_warps_issue_stalled_") :].split("_per_issue")[0]
            if reason != "selected":
                stalls[reason] = value
    total = sum(stalls.values())
    top = sorted(stalls.items(), key=lambda kv: -kv[1])[:3]
    read, write = m.get(DRAM_READ), m.get(DRAM_WRITE)
    return {
        "name": kernel.get("name", "?"),
        "dram_bytes": (read or 0) + (write or 0) if read is not None or write is not None else None,
        "dram_read": read,
        "dram_write": write,
        "seconds": m.get(DURATION),
        "stalls": [
            {
                "reason": r,
                "share": round(v / total, 3),
                "per_issue": round(v, 2),
                "meaning": {**STALL_REASONS, **GMMA}.get(r, r.replace("_", " ")),
            }
            for r, v in top
        ],
    }


def summary(kernels: list[NcuKernel]) -> NsightSummary:
    facts = [kernel_facts(k) for k in kernels]
    moved = [f["dram_bytes"] for f in facts if f["dram_bytes"] is not None]
    secs = [f["seconds"] for f in facts if f["seconds"] is not None]
    return {
        "kernels": facts,
        "dram_bytes": sum(moved) if moved else None,
        "gpu_seconds": sum(secs) if secs else None,
    }


def measured_extra_bytes(
    facts: NsightSummary,
    case: CaseFacts,
    gpu: GpuFacts | None,
    sections: Sections,
    kind: str,
) -> tuple[Finding | None, float | None]:
    """(an `extra_bytes` finding or None, measured ÷ minimum). The finding's
    severity is the share of time the extra bytes cost where the kernel is
    memory-bound; a compute-bound kernel hides them behind its FLOPs."""
    from gpulab.explain.findings import _finding, _fmt_us

    moved, minimum = facts.get("dram_bytes"), case.get("bytes")
    if not moved or not minimum:
        return None, None
    ratio = moved / minimum
    # No GPU facts (the explanation failed before it read them): nothing to weigh.
    bw = (gpu.get("bandwidth") if gpu else None) or 0
    peak = ((gpu.get("flops") if gpu else None) or {}).get(case.get("dtype", ""))
    if ratio < EXTRA_RATIO or not bw:
        return None, ratio
    ideal = max(minimum / bw, (case.get("flops") or 0) / peak if peak else 0.0)
    t_moved = moved / bw
    severity = max(0.0, 1 - ideal / t_moved) if t_moved else 0.0
    if severity < 0.05:
        return None, ratio
    n = len(facts.get("kernels") or [])
    evidence = (
        f"Nsight Compute measured {moved / 2**20:.1f} MiB moved to and from DRAM in "
        f"{n} kernel{'s' if n != 1 else ''} ({case.get('name', '?')}): {ratio:.1f}× the "
        f"{minimum / 2**20:.1f} MiB the exercise needs, about {_fmt_us(t_moved - minimum / bw)} "
        f"more at {bw / 1e12:.2f} TB/s"
    )
    if kind == "compute":
        advice = (
            "Reuse each tile while it is on chip: group the programs so neighbours share "
            "panels in L2, and use bigger tiles so each element loaded feeds more FLOPs"
        )
    else:
        advice = (
            "Read each element from DRAM once: one pass that keeps the row in registers "
            "(or an online form), contiguous loads along the row, no intermediate "
            "written and read back"
        )
    return _finding("extra_bytes", sections, min(0.9, severity), evidence, advice), ratio


def merge(found: list[Finding], finding: Finding | None, ratio: float | None) -> list[Finding]:
    """A measurement takes precedence over the estimate: with a measured
    ratio, the estimated `extra_bytes` goes, and the measured one (if any)
    comes in at its severity."""
    if ratio is None:
        return found
    kept = [d for d in found if d.get("kind") != "extra_bytes"]
    if finding is not None:
        kept.append(finding)
    return sorted(kept, key=lambda d: -d.get("severity", 0))


__all__ = [
    "availability",
    "command",
    "install_root",
    "kernel_facts",
    "measured_extra_bytes",
    "merge",
    "parse",
    "profiler_policy",
    "summary",
]
