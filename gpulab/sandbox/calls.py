"""The two things the judge asks of the sandbox: one guarded call, and a
timed batch. Both put results into slots the judge owns and report what
the guards saw; the judge compares and decides."""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from gpulab.sandbox import learner
from gpulab.sandbox.audit import Audit
from gpulab.sandbox.guards import EagerGuard, LaunchRecorder, op_guard
from gpulab.sandbox.tensors import Arenas, materialize, view
from gpulab.wire.calls import (
    Audited,
    BackwardReply,
    CallRequest,
    Desc,
    GuardReport,
    Guards,
    Returned,
)
from gpulab.wire.protocol import Kwargs, TensorRef
from gpulab.wire.timed_batch import Clocks, Timed, TimeRequest

# One repetition of a timed batch: its args, kwargs and upstream gradient.
Rep = tuple[list[Any], Kwargs, torch.Tensor | None]

# Taken when this module is imported, before the learner's file is: a
# learner who rebinds Tensor.copy_ or Event.record does not change these.
_COPY = torch._C.TensorBase.copy_
_RECORD = torch.cuda.Event.record
_ELAPSED = torch.cuda.Event.elapsed_time
_SLEEP: Callable[[int], None] = torch.cuda._sleep  # (untyped in torch)
MAX_LEAD_CYCLES = 20_000_000  # ~10 ms at 2 GHz: a lead the judge asks for, bounded


def resolve(dotted: str) -> Any:
    """`torch.nn.functional.softmax` -> the object (None if it is not there)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                return None
        return obj
    return None


def describe(out: Any) -> Desc:
    if not isinstance(out, torch.Tensor):
        return Desc(type=type(out).__name__)
    return Desc(
        type="Tensor",
        exact=type(out) is torch.Tensor,
        shape=tuple(out.shape),
        dtype=str(out.dtype).replace("torch.", ""),
        device=out.device.type,
        contiguous=out.is_contiguous(),
        grad_fn=out.grad_fn is not None,
    )


def _not_dense(out: Any) -> str:
    """What a returned tensor is when it is not a dense (strided) one, in
    words; "" for a dense tensor and for anything that is not a tensor."""
    if not isinstance(out, torch.Tensor):
        return ""
    if out.is_nested:
        return "a nested tensor"
    if out.layout != torch.strided:
        return f"a tensor of layout {str(out.layout).replace('torch.', '')}"
    return ""


def _unreadable(exc: Exception, out: Any, file: str) -> Exception:
    """What reading the returned object raised. A tensor subclass's own code
    (__torch_function__, an overridden attribute) runs when the sandbox
    reads its shape or storage: that error is the learner's, named (it was
    "the sandbox failed" with gpulab's traceback). On a plain tensor it is
    the sandbox's own, and goes up as it is."""
    if isinstance(out, torch.Tensor) and type(out) is torch.Tensor:
        return exc
    tb, last, _ = learner.described(exc, file)
    return learner.LearnerError(f"reading what your function returned raised {last}", tb)


def _copy_into(slot_ref: TensorRef | None, out: Any, arenas: Arenas) -> bool:
    if slot_ref is None or not isinstance(out, torch.Tensor) or type(out) is not torch.Tensor:
        return False
    slot = view(arenas, slot_ref)
    if (
        tuple(out.shape) != tuple(slot.shape)
        or out.dtype != slot.dtype
        or out.device.type != slot.device.type
    ):
        return False
    with torch.no_grad():
        slot.copy_(out.detach())
    return True


def _storages(args: Any) -> set[int]:
    found: set[int] = set()

    def walk(o: Any) -> None:
        if isinstance(o, torch.Tensor):
            found.add(o.untyped_storage().data_ptr())
        elif isinstance(o, (list, tuple)):
            for v in o:
                walk(v)
        elif isinstance(o, dict):
            for v in o.values():
                walk(v)

    walk(args)
    return found


def _cuda() -> Any:
    """torch.cuda, looked up at the call as before; its Event and
    is_initialized are untyped."""
    return torch.cuda


def _event() -> Any:
    return _cuda().Event(enable_timing=True)


