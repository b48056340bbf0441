"""Nsight Compute's counters for the course's kernels, recorded on an H200
and shipped as data (lesson 07's step `read_counters`).

The recordings are the raw CSVs under benchmarks/ (BENCHMARKS.md,
"Counters"): `ncu --set full --clock-control none --csv --page details`
(one block per case, after a line `### CASE`), and one `--page raw` file
of --explain's Nsight step. This module reads them into rows of (section,
metric, unit, value) as Nsight Compute prints them, finds a counter by the
name a learner cites, and lays a kernel's counters out for the terminal.
Pure functions over text: no torch, no process (the CLI shows them, the
judge grades against them).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

RECORDED_ON = "an H200 (141 GB, CUDA 13.0, Nsight Compute --set full --clock-control none)"


@dataclass(frozen=True)
class Recording:
    """One kernel's counters: where they are and what the kernel is."""

    file: str  # under the content root
    case: str  # the `### CASE` block of a details CSV; "" for a raw CSV's one kernel
    what: str
    when: str


RECORDINGS: dict[str, Recording] = {
    "rope_fwd": Recording(
        "benchmarks/h200-2026-11-30/ncu-1.csv",
        "rope_1x",
        "lesson 05's fused RMSNorm + RoPE forward (the reference), x of 1×16384×32×128 "
        "bf16: reads 134.2 MB of x and 8.4 MB of cos/sin, writes 134.2 MB",
        "2026-11-30",
    ),
    "matmul_8k": Recording(
        "benchmarks/h200-2026-11-30/ncu-1.csv",
        "matmul_8k",
        "lesson 03's matmul (the reference's TMA path, 128×256 tiles), 8192³ bf16: "
        "1.1 TFLOP on 403 MB of operands",
        "2026-11-30",
    ),
    "softmax_32k": Recording(
        "benchmarks/h200-2026-11-30/ncu-1.csv",
        "softmax_32k",
        "lesson 02's kernel, one 32768-wide row a program (the whole row in registers), "
        "x of 2048×32768 fp16: reads 134.2 MB, writes 134.2 MB",
        "2026-11-30",
    ),
    "torch_softmax_32k": Recording(
        "benchmarks/h200-2026-11-30/ncu-1.csv",
        "torch_softmax_32k",
        "torch.softmax on the same 2048×32768 fp16 x: reads 134.2 MB, writes 134.2 MB",
        "2026-11-30",
    ),
    "softmax_three_pass": Recording(
        "benchmarks/h200-2026-12-02-explain/ncu_softmax_three_pass.csv",
        "",
        "a softmax that reads each row three times (max, sum, then the output), "
        "x of 2048×32768 fp16: at least 134.2 MB read and 134.2 MB written. "
        "Recorded with --page raw: ncu's own metric names, no sections",
        "2026-12-02",
    ),
}

# The recordings gpulab.targets.counter_cases can take again on a GPU (the
# three-pass softmax was a test's slow variant, not a course kernel).
LIVE = ("rope_fwd", "matmul_8k", "softmax_32k", "torch_softmax_32k")

# Columns a metric's name takes in `render` (an 80-column terminal keeps
# the value on the same line); longer names put the value on the next.
NAME_WIDTH = 40
# A row: (section, metric, unit, value as printed).
Row = tuple[str, str, str, str]


class CountersError(ValueError):
    """A recording that cannot be read (named with its file)."""


def parse_details(text: str, case: str) -> tuple[str, list[Row]]:
    """(kernel name, rows) of one `### CASE` block of a `--page details` CSV."""
    lines: list[str] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("### "):
            inside = line[4:].strip() == case
        elif inside and line.startswith('"'):
            lines.append(line)
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if not rows or "Metric Name" not in rows[0]:
        raise CountersError(f"no counters for case {case!r}")
    col = {h: i for i, h in enumerate(rows[0])}
    out: list[Row] = []
    kernel = ""
    for r in rows[1:]:
        if len(r) <= col["Metric Value"] or r[col["ID"]] == "ID":
            continue
        kernel = kernel or r[col["Kernel Name"]]
        section, name = r[col["Section Name"]], r[col["Metric Name"]].strip()
        if name:
            out.append((section, name, r[col["Metric Unit"]], r[col["Metric Value"]]))
    return kernel, out


# Columns of a raw page that describe the machine or the profiler, not the kernel.
_NOT_THE_KERNEL = re.compile(r"^(device__attribute_|c2clink__|nvlink__|numa__|profiler__)")


