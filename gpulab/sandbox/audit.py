"""The graded call as torch's profiler sees it: every aten op, in any thread,
and on a GPU every kernel and copy that ran.

The op guards (guards.py) are Python modes: they name the exact torch call a
learner made, but a mode covers one thread and code can switch it off
(`_disable_current_modes`, `DisableTorchFunction`, `inference_mode`...). The
profiler's callbacks sit in torch's dispatcher and, with
`profile_all_threads`, in every thread; on a GPU, CUPTI lists the kernels
that actually ran, whoever launched them. So the audit still sees torch doing
the work from a second thread or after the modes are switched off.

What stays invisible: maths in numpy or pure Python on the CPU (no torch op
runs; on a GPU it needs a device-to-host copy, which is seen), and code that
stops the profiler itself, which is seen as a profile that ended early. This
still runs in the learner's process: the first line, not the grade
(docs/grading.md).

gpulab's own torch work during the call (the guards' canaries and poison,
the Triton interpreter's argument copies) runs inside `own()` ranges, named
with a per-process secret; a learner's range of that name is not one of ours
(the counts disagree) and voids the exemption.
"""

from __future__ import annotations

import bisect
import contextlib
import math
import secrets
from collections.abc import Iterator
from typing import Any

import torch

_OWN = f"gpulab::own::{secrets.token_hex(6)}"
_END = f"gpulab::end::{secrets.token_hex(6)}"
_WIN = f"gpulab::call::{secrets.token_hex(6)}"
_PRINT = f"gpulab::print::{secrets.token_hex(6)}"
_opened = 0
_printed = 0

STOPPED = "the profiler was stopped during your call"
IMITATED = "a profiler range named like gpulab's own"

# Ops a wrapper may run: allocation, views and strides, copies and casts.
# EagerGuard (gpulab.sandbox.guards) allows these and the profiler's own
# range ops; the audit adds the composite names the profiler shows above
# them (`to` above `_to_copy`, `view_as` above `view`) and scalar reads.
WRAPPER_OPS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "new_zeros",
        "zero_",
        "fill_",
        "full",
        "full_like",
        "view",
        "_unsafe_view",
        "reshape",
        "as_strided",
        "expand",
        "t",
        "transpose",
        "permute",
        "unsqueeze",
        "squeeze",
        "slice",
        "select",
        "split",
        "split_with_sizes",
        "unbind",
        "narrow",
        "alias",
        "detach",
        "clone",
        "copy_",
        "_to_copy",
        "contiguous",
        "lift_fresh",
    }
)
ALLOWED = WRAPPER_OPS | {
    "detach_",
    "to",
    "view_as",
    "reshape_as",
    "expand_as",
    "flatten",
    "unflatten",
    "movedim",
    "chunk",
    "resolve_conj",
    "resolve_neg",
    "requires_grad_",
    "set_",
    "_local_scalar_dense",
    "item",
    "is_nonzero",
    "result_type",
}

# Values a call may read back to the CPU one at a time (`.item()`): a
# reference's self-check reads a few; a softmax worked on the CPU needs
# thousands (softmax's 1x1 and 2x3 cases fit in 16, its larger cases do not,
# and a check passes only when every case does).
SCALAR_READS = 16

# Kernels that are torch's (or its libraries') maths, by name. On a GPU only
# these are refused: a kernel of any other name may be the learner's own (a
# Triton kernel's name can carry a suffix), so an unknown name passes.
TORCH_KERNELS = (
    "at::native::",
    # torch's kernels outside at::native, in a file's anonymous namespace:
    # its softmax for rows of up to 1024 (PersistentSoftmax.cuh's
    # softmax_warp_forward), which the H100's audit showed this list missed.
    # A Triton kernel's name is a Python name: it never holds "::".
    "(anonymous namespace)::",
    "softmax_warp_",
    "cunn_",
    "cublas",
    "cutlass",
    "cudnn",
    "gemm",
    "gemv",
    "xmma",
    "flash_fwd",
    "fmha",
    "sm90_",
    "sm80_",
    "sm100_",
    "ampere_",
    "volta_",
    "turing_",
    "triton_poi_",
    "triton_red_",
    "triton_per_",
    "triton_tem_",
)

# CUPTI's kernel list does not say which CPU range launched a kernel, so
# gpulab's own work inside `own()` must launch only fills and copies on a
# GPU (the canaries' pattern is made on the CPU and copied over).
# Torch's own CUDA kernels that a wrapper may cause: fills (torch.zeros, the
# poison) and copies (a cast, .contiguous()). Matched as substrings of the
# kernel's name.
ALLOWED_KERNELS = (
    "FillFunctor",
    "fill_kernel",
    "copy_kernel",
    "direct_copy",
    "CopyFunctor",
    "Memset",
    "Memcpy HtoD",
    "Memcpy DtoD",
)