def _sync() -> None:
    if torch.cuda.is_available() and _cuda().is_initialized():
        torch.cuda.synchronize()


def _guards(guards: Guards | None, device: str) -> tuple[Any, Any]:
    spec = guards or Guards()
    banned = [f for f in (resolve(n) for n in spec.banned) if f is not None]
    og = op_guard(banned, list(spec.banned_aten), banned_large=list(spec.banned_large))
    eg = EagerGuard(device, spec.eager_width) if spec.eager_width else None
    return og, eg


def split_result(out: Any, rest: int) -> tuple[Any, list[Any]]:
    """A result asked for as 1 + `rest` tensors: (the first, the others).
    Anything else stays whole, with no others: the judge names what came
    back instead (a tuple of another length is described as a tuple)."""
    if rest and isinstance(out, (tuple, list)) and len(out) == 1 + rest:
        return out[0], list(out[1:])
    return out, []


@contextlib.contextmanager
def _nan_lines(server: Any) -> Iterator[list[str]]:
    """On the CPU, the kernel lines where the interpreter made a NaN from
    numbers (gpulab.sandbox.nan_watch): the judge names them for a result
    with NaN where the answer is a number."""
    if server.device != "cpu":
        yield []
        return
    from gpulab.sandbox.nan_watch import nan_lines

    with nan_lines(server.file) as found:
        yield found


def _run_guarded(
    server: Any,
    fn: Any,
    args: list[Any],
    kwargs: Kwargs,
    guards: Guards | None,
    inputs: set[int],
    rest: int = 0,
) -> tuple[Any, GuardReport, Any]:
    """The call's result, its guards' report, and its launch Recording (the
    backward's record goes on from it: the backward's kernels may read what
    the forward's wrote) or None. With `rest`, the result is 1 + rest
    tensors: the report's provenance is the first's, and its record holds
    the others after it (as a backward's gradients)."""
    og, eg = _guards(guards, server.device)
    width = guards.eager_width if guards is not None else 0
    # The correctness cases share one profile, a window each, judged when the
    # judge asks after the last case (audit.SpanAudit; `audit_end`).
    watched = guards is not None and guards.audit
    span = (
        server.span_audit(width)
        if guards is not None and guards.audit and guards.audit_span
        else None
    )
    # No guards asked for (lesson 06's step is torch code by design), or the
    # audit off (a GPU's replay judges instead): no audit.
    audit = Audit(server.device, width) if watched and span is None else None
    watch: Any = None
    with audit or _Null(), LaunchRecorder(inputs) as launches, og as v:
        if guards is not None and guards.replay:
            from gpulab.sandbox.replay import Recording, copy_watch

            launches.recording = Recording(server.arenas)
            if eg is not None:
                eg.recording = launches.recording
            else:  # lesson 05's guard records its steps itself
                watch = copy_watch(launches.recording)
        with span.window() if span is not None else _Null() as window:
            with eg if eg is not None else _Null(), watch if watch is not None else _Null():
                with _nan_lines(server) as nan_at:
                    out = learner.call(fn, server.file, *args, **kwargs)
            _sync()  # inside the audit: CUPTI reports the kernels that have run
    kernels = {la.kernel for la in launches.launches}
    watcher = span.audit if span is not None else audit
    if span is not None:
        span.launched[window] = kernels
    whole = out
    out, others = split_result(out, rest)
    try:
        odd = next((o for o in map(_not_dense, [out, *others]) if o), "")
    except Exception as exc:
        raise _unreadable(exc, out, server.file) from None
    if odd:
        # What follows reads the result's storage and strides, which a
        # sparse, nested or MKL-DNN tensor does not have: its error was
        # "the sandbox failed: NotImplementedError", a gpulab traceback.
        raise learner.LearnerError(
            f"your function returned {odd}; return a plain dense tensor",
            "The result must be an ordinary (strided) torch.Tensor, such as "
            "torch.empty_like(x) filled by your kernel.",
        )
    try:
        provenance = launches.provenance(out)
        recording = launches.recording
        replay = None
        if recording is not None:
            replay = recording.result(out, others) if rest else recording.result(out)
    except Exception as exc:
        raise _unreadable(exc, out, server.file) from None
    report = GuardReport(
        banned=tuple(sorted(set(v.banned))),
        eager=tuple(sorted(set(eg.ops))) if eg else (),
        audit=tuple(audit.findings(kernels)) if audit else (),
        audit_threads="all" if watcher and watcher.all_threads else "calling",
        audit_off=watcher.unavailable if watcher else "",
        launches=len(launches.launches),
        side_stream=bool(launches.side_streams()),
        overruns=v.overruns(),
        audit_window=window if span is not None else None,
        replay=replay,
        wrote_out=provenance["wrote_out"],
        altered_after=provenance["altered_after"],
        aliases_input=provenance["aliases_input"],
        nan_at=tuple(nan_at),
    )
    return whole, report, launches.recording


