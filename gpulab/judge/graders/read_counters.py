"""Grader for lesson 07's read-the-counters step: name what limits each of
five kernels from Nsight Compute's counters, and cite the counters.

Contract (exercises/read_counters.py): `diagnose(kernel)` returns
{"limit": one of LIMITS, "evidence": {counter name: value, ...}} for each
recorded kernel (gpulab.gpu.counters.RECORDINGS: counters taken on an
H200 and shipped as data, the same on every machine). A kernel passes when
its limit is the answer below and its evidence names counters that show
it (every group of one of the kernel's WAYS), each with the value the
recording holds (to its printed precision or 1%): a counter cited that the
recording lacks, or a value it does not hold, is named.

The answers live here, in a grader module, which the sandbox can neither
import nor read (gpulab.judge.policy.grader_files). No torch, no GPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpulab.gpu import counters
from gpulab.judge.case_row import case_row
from gpulab.judge.context import GradeFailed
from gpulab.judge.plain import fmt, try_call
from gpulab.wire.status import StageKind

if TYPE_CHECKING:
    from gpulab.judge.context import GradeContext

LIMITS = {
    "dram": "DRAM bandwidth",
    "l2": "L2 bandwidth",
    "compute": "compute (the SMs' pipes, or issuing instructions)",
    "latency": "latency (too little in flight: occupancy, stalls)",
}
# The words a learner may use for one of LIMITS.
ALIASES = {
    "memory": "dram",
    "hbm": "dram",
    "bandwidth": "dram",
    "dram_bandwidth": "dram",
    "memory_bandwidth": "dram",
    "l2_bandwidth": "l2",
    "sm": "compute",
    "math": "compute",
    "issue": "compute",
    "compute_bound": "compute",
    "occupancy": "latency",
    "latency_occupancy": "latency",
}

DRAM_RATE = (
    "DRAM Throughput",
    "Memory Throughput",
    "Max Bandwidth",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
)
SM_RATE = ("Compute (SM) Throughput", "SM Busy", "sm__throughput.avg.pct_of_peak_sustained_elapsed")
ISSUE = (
    "Issue Slots Busy",
    "Executed Ipc Active",
    "Issued Ipc Active",
    "Issued Warp Per Scheduler",
)
OCCUPANCY = (
    "Achieved Occupancy",
    "Theoretical Occupancy",
    "Registers Per Thread",
    "Block Limit Registers",
    "Achieved Active Warps Per SM",
    "Theoretical Active Warps per SM",
    "Active Warps Per Scheduler",
    "Eligible Warps Per Scheduler",
    "No Eligible",
    "One or More Eligible",
    "Warp Cycles Per Issued Instruction",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
)
BYTES_READ = ("dram__bytes_read.sum",)
BYTES = ("dram__bytes_read.sum", "dram__bytes_write.sum")
DURATION = ("gpu__time_duration.sum", "Duration")

# A group: (what it shows, the counters that show it). A way: groups that
# together make the case; a kernel's evidence must complete one of its ways.
Group = tuple[str, tuple[str, ...]]
KEY: dict[str, tuple[str, list[list[Group]], str]] = {
    "rope_fwd": (
        "dram",
        [[("how busy the DRAM is", DRAM_RATE)], [("bytes moved", BYTES), ("the time", DURATION)]],
        "Start at GPU Speed Of Light Throughput: which of the two rates, memory or compute, "
        "is close to what that unit can sustain (an elementwise copy reaches about 80% of "
        "the DRAM's peak)?",
    ),
    "matmul_8k": (
        "compute",
        [[("how busy the SMs are", SM_RATE)]],
        "Its occupancy is low, but look at GPU Speed Of Light Throughput first: is either "
        "unit near its peak? A unit at its peak is the limit, whatever the occupancy.",
    ),
    "softmax_32k": (
        "latency",
        [
            [
                ("what keeps warps few or waiting", OCCUPANCY),
                ("both roofs far off", DRAM_RATE + SM_RATE),
            ]
        ],
        "Neither rate in GPU Speed Of Light Throughput is near its peak. Then the kernel "
        "does not keep the memory system busy: look at Occupancy (what limits the blocks an "
        "SM holds?) and at the Scheduler Statistics.",
    ),
    "torch_softmax_32k": (
        "compute",
        [[("how busy the SMs or their issue slots are", SM_RATE + ISSUE)]],
        "Compare the two rates in GPU Speed Of Light Throughput, then Compute Workload "
        "Analysis: how busy are the issue slots, and how many instructions for 67 M elements?",
    ),
    "softmax_three_pass": (
        "dram",
        [[("the bytes read from DRAM", BYTES_READ), ("the time", DURATION)]],
        "This page has no percentages: work the DRAM's rate out yourself from the bytes it "
        "moved and the duration, and compare it with the H200's 4.8 TB/s. How many bytes "
        "did it read, against the 134.2 MB a softmax must?",
    ),
}


def _limit(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    key = "_".join(value.strip().lower().replace("-", " ").replace("/", " ").split())
    key = key.removesuffix("_bound").removesuffix("_limited") or key
    return key if key in LIMITS else ALIASES.get(key)


def _evidence_problem(
    kernel: str, rows: list[counters.Row], evidence: dict[str, Any], ways: list[list[Group]]
) -> str:
    """What is wrong with the cited counters, or ""."""
    cited: set[str] = set()
    for name, value in evidence.items():
        found = counters.find(rows, str(name))
        if not found:
            return (
                f"{kernel}'s recording has no counter {fmt(name)}: cite names as "
                f"`gpulab counters {kernel}` prints them"
            )
        if not any(counters.matches(r, value) for r in found):
            held = " or ".join(f"{r[3]} {r[2]}".strip() for r in found)
            return f"{name} is {held} in {kernel}'s recording, not {fmt(value)}"
        cited.update(r[1].lower() for r in found)
    for way in ways:
        if all(any(n.lower() in cited for n in names) for _, names in way):
            return ""
    # The way closest to complete, to say what is missing.
    way = max(ways, key=lambda w: sum(any(n.lower() in cited for n in ns) for _, ns in w))
    missing = [(what, names) for what, names in way if not any(n.lower() in cited for n in names)]
    what, names = missing[0]
    return (
        f"the evidence does not show {what}: cite one of {', '.join(names[:4])} "
        "(with the value the recording holds)"
    )


def check_kernel(ctx: GradeContext, fn: Any, kernel: str) -> None:
    answer, ways, hint = KEY[kernel]
    name = f"{kernel}: what limits it"
    try:
        _, rows = counters.counters(kernel)
    except counters.CountersError as exc:
        raise GradeFailed(f"gpulab's recording of {kernel} is unreadable: {exc}") from None
    got, error = try_call(ctx, fn, kernel)
    problem = error
    if not problem and not (isinstance(got, dict) and set(got) >= {"limit", "evidence"}):
        problem = f'returned {fmt(got)}; return {{"limit": ..., "evidence": {{counter: value}}}}'
    if not problem:
        limit = _limit(got["limit"])
        evidence = got["evidence"]
        if limit is None:
            problem = f"limit {fmt(got['limit'])} is not one of {', '.join(LIMITS)}"
        elif limit != answer:
            problem = f"not {LIMITS[limit]}. {hint}"
        elif not isinstance(evidence, dict) or not evidence:
            problem = "no evidence: a dict of the counters that show it, with their values"
        else:
            problem = _evidence_problem(kernel, rows, evidence, ways)
    ctx.add_case(case_row(name=name, passed=not problem, detail=problem))


def grade(ctx: GradeContext) -> None:
    fn = ctx.function("diagnose")
    for kernel in KEY:
        ctx.stage(StageKind.CORRECTNESS, f"your diagnosis of {kernel}")
        check_kernel(ctx, fn, kernel)