@contextlib.contextmanager
def own() -> Iterator[None]:
    """gpulab's own torch work inside a graded call: not the learner's."""
    global _opened
    _opened += 1
    with _range(_OWN):
        yield


@contextlib.contextmanager
def printing() -> Iterator[None]:
    """A print's copies of a tensor to the host (gpulab.sandbox.printing): on
    a GPU its device-to-host copies are a print's, not maths on the CPU."""
    global _printed
    _printed += 1
    with _range(_PRINT):
        yield


def _range(name: str) -> Any:
    # _RecordFunctionFast opens the range without an aten op of its own
    # (record_function's enter/exit are ops, which EagerGuard would see).
    try:
        from torch._C._profiler import _RecordFunctionFast

        return _RecordFunctionFast(name)
    except ImportError:  # pragma: no cover - older torch
        return torch.profiler.record_function(name)


def _all_threads() -> Any:
    from torch._C._profiler import _ExperimentalConfig

    try:
        return _ExperimentalConfig(profile_all_threads=True), True
    except TypeError:  # torch before profile_all_threads: the calling thread only
        return _ExperimentalConfig(), False


class Audit:
    """Profile one graded call; then `findings()` lists what the learner's
    code ran that a Triton solution does not need."""

    def __init__(self, device: str, sum_width: int = 0) -> None:
        self.device, self.sum_width = device, sum_width
        self.events: list[Any] = []
        self.all_threads = False
        self.stopped_early = False
        self._prof: Any = None
        self._opened_before = 0
        self._printed_before = 0
        self._switch_on = False
        self.unavailable = ""  # why the profiler could not start, if it could not

    def __enter__(self) -> Audit:
        # torch.autograd's profiler, which torch.profiler.profile wraps: the
        # wrapper's start asks `hasattr(torch, "_inductor")`, and that
        # imports Inductor and Dynamo (2.3 s of a 6 s sandbox start on a
        # 2-core CPU box, in every check) to read a CUDA-graphs setting the
        # audit has no use for.
        from torch.autograd.profiler import profile

        config, self.all_threads = _all_threads()
        self._opened_before = _opened
        self._printed_before = _printed
        try:
            self._prof = profile(
                use_cpu=True,
                use_device="cuda" if self.device == "cuda" else None,
                record_shapes=True,
                use_kineto=True,
                experimental_config=config,
            )
            self._prof.__enter__()
            # torch's switch reads on only for a profile of this thread (an
            # all-threads profile keeps it off): compared again at the end.
            self._switch_on = torch.autograd._profiler_enabled()
        except Exception as exc:  # noqa: BLE001 - no profiler here: the audit is off
            self._prof, self.unavailable = None, f"{type(exc).__name__}: {exc}"[:200]
        return self

    def __exit__(self, *exc: object) -> None:
        if self._prof is None:
            return
        # Two signs that the code under audit stopped the profiler: torch's
        # switch, on at the start, is now off (`_disable_profiler()`), or a
        # last range of gpulab's is missing from the profile (stopping the
        # profile object: torch then returns what it had, or nothing, without
        # complaint). On torch 2.11 the switch stops even an all-threads
        # profile, and the exit below raises.
        switched_off = self._switch_on and not torch.autograd._profiler_enabled()
        with _range(_END):
            pass
        try:
            self._prof.__exit__(None, None, None)
            self.events = _events(self._prof)
        except Exception:  # noqa: BLE001
            # It started, so a failure to stop is the code's doing (torch
            # raises "Can't disable Kineto profiler when it's not running"),
            # not a missing profiler: failing safe, not turning the audit off.
            self.events, self.stopped_early = [], True
            return
        self.stopped_early = switched_off or not any(e.name == _END for e in self.events)

    def findings(self, launched: set[str]) -> list[str]:
        """What ran that should not have: torch ops (CPU), torch kernels and
        device-to-host copies (GPU). `launched`: the Triton kernels the
        learner's code launched (their names)."""
        if self.unavailable:
            return []
        if self.stopped_early:
            return [STOPPED]
        if self._imitated(self.events):
            return [IMITATED]
        return self.findings_in(self.events, launched)

    def _imitated(self, events: list[Any]) -> bool:
        """More ranges of gpulab's names than gpulab opened: a learner's."""
        ours = sum(1 for e in events if e.name == _OWN)
        prints = sum(1 for e in events if e.name == _PRINT)
        return ours > _opened - self._opened_before or prints > _printed - self._printed_before

    def findings_in(self, events: list[Any], launched: set[str]) -> list[str]:
        """findings() for a part of the profile (one call's window)."""
        found: list[str] = []
        reads, n_reads = _scalar_reads(events), 0
        prints = [e.time_range for e in events if e.name == _PRINT]
        for e in events:
            name = e.name
            if self.device == "cuda" and _on_gpu(e):
                if "Memcpy DtoH" in name and _inside(e, prints):
                    continue  # a print's copy (gpulab.sandbox.printing)
                if "Memcpy DtoH" in name:
                    # One value read back (a flag, a size) is a wrapper's
                    # business; the bytes to do maths on the CPU are not.
                    if not _take_read(e, reads):
                        found.append("a device-to-host copy (maths on the CPU?)")
                    elif (n_reads := n_reads + 1) > SCALAR_READS:
                        found.append(
                            f"more than {SCALAR_READS} values read back to the CPU"
                            " (maths on the CPU?)"
                        )
                elif (
                    any(k in name for k in TORCH_KERNELS)
                    and not any(k in name for k in ALLOWED_KERNELS)
                    and not _is_launched(name, launched)
                    and not self._allowed_sum_kernel(name)
                ):
                    found.append(f"the kernel {_short(name)}")
                continue
            if not name.startswith("aten::") or _under_own(e):
                continue
            op = name[len("aten::") :]
            if op in ALLOWED or self._allowed_sum(op, e):
                continue
            if self.device == "cuda":
                continue  # on a GPU, CPU-side ops are judged by what reached the GPU
            found.append(f"torch's {name}")
        return sorted(set(found))

    def _allowed_sum(self, op: str, e: Any) -> bool:
        # RMSNorm's backward may add per-program dweight partials (P, D) -> (D,).
        shapes = getattr(e, "input_shapes", None) or []
        return (
            bool(self.sum_width)
            and op == "sum"
            and bool(shapes)
            and len(shapes[0]) == 2
            and shapes[0][-1] == self.sum_width
        )

    def _allowed_sum_kernel(self, name: str) -> bool:
        return bool(self.sum_width) and "reduce_kernel" in name and "sum" in name.lower()