def parse_raw(text: str) -> tuple[str, list[Row]]:
    """(kernel name, rows) of a `--page raw` CSV: one kernel, a column a
    metric, a second line of units."""
    rows = [r for r in csv.reader(io.StringIO(text)) if len(r) > 10]
    if len(rows) < 3:
        raise CountersError("no kernel in a raw page")
    head, units, values = rows[0], rows[1], rows[2]
    col = {h: i for i, h in enumerate(head)}
    out = [
        ("raw", name, units[i], values[i])
        for i, name in enumerate(head)
        if i > col.get("CC", 10) and values[i] and not _NOT_THE_KERNEL.match(name)
    ]
    return values[col["Kernel Name"]], out


def content_file(rel: str, root: Path | None = None) -> Path:
    if root is None:
        from gpulab.course.content import content_root

        root = content_root()
    return root / rel


def counters(name: str, root: Path | None = None) -> tuple[str, list[Row]]:
    """The kernel's name and its rows; CountersError naming the file where
    the recording is missing or unreadable."""
    rec = RECORDINGS[name]
    path = content_file(rec.file, root)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CountersError(f"{path}: {exc.strerror or exc}") from None
    try:
        return parse_details(text, rec.case) if rec.case else parse_raw(text)
    except (CountersError, KeyError, IndexError) as exc:
        raise CountersError(f"{path}: {exc}") from None


def number(value: object) -> float | None:
    """A counter's value as a number: '1,374,496' -> 1374496.0; '78.89 %'
    -> 78.89; anything else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        return None
    m = re.match(r"^\s*([-+]?[\d,]*\.?\d+(?:[eE][-+]?\d+)?)", value)
    if not m:
        return None
    try:
        return float(m.group(1).replace(",", ""))
    except ValueError:
        return None


def _key(name: str) -> str:
    return " ".join(name.lower().replace("_", " ").split())


def find(rows: list[Row], cited: str) -> list[Row]:
    """The rows a cited name means: 'Metric', 'Section: Metric' or
    'Section/Metric' as the details page prints them, or a raw metric name;
    case and spacing aside. A metric printed in two sections (Memory
    Throughput, % and byte/s) gives both."""
    want = _key(cited)
    hits = [r for r in rows if _key(r[1]) == want]
    if hits:
        return hits
    for sep in (":", "/", " - "):
        section, _, metric = cited.partition(sep)
        if metric:
            hits = [r for r in rows if _key(r[0]) == _key(section) and _key(r[1]) == _key(metric)]
            if hits:
                return hits
    return []


def matches(row: Row, value: object, rtol: float = 0.01) -> bool:
    """Whether a cited value is the row's, to its printed precision or 1%."""
    got, want = number(value), number(row[3])
    if got is None or want is None:
        return False
    return abs(got - want) <= max(rtol * abs(want), 0.011)


def render(name: str, root: Path | None = None) -> str:
    """One kernel's recorded counters, a block a section, for the terminal."""
    rec = RECORDINGS[name]
    kernel, rows = counters(name, root)
    head = [
        f"{name}: {rec.what}",
        f"kernel {kernel}, recorded {rec.when} on {RECORDED_ON}",
        f"from {rec.file}" + (f" (case {rec.case})" if rec.case else ""),
    ]
    return render_rows(head, rows)


def render_rows(head: list[str], rows: list[Row]) -> str:
    out = list(head)
    section = None
    for sec, metric, unit, value in rows:
        if sec != section:
            section = sec
            out.append(f"\n  {sec}")
        shown = f"{value} {unit}".rstrip()
        if len(metric) > NAME_WIDTH:  # ncu's long metric names: the value below
            out += [f"    {metric}", f"    {'':<{NAME_WIDTH}}  {shown}"]
        else:
            out.append(f"    {metric:<{NAME_WIDTH}}  {shown}")
    return "\n".join(out)


def listing(width: int = 80) -> str:
    import textwrap

    lines = textwrap.wrap(
        f"Counters recorded on {RECORDED_ON}. `gpulab counters NAME` shows one:", width
    )
    for name, rec in RECORDINGS.items():
        lines += textwrap.wrap(
            rec.what, width, initial_indent=f"  {name}: ", subsequent_indent=" " * 6
        )
    return "\n".join(lines)


def ncu_argv(name: str, python: str) -> list[str]:
    """Nsight Compute on one call of `name` on this GPU, its details page as
    CSV on stdout: the recordings' options (BENCHMARKS.md, "Counters")."""
    return [
        "ncu",
        "--profile-from-start",
        "off",
        "--clock-control",
        "none",
        "--set",
        "full",
        "--metrics",
        "dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,gpu__time_duration.sum",
        "--csv",
        "--page",
        "details",
        python,
        "-m",
        "gpulab.targets.counter_cases",
        name,
    ]