def guarded_call(server: Any, call: CallRequest) -> Returned:
    from gpulab.sandbox.failure import LearnerFailure

    fn = server.function(call.function)
    args = materialize(server.arenas, call.args)
    kwargs = materialize(server.arenas, call.kwargs)
    grad_args = list(call.grad_args)
    for i in grad_args:
        args[i] = args[i].detach().clone().requires_grad_()
    inputs = _storages(args) | _storages(kwargs)
    try:
        rest = len(call.rest)
        whole, report, recording = _run_guarded(server, fn, args, kwargs, call.guards, inputs, rest)
        out, others = split_result(whole, rest)
        try:
            desc, copied = describe(out), _copy_into(call.out, out, server.arenas)
            rest_copied = tuple(
                _copy_into(slot, o, server.arenas)
                for slot, o in zip(call.rest, others or [None] * rest, strict=True)
            )
        except Exception as exc:
            raise _unreadable(exc, out, server.file) from None
        backward = None
        if grad_args:
            leaves = [args[i] for i in grad_args]
            backward = _backward(server, call, out, leaves, inputs, recording)
        _sync()
    except learner.LearnerError as exc:
        raise LearnerFailure(exc.summary, exc.message) from None
    return Returned(desc, report, copied, backward, rest_copied)


def audit_end(server: Any) -> Audited:
    """The findings of the correctness calls' shared profile, a list a
    window (empty when no call asked for one)."""
    span, server.span = server.span, None
    found = span.close() if span is not None else []
    return Audited(tuple(tuple(w) for w in found))


def _backward(
    server: Any,
    call: CallRequest,
    y: Any,
    leaves: list[torch.Tensor],
    inputs: set[int],
    recording: Any = None,
) -> BackwardReply:
    if not isinstance(y, torch.Tensor) or y.grad_fn is None:
        return BackwardReply(GuardReport(), no_grad_fn=True)
    if call.grad_output is None:
        raise ValueError("a backward asked without its upstream gradient")
    dy = view(server.arenas, call.grad_output)
    inputs = inputs | _storages([dy])
    og, eg = _guards(call.guards, server.device)
    via_backward = call.grad_api == "backward"
    audit = Audit(server.device, call.guards.eager_width if call.guards else 0)
    with audit, LaunchRecorder(inputs) as launches, og as v:
        # The forward's record goes on: the replay runs the forward's
        # launches, then the backward's, and reads y, dx and dweight.
        launches.recording = recording
        if eg is not None:
            eg.recording = recording
        with eg if eg is not None else _Null():
            if via_backward:
                learner.call(y.backward, server.file, dy)
                grads = [leaf.grad for leaf in leaves]
            else:
                grads = list(
                    learner.call(
                        torch.autograd.grad, server.file, y, tuple(leaves), dy, allow_unused=True
                    )
                )
        _sync()
    # Where dx came from, for autograd.grad only (y.backward's grads are
    # accumulated into .grad by autograd itself): absent otherwise.
    provenance: dict[str, bool | None] = dict.fromkeys(
        ("wrote_out", "altered_after", "aliases_input")
    )
    if grads and isinstance(grads[0], torch.Tensor) and not via_backward:
        provenance.update(launches.provenance(grads[0]))
    report = GuardReport(
        banned=tuple(sorted(set(v.banned))),
        eager=tuple(sorted(set(eg.ops))) if eg else (),
        audit=tuple(audit.findings({la.kernel for la in launches.launches})),
        launches=len(launches.launches),
        side_stream=bool(launches.side_streams()),
        wrote_out=provenance["wrote_out"],
        altered_after=provenance["altered_after"],
        aliases_input=provenance["aliases_input"],
        replay=None if recording is None else _grads_record(recording, y, grads, server.file),
    )
    copied = [
        _copy_into(slot, g, server.arenas) for slot, g in zip(call.grad_slots, grads, strict=False)
    ]
    return BackwardReply(report, tuple(copied), tuple(g is None for g in grads))