class SpanAudit:
    """One profile across a check's correctness calls, each call a window
    of its own; the findings of every window once the judge asks
    (`close`), after the last case.

    Why: on an H200 starting and stopping torch's profiler (CUPTI) costs
    about 0.15 s, and a softmax check made 18 graded calls, each profiled
    apart (py-spy, 2026-12-03). What a window sees is what a call's own
    profile saw: every op and kernel that started between the call's start
    and the end of its synchronize, in any thread. Work between calls is
    gpulab's (copies into the judge's slots, the next call's views) and is
    not judged, as it was not profiled before."""

    def __init__(self, device: str, sum_width: int = 0) -> None:
        self.audit = Audit(device, sum_width).__enter__()
        self.launched: list[set[str]] = []
        self.result: list[list[str]] | None = None

    @property
    def unavailable(self) -> str:
        return self.audit.unavailable

    @contextlib.contextmanager
    def window(self) -> Iterator[int]:
        """One graded call (and its synchronize): its number."""
        n = len(self.launched)
        self.launched.append(set())
        with _range(_WIN):
            yield n

    def close(self) -> list[list[str]]:
        """Each window's findings (stopping the profile the first time)."""
        if self.result is None:
            self.audit.__exit__(None, None, None)
            self.result = self._findings()
        return self.result

    def _findings(self) -> list[list[str]]:
        audit, n = self.audit, len(self.launched)
        if audit.unavailable:
            return [[] for _ in range(n)]
        if audit.stopped_early:
            return [[STOPPED] for _ in range(n)]
        events = audit.events
        windows = sorted((e.time_range.start, e.time_range.end) for e in events if e.name == _WIN)
        if audit._imitated(events) or len(windows) != n:
            return [[IMITATED] for _ in range(n)]
        parts: list[list[Any]] = [[] for _ in range(n)]
        starts = [s for s, _ in windows]
        for e in events:
            if e.name in (_WIN, _END):
                continue
            i = bisect.bisect_right(starts, e.time_range.start) - 1
            if i >= 0 and e.time_range.start <= windows[i][1]:
                parts[i].append(e)
        return [audit.findings_in(part, self.launched[i]) for i, part in enumerate(parts)]


class Ev:
    """One profiled event, with the fields the findings read. Made from
    torch's raw (C++) event list: building torch's FunctionEvents parsed
    every event in Python, about 1 s a graded call on an H200 (20 of the
    36 s a softmax check's sandbox spent in graded calls; py-spy,
    2026-12-03)."""

    __slots__ = ("name", "device_type", "input_shapes", "time_range", "cpu_parent", "thread")

    def __init__(self, name: str, device_type: Any, start: int, end: int, thread: int) -> None:
        self.name, self.device_type, self.thread = name, device_type, thread
        self.time_range = _Span(start, end)
        self.input_shapes: list[Any] = []
        self.cpu_parent: Ev | None = None


