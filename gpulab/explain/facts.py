"""The shapes of `--explain`'s data, as JSON: what the judge sends the
sandbox, what the sandbox answers, the facts the rules read, the findings,
and what the result's `explain` and `diagnosis` hold (docs/diagnosis.md).

TypedDicts, not classes: every one of these is JSON that crosses a process
(judge <-> sandbox frames, the result the lab reads back from disk) or is
written into the result as it is (`explain.facts`), and tests feed the
rules plain dicts. The types let mypy check the keys; nothing here is
checked at run time, so the readers keep their `.get(...)` where a value
comes from another process.

Standard library only; imported by the lab, the judge and the sandbox.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypeAlias, TypedDict

# --- what the judge sends the sandbox (gpulab.explain.judge.cases) -------------------

# An argument of the learner's function, described: a tensor as
# {"__tensor__": {shape, stride, offset, dtype}}, a tuple as {"__tuple__": [...]},
# lists and dicts of descriptions, and plain values (the rest as their repr).
Described: TypeAlias = "None | bool | int | float | str | list[Described] | dict[str, Described]"


class CaseDescription(TypedDict):
    """A timing case of the exercise, as plain data (no tensors)."""

    name: str
    sizes: dict[str, float]
    dtype: str
    elt: int  # bytes an element
    args: Described  # a tuple's: {"__tuple__": [...]}
    kwargs: Described


# --- what the sandbox records and answers (gpulab.explain.sandbox) ----------------


class AutotunePick(TypedDict):
    """Which config of an autotuned kernel is explained (gpulab.explain.candidates)."""

    configs: int
    compiled: int
    spilling: int
    chosen: int
    why: str


class Launch(TypedDict, total=False):
    """One Triton launch as the sandbox answers it (no function, no buffers)."""

    kernel: str
    signature: dict[str, str]
    constexprs: dict[str, int | float | bool | str | None]  # others as their repr
    divisible: list[str]
    ones: list[str]
    grid: list[int]
    programs: int
    num_warps: int
    num_stages: int
    problem: str  # why it is not analysed (a TMA descriptor), else ""
    key: str  # its compile facts' key
    group: int  # an autotuned kernel's configs, on the CPU: one group,
    candidate: int  # candidate 0..of-1
    of: int
    autotune: AutotunePick  # the judge's, where it picked this config


class TracedLaunch(TypedDict, total=False):
    """One launch as the tracer records it in the sandbox: a Launch with
    what compiling it needs (`fn`) and the buffers it was given."""

    kernel: str
    fn: Any  # the JITFunction (Triton's, untyped)
    signature: dict[str, str]
    # A kernel's constexprs by name, as the learner's code passed them: any value.
    constexprs: dict[str, Any]
    divisible: list[str]
    ones: list[str]
    grid: list[int]
    programs: int
    num_warps: int
    num_stages: int
    problem: str
    tensors: dict[str, tuple[int, int]]  # name -> (storage address, bytes)
    key: str
    group: int
    candidate: int
    of: int


class Intermediate(TypedDict):
    """A buffer the call allocated and passed to more than one kernel."""

    name: str
    bytes: int
    kernels: list[str]


class CaseEntry(TypedDict, total=False):
    """One case of the sandbox's `explained` reply."""

    name: str
    sizes: dict[str, float]
    dtype: str
    elt: int
    launches: list[Launch]
    autotuned_configs: int
    error: str
    intermediates: list[Intermediate]


class CodeFacts(TypedDict, total=False):
    """What gpulab.explain.ttir reads from a kernel's TTIR (`analyse` gives
    every key; optional so that CompileFacts, which extends it, may lack them)."""

    loads: dict[str, int]  # argument -> the places it is loaded from
    atomics: int
    loops: int
    dot: bool
    grouped: bool
    loop_load_bytes: int
    loop_dot_flops: int
    load_bytes: int


class CompiledKernel(TypedDict, total=False):
    """One kernel compiled for one architecture, as
    gpulab.measure.compile_info's CompileInfo.as_dict() writes it (every key
    there; optional here so that CompileFacts, which extends it, may lack
    them)."""

    kernel: str
    arch: str
    ok: bool
    error: str
    registers: int | None
    spill_stores: int | None
    spill_loads: int | None
    shared: int
    num_warps: int
    blocks_per_sm: int
    limited_by: str
    tensor_cores: str
    spills: int | None
    fits: bool
    occupancy: float
    smem_per_block: int