def _grads_record(recording: Any, y: Any, grads: list[Any], file: str) -> Any:
    """The backward's launch record: the forward's and the backward's steps,
    y and each gradient as views (what reading a gradient raises is the
    learner's, as with the result: _unreadable)."""
    try:
        return recording.result(y, list(grads))
    except Exception as exc:
        odd = next((g for g in grads if g is not None and type(g) is not torch.Tensor), None)
        raise _unreadable(exc, odd if odd is not None else y, file) from None


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def timed_batch(server: Any, request: TimeRequest) -> Timed:
    """CUDA events around each call, the L2 flushed before each; each result
    copied into its slot after its end event (outside the events). The judge
    times the whole batch from outside and checks every slot. Clocks are
    logged during the warm-up request only (starting NVML costs milliseconds).

    With `grad_args`, the backward is timed: each repetition's forward runs
    first (its own events, `fwd_ms`), then autograd computes the gradients of
    those args for the repetition's `grad_output`; the first gradient goes to
    the slot, the others to `extra_outs`."""
    from gpulab.measure.timing import ClockLog, L2Flusher
    from gpulab.sandbox.failure import LearnerFailure

    fn = server.function(request.function)
    reps, slots, extra = _batch_buffers(server.arenas, request)
    grad_args = list(request.grad_args)
    if server.flusher is None:
        server.flusher = L2Flusher()
    flusher = server.flusher if request.flush else None
    stream = torch.cuda.current_stream()
    warmup_s = request.warmup_s
    # A backward's lead: the GPU spins before each repetition's forward, so
    # autograd's host latency is not inside the events (batches.LEAD_CYCLES).
    lead = min(max(request.lead_cycles, 0), MAX_LEAD_CYCLES) if grad_args else 0
    timed = _TimedCall(fn, grad_args, flusher, stream, lead)
    clocks: Clocks = {}
    try:
        if warmup_s > 0:
            clocks = _warm_up(timed, reps, warmup_s, ClockLog)
        pairs, copied = _timed_reps(timed, reps, slots, extra)
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the learner's code failed while timed
        raise LearnerFailure(
            f"timing failed: {type(exc).__name__}: {exc}",
            learner.format_learner_traceback(exc, server.file),
        ) from None
    return _timed_reply(pairs, copied, timed.fwd, clocks)


def _batch_buffers(
    arenas: Arenas, request: TimeRequest
) -> tuple[list[Rep], list[torch.Tensor], list[list[torch.Tensor]]]:
    """Each repetition's (args, kwargs, grad_output), its slot, and its row of
    extra slots, as views of the arenas' whole storages (no storage object a
    tensor: cheaper, and the timed loop has no guards to tell them apart)."""
    reps = [
        (
            materialize(arenas, r.args, False),
            materialize(arenas, r.kwargs, False),
            view(arenas, r.grad_output, False) if r.grad_output is not None else None,
        )
        for r in request.inputs
    ]
    slots = [view(arenas, s, False) for s in request.outs]
    rows = request.extra_outs or tuple(() for _ in request.inputs)  # a forward: none
    extra = [[view(arenas, s, False) for s in row] for row in rows]
    return reps, slots, extra