class _Span:
    __slots__ = ("start", "end")

    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end


def _events(prof: Any) -> list[Any]:
    """The events the findings can act on, from torch's raw results: every
    GPU event, gpulab's own ranges and end mark, and the aten ops that are
    not wrapper ops (an allowed op needs no look; `sum` keeps its shapes
    for RMSNorm's partials, a scalar read its shapes and times). An op's
    `cpu_parent` is the innermost of gpulab's own ranges around it on its
    thread, as torch's event tree would have it."""
    results = getattr(prof, "kineto_results", None)
    if results is None:  # no raw results on this torch: its own event list
        return list(prof.function_events or [])
    cpu = torch.autograd.DeviceType.CPU
    hidden = getattr(torch._C._autograd._KinetoEvent, "is_hidden_event", None)
    kept: list[Any] = []
    own: dict[int, list[Ev]] = {}
    ops: list[tuple[Ev, bool]] = []
    for k in results.events():
        name = k.name()
        if name in _FILTERED or (hidden is not None and hidden(k)):
            continue
        device = k.device_type()
        if device != cpu:
            kept.append(Ev(_demangle(name), device, k.start_ns(), k.end_ns(), -1))
            continue
        is_op = name.startswith("aten::")
        if is_op and name[6:] in ALLOWED and name != "aten::_local_scalar_dense":
            continue
        if not is_op and name not in (_OWN, _END, _WIN, _PRINT):
            continue
        thread = k.start_thread_id()
        ev = Ev(name, device, k.start_ns(), k.end_ns(), thread)
        if name in ("aten::sum", "aten::_local_scalar_dense"):
            ev.input_shapes = k.shapes()
        kept.append(ev)
        if name == _OWN:
            own.setdefault(thread, []).append(ev)
        elif is_op:
            ops.append((ev, k.is_async() or thread != k.end_thread_id()))
    for ev, is_async in ops:
        if is_async:
            continue  # torch's tree gives an async event no parent
        inner = None
        for r in own.get(ev.thread, ()):
            s, e = r.time_range.start, r.time_range.end
            if s <= ev.time_range.start and ev.time_range.end <= e:
                if inner is None or s >= inner.time_range.start:
                    inner = r
        ev.cpu_parent = inner
    return kept


# torch's profiler leaves these out of its event list (profiler_util._filter_name).
_FILTERED = frozenset(
    {
        "[memory]",
        "[OutOfMemory]",
        "profiler::_record_function_enter",
        "profiler::_record_function_enter_new",
        "profiler::_record_function_exit",
        "aten::is_leaf",
        "aten::output_nr",
        "aten::_version",
    }
)
_demangled: dict[str, str] = {}


def _demangle(name: str) -> str:
    """A kernel's name as torch's event list shows it (demangled)."""
    got = _demangled.get(name)
    if got is None:
        try:
            got = torch._C._demangle(name)
        except Exception:  # noqa: BLE001 - not a mangled name
            got = name
        _demangled[name] = got
    return got


def _scalar_reads(events: list[Any]) -> list[Any]:
    """The calls' reads of one value back to the CPU (`.item()`, `float(t)`),
    as the CPU ops that made them: a wrapper may read a flag or a size."""
    return [
        e
        for e in events
        if e.name == "aten::_local_scalar_dense"
        and not _on_gpu(e)
        and all(math.prod(s) <= 1 for s in (getattr(e, "input_shapes", None) or [[]])[:1])
    ]


def _take_read(copy: Any, reads: list[Any]) -> bool:
    """Whether a device-to-host copy ran inside one of the scalar reads (the
    read's CPU op waits for its copy); that read is used up."""
    for read in reads:
        o, i = read.time_range, copy.time_range
        if o.start <= i.start and i.end <= o.end:
            reads.remove(read)
            return True
    return False


def _inside(copy: Any, spans: list[Any]) -> bool:
    i = copy.time_range
    return any(s.start <= i.start and i.end <= s.end for s in spans)


def _on_gpu(e: Any) -> bool:
    return getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA


def _under_own(e: Any) -> bool:
    """Inside one of gpulab's own ranges. Ops nested in other ops are judged
    too: an allowed op's own parts are allowed ops (`to` is `_to_copy`,
    `empty_strided` and `copy_`), and a tensor subclass can run anything
    inside an allowed op's range."""
    p = e.cpu_parent
    while p is not None:
        if p.name == _OWN:
            return True
        p = p.cpu_parent
    return False


def _is_launched(kernel: str, launched: set[str]) -> bool:
    # A Triton kernel runs under its function's name (a suffix may follow).
    return any(kernel == n or kernel.startswith(n + "_") for n in launched)


def _short(name: str) -> str:
    return name if len(name) <= 90 else name[:87] + "..."