class CompileFacts(CompiledKernel, CodeFacts, total=False):
    """One kernel compiled for one architecture (CompiledKernel), then its
    code facts (CodeFacts) and its label; or a launch not analysed
    (`skipped`), or not compiled (`ok` False), without code facts."""

    label: str
    skipped: bool


# --- the facts the rules read (gpulab.explain.judge.plugin) ------------------------


class GpuFacts(TypedDict):
    """The GPU the kernel is explained for: this machine's, or a datasheet's."""

    name: str
    sms: int | None
    bandwidth: float | None  # bytes/s
    flops: dict[str, float]  # FLOP/s by dtype
    l2_mb: float | None
    arch: str
    source: str


class CaseFacts(TypedDict):
    """A case as the rules read it: the sandbox's case with the exercise's
    minimal bytes and FLOPs and its measured time (case_facts)."""

    name: str
    dtype: str
    sizes: dict[str, float]
    elt: int
    bytes: float | None
    flops: float | None
    work: float
    exps: float
    ms: float | None
    fraction: float | None
    launches: list[Launch]
    intermediates: list[Intermediate]
    error: NotRequired[str]


class Facts(TypedDict):
    """Everything the rules read, written into the result as `explain.facts`."""

    exercise: str
    kind: str | None
    gpu: GpuFacts
    measured: bool
    cases: list[CaseFacts]
    compiled: dict[str, CompileFacts]


class Where(TypedDict):
    """The lesson section that teaches a finding's kind best."""

    lesson: str
    section: str


class Finding(TypedDict):
    """One entry of the result's `diagnosis`."""

    kind: str
    evidence: str
    advice: str
    lesson: str
    section: str
    severity: float


# --- Nsight Compute (gpulab.explain.nsight) --------------------------------------


class NcuKernel(TypedDict):
    """One kernel of ncu's CSV: its metrics in bytes, seconds or ratios."""

    id: str
    name: str
    metrics: dict[str, float]


class Stall(TypedDict):
    reason: str
    share: float
    per_issue: float
    meaning: str


class KernelFacts(TypedDict):
    name: str
    dram_bytes: float | None
    dram_read: float | None
    dram_write: float | None
    seconds: float | None
    stalls: list[Stall]


class NsightSummary(TypedDict):
    kernels: list[KernelFacts]
    dram_bytes: float | None
    gpu_seconds: float | None


class NsightInfo(TypedDict, total=False):
    """The result's `explain.nsight`: what was measured, or why not."""

    measured: bool
    why: str
    case: str
    launched: list[str]
    csv: str
    kernels: list[KernelFacts]
    dram_bytes: float | None
    gpu_seconds: float | None
    minimum_bytes: float | None
    ratio: float | None
    problem: str
    seconds: float


# --- what --explain adds to the result ------------------------------------------


class CompileFailure(TypedDict):
    kernel: str
    arch: str
    error: str


class ExplainInfo(TypedDict, total=False):
    """The result's `explain`: the basis, the timings, the facts; or only
    `error` where the explanation failed."""

    basis: list[str]
    arch: str
    gpu: str
    error: str
    not_compiled: int
    compile_errors: list[CompileFailure]
    sandbox_seconds: float | None
    seconds: float
    steps: dict[str, float]
    advisory: str
    facts: Facts
    nsight: NsightInfo


class Explanation(TypedDict):
    """The two keys --explain adds to a result."""

    diagnosis: list[Finding]
    explain: ExplainInfo


class TimedRow(TypedDict, total=False):
    """A row of the result's `timing.cases`, the keys --explain reads."""

    name: str
    ms: float
    roofline_fraction: float | None


class Timing(TypedDict, total=False):
    cases: list[TimedRow]


class ResultView(TypedDict, total=False):
    """A check's result as JSON (gpulab.wire.result's to_json), the keys
    --explain reads and the two it adds."""

    status: str
    timing: Timing
    explain: ExplainInfo
    diagnosis: list[Finding]


__all__ = [
    "AutotunePick",
    "CaseDescription",
    "CaseEntry",
    "CaseFacts",
    "CodeFacts",
    "CompileFacts",
    "CompileFailure",
    "Described",
    "ExplainInfo",
    "Explanation",
    "Facts",
    "Finding",
    "GpuFacts",
    "Intermediate",
    "KernelFacts",
    "Launch",
    "NcuKernel",
    "NsightInfo",
    "NsightSummary",
    "ResultView",
    "Stall",
    "TimedRow",
    "Timing",
    "TracedLaunch",
    "Where",
]
