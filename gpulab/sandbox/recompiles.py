"""Lesson 06's compile-once exercise in the sandbox: a stream of requests
through the learner's compiled step, and what Dynamo compiled on the way.

Dynamo compiles inside the process that calls the step, so the graphs, the
recompiles and their reasons are counted here and reported as data; the
judge checks every output itself (gpulab.judge.graders.compile_once). The counts
come from the check's own backend, which wraps each graph Dynamo hands it
and counts every call into it; Dynamo's reasons come from its compilation
metrics (the record `TORCH_LOGS=recompiles` prints from).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from gpulab.sandbox import learner
from gpulab.sandbox.dynamo import _learner_frame, _reason_text, config_changes
from gpulab.sandbox.failure import LearnerFailure
from gpulab.sandbox.tensors import materialize, view
from gpulab.wire.dynamo import (
    Compile,
    Recompile,
    Stream,
    StreamBreak,
    StreamGraph,
    StreamRequest,
    StreamStep,
)

# Dynamo's reason text with the learner's source line, as
# "... # code  # ...file.py:57 in step": the guard is before the first '#'.
_WHERE = re.compile(r'File "([^"]+)", line (\d+)')


class CountingBackend:
    """A torch.compile backend: `inner` compiles each graph Dynamo hands in;
    every graph and every call into one is counted, by request."""

    def __init__(self, inner: str) -> None:
        from torch._dynamo.backends.registry import lookup_backend

        self.inner = lookup_backend(inner)
        self.request = -1  # the request being run; -1 while compile_step runs
        self.graphs: list[StreamGraph] = []  # one per compile
        self.calls: list[int] = []  # graph index of each call, in order
        self.call_requests: list[int] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        compiled = self.inner(gm, example_inputs)
        index = len(self.graphs)
        ops = sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method"))
        self.graphs.append(StreamGraph(self.request, ops))

        def run(*args: Any) -> Any:
            self.calls.append(index)
            self.call_requests.append(self.request)
            return compiled(*args)

        return run


def _reason(text: str, file: str) -> Recompile:
    """The guard that failed (first line, Dynamo's source comment cut off)
    and the learner's line it came from, when Dynamo names one."""
    lines = [ln for ln in str(text).splitlines() if ln.strip()]
    guard = lines[0].split("#")[0].strip() if lines else ""
    # "0/2: len(lengths) == 4": the cache entry's id first.
    guard = re.sub(r"^\d+/\d+:\s*", "", guard)
    mine = str(Path(file).resolve())
    line = 0
    for m in _WHERE.finditer(str(text)):
        if str(Path(m.group(1)).resolve()) == mine:
            line = int(m.group(2))
    return Recompile(guard[:300], line)


def _compiles(metrics: list[Any], file: str) -> tuple[Compile, ...]:
    """Dynamo's record of each frame it compiled: which function, and for a
    recompile the guard that failed."""
    out = []
    for m in metrics:
        reason = getattr(m, "recompile_reason", None)
        out.append(
            Compile(
                function=str(getattr(m, "co_name", "") or "")[:80],
                recompile=_reason(reason, file) if reason else None,
                failed=str(getattr(m, "fail_reason", "") or "")[:300] or None,
            )
        )
    return tuple(out)


def _metrics() -> list[Any]:
    try:
        from torch._dynamo.utils import get_compilation_metrics

        return list(get_compilation_metrics())
    except Exception:  # noqa: BLE001 - a torch without the record: counts only
        return []


def stream_request(server: Any, msg: StreamRequest) -> Stream:
    """compile_step(backend), then every request through what it returned;
    each output copied into the judge's slot."""
    import torch._dynamo

    at_import = config_changes()  # undone: the stream runs under the defaults
    fn = server.function(msg.function)
    torch._dynamo.reset()  # (clears the graph-break record too)
    try:
        from torch._dynamo.utils import clear_compilation_metrics

        clear_compilation_metrics()
    except ImportError:
        pass
    backend = CountingBackend(msg.backend)
    try:
        run = fn(backend)
    except Exception as exc:  # noqa: BLE001 - the learner's compile_step failed
        raise _failure("compile_step(backend) failed", exc, server.file) from None
    if not callable(run):
        raise LearnerFailure(
            f"compile_step(backend) returned a {type(run).__name__}, not a callable",
            "It must return what the check calls on every request: run(x, lengths, temperature).",
        )
    requests = []
    for i, (req, slot_ref) in enumerate(zip(msg.requests, msg.outs, strict=True)):
        backend.request = i
        seen = len(_metrics())
        x, lengths, temperature = materialize(server.arenas, req)
        try:
            out = run(x, lengths, temperature)
        except Exception as exc:  # noqa: BLE001 - the learner's step failed
            torch._dynamo.reset()
            raise _failure(f"request {i} failed", exc, server.file) from None
        slot = view(server.arenas, slot_ref)
        ok = (
            type(out) is torch.Tensor
            and tuple(out.shape) == tuple(slot.shape)
            and out.dtype == slot.dtype
            and out.device.type == slot.device.type
        )
        if ok:
            with torch.no_grad():
                slot.copy_(out.detach())
        requests.append(StreamStep(ok, _compiles(_metrics()[seen:], server.file)))
    report = Stream(
        config_at_import=tuple(at_import),
        config_changed=tuple(config_changes()),
        graphs=tuple(backend.graphs),
        calls=tuple(backend.call_requests),
        requests=tuple(requests),
        graph_breaks=_breaks(server.file),
    )
    torch._dynamo.reset()
    return report


def _breaks(file: str) -> tuple[StreamBreak, ...]:
    """Dynamo's graph breaks: the learner's line and what kind of break."""
    from torch._dynamo.utils import graph_break_reasons

    out = []
    for r in list(graph_break_reasons)[:20]:
        frame = _learner_frame(r.user_stack, file)
        out.append(StreamBreak(frame.lineno if frame else 0, _reason_text(r.reason)[:300]))
    return tuple(out)


def _failure(what: str, exc: BaseException, file: str) -> LearnerFailure:
    tb = learner.format_learner_traceback(exc, file)
    return LearnerFailure(f"{what}: {learner.error_line(exc, tb)}", tb)