class _TimedCall:
    """One call between `start` and `end` on `stream`. With `grad_args` the
    call is the backward: the forward runs first between events of its own
    (kept in `fwd`), then the L2 is flushed, so the backward starts cold."""

    def __init__(
        self, fn: Any, grad_args: list[int], flusher: Any, stream: Any, lead: int = 0
    ) -> None:
        self.fn, self.grad_args, self.flusher, self.stream = fn, grad_args, flusher, stream
        self.lead = lead
        self.fwd: list[tuple[Any, Any]] = []

    def __call__(self, a: list[Any], kw: Kwargs, dy: Any, start: Any, end: Any) -> Any:
        fn, stream, flusher = self.fn, self.stream, self.flusher
        if not self.grad_args:
            _RECORD(start, stream)
            out = fn(*a, **kw)
            _RECORD(end, stream)
            return out
        a = list(a)
        leaves = []
        for i in self.grad_args:
            a[i] = a[i].detach().requires_grad_()
            leaves.append(a[i])
        f_start, f_end = _event(), _event()
        if self.lead:
            _SLEEP(self.lead)
        _RECORD(f_start, stream)
        y = fn(*a, **kw)
        _RECORD(f_end, stream)
        self.fwd.append((f_start, f_end))
        if flusher is not None:
            flusher()
        _RECORD(start, stream)
        grads = torch.autograd.grad(y, leaves, dy)
        _RECORD(end, stream)
        return grads


def _warm_up(timed: _TimedCall, reps: list[Rep], warmup_s: float, clock_log: Any) -> Clocks:
    """Calls on the first set for `warmup_s` seconds, clocks logged; the
    warm-up's forward events are dropped. Returns the clocks' summary."""
    with clock_log() as log:
        until = time.perf_counter() + warmup_s
        while time.perf_counter() < until:  # warm-up by time, on the first set
            a, kw, dy = reps[0]
            e = _event()
            timed(a, kw, dy, e, e)
            torch.cuda.synchronize()
    clocks: Clocks = log.summary()
    timed.fwd.clear()
    return clocks


def _timed_reps(
    timed: _TimedCall,
    reps: list[Rep],
    slots: list[torch.Tensor],
    extra: list[list[torch.Tensor]],
) -> tuple[list[tuple[Any, Any, Any]], list[bool]]:
    """Each repetition timed (flushed first, unless the backward flushes after
    its forward), then copied out: (start, end, copied_at) events a
    repetition, and whether each result reached its slot(s)."""
    grad_args, flusher, stream = timed.grad_args, timed.flusher, timed.stream
    pairs: list[tuple[Any, Any, Any]] = []
    copied: list[bool] = []
    events = [tuple(_event() for _ in range(3)) for _ in reps]
    for (args, kwargs, dy), slot, more, (start, end, copied_at) in zip(
        reps, slots, extra, events, strict=True
    ):
        if flusher is not None and not grad_args:
            flusher()
        out = timed(args, kwargs, dy, start, end)
        if grad_args:
            out, rest = (out[0], out[1:]) if isinstance(out, (tuple, list)) else (None, [])
        copied.append(_copy_to(slot, out))
        # The copy is timed too: work hidden in it (a hook on copy_ that
        # runs the real kernel) shows up as a copy slower than a copy.
        _RECORD(copied_at, stream)
        if grad_args:
            copied[-1] = copied[-1] and all(_copy_to(t, g) for t, g in zip(more, rest, strict=True))
        pairs.append((start, end, copied_at))
    return pairs, copied


def _timed_reply(
    pairs: list[tuple[Any, Any, Any]],
    copied: list[bool],
    fwd: list[tuple[Any, Any]],
    clocks: Clocks,
) -> Timed:
    """The reply, read from the events once the batch has synchronized."""
    return Timed(
        ms=tuple(_ELAPSED(s, e) for s, e, _ in pairs),
        copy_ms=tuple(_ELAPSED(e, c) for _, e, c in pairs),
        copied=tuple(copied),
        fwd_ms=tuple(_ELAPSED(s, e) for s, e in fwd),
        clocks=clocks,
    )


def _copy_to(slot: torch.Tensor, out: Any) -> bool:
    if (
        type(out) is not torch.Tensor
        or tuple(out.shape) != tuple(slot.shape)
        or out.dtype != slot.dtype
        or out.device != slot.device
    ):
        return False
    with torch._C.DisableTorchFunction():
        _COPY(slot, out)
    return True
