"""Lesson 06 in the sandbox: what only the learner's process can see.

Dynamo traces the learner's step where the step lives, so the graphs, the
breaks and the graph's targets are reported from here (the judge reads them
as a report, not a verdict). The step's outputs, eager and compiled, go to
slots the judge owns; the judge compares them with its own original step.

Dynamo's config is snapshotted before the learner's file is imported
(`snapshot()`, called from the sandbox's load), so a file that changes it at
import or while the step runs is seen, and the change undone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gpulab.sandbox import learner
from gpulab.sandbox.tensors import materialize, view
from gpulab.wire.dynamo import (
    CompiledSteps,
    CompileRequest,
    DynamoBreak,
    DynamoConfig,
    DynamoConfigRequest,
    DynamoRequest,
    DynamoTrace,
    ModeRow,
    Modes,
    ModesRequest,
    Traced,
)

# Dynamo's config by name before the file ran: any values, only compared
# with the config's after it and put back.
_BEFORE: dict[str, object] | None = None
_TORCH_OPS: frozenset[str] = frozenset()

# What each kind of break means, matched on Dynamo's reason text (which
# differs between torch versions, hence several spellings).
_KINDS = (
    (("`print`", "builtin print"), "I/O cannot go into a graph"),
    (
        ("generic_jump", "data-dependent branching"),
        "a Python branch on a tensor's value, unknown while tracing",
    ),
    (("tensor.item()",), "`.item()` copies a tensor value to Python"),
    (
        ("_local_scalar_dense", "data dependent operator", "tolist"),
        "a tensor value turned into Python numbers (.tolist(), float(t), int(t))",
    ),
    (("numpy",), "a NumPy function Dynamo cannot trace"),
    (("skip", "disable"), "a call Dynamo was told, or chose, not to trace"),
)
_PLAIN_MODULES = ("torch", "_operator", "operator", "math", "builtins", "numpy")


def snapshot() -> None:
    """Before the learner's file runs: Dynamo's config, and every operator
    registered (an op the file defines in the aten namespace is not torch's)."""
    global _BEFORE, _TORCH_OPS
    import torch._dynamo.config as dynamo_config

    _BEFORE = dynamo_config.get_config_copy()
    _TORCH_OPS = frozenset(n.split(".")[0] for n in torch._C._dispatch_get_all_op_names())


def config_changes() -> list[str]:
    """Keys the learner's code changed since the snapshot; each is undone."""
    import torch._dynamo.config as dynamo_config

    if _BEFORE is None:
        return []
    changed = []
    for key, value in dynamo_config.get_config_copy().items():
        try:
            same = _BEFORE.get(key) == value
        except Exception:  # noqa: BLE001 - odd config values
            same = repr(_BEFORE.get(key)) == repr(value)
        if not same:
            changed.append(key)
            setattr(dynamo_config, key, _BEFORE.get(key))
    return changed


def _reason_text(reason: str) -> str:
    """First line of Dynamo's reason, with what that kind of break means.
    Dynamo's own hints mostly suggest config flags (capture_scalar_outputs),
    which this exercise does not allow, so they are left out."""
    lines = [ln.strip() for ln in str(reason).splitlines() if ln.strip()]
    text = lines[0] if lines else "graph break"
    low = str(reason).lower()
    kind = next((meaning for keys, meaning in _KINDS if any(k.lower() in low for k in keys)), "")
    return f"{text} ({kind})" if kind else text


def _learner_frame(stack: list[Any], file: str) -> Any:
    mine = str(Path(file).resolve())
    frames = [f for f in stack or [] if str(Path(f.filename).resolve()) == mine]
    return frames[-1] if frames else (stack[-1] if stack else None)


def _qualified(t: Any) -> str:
    """`aten::masked_fill` for an op packet and an overload alike."""
    name = str(getattr(t, "_qualified_op_name", None) or t.name())
    return name.split(".")[0]


def opaque_targets(graphs: list[torch.fx.GraphModule]) -> list[str]:
    """Graph nodes that hide computation from Dynamo: allow_in_graph'd Python
    functions and custom ops (anything outside torch's own operators)."""
    bad = set()
    for gm in graphs:
        for node in gm.graph.nodes:
            if node.op != "call_function":
                continue
            t = node.target
            if isinstance(t, torch._ops.HigherOrderOperator):
                continue  # torch.cond, torch.while_loop: their bodies are graphs too
            if isinstance(t, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
                name = _qualified(t)
                if name.split("::")[0] not in ("aten", "prims") or name not in _TORCH_OPS:
                    bad.add(str(t))
                continue
            module = getattr(t, "__module__", None) or ""
            if module.split(".")[0] not in _PLAIN_MODULES:
                qualname = getattr(t, "__qualname__", None)
                bad.add(qualname if qualname else getattr(t, "__name__", str(t)))
    return sorted(bad)


def trace(fn: Any, args: tuple[Any, ...], file: str, *, fullgraph: bool = False) -> DynamoTrace:
    """Run `fn` under Dynamo with a recording backend (no compiler).

    `torch._dynamo.explain` reports graph_count - 1 as the break count, which
    misses a break before the first op (an empty graph is never compiled);
    the global list of break reasons has them all, so that is what is read.
    """
    import torch._dynamo
    from torch._dynamo.utils import graph_break_reasons

    torch._dynamo.reset()
    graphs: list[torch.fx.GraphModule] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(gm)
        return gm.forward

    compiled: Callable[..., Any] = torch.compile(fn, backend=backend, fullgraph=fullgraph)
    error = None
    try:
        compiled(*args)
    except torch._dynamo.exc.Unsupported as exc:  # fullgraph=True met a break
        error = exc
    except Exception as exc:  # noqa: BLE001 - the learner's own error
        torch._dynamo.reset()
        tb = learner.format_learner_traceback(exc, file)
        raise learner.LearnerError(
            f"your step failed under torch.compile: {learner.error_line(exc, tb)}", tb
        ) from None
    # By the learner's line: its code and Dynamo's reasons, each once.
    breaks: dict[int, tuple[str, list[str]]] = {}
    for r in list(graph_break_reasons):
        frame = _learner_frame(r.user_stack, file)
        line = frame.lineno if frame else 0
        _, reasons = breaks.setdefault(line, ((frame.line or "").strip() if frame else "", []))
        text = _reason_text(r.reason)
        if text not in reasons:
            reasons.append(text)
    if error is not None:
        frame = _learner_frame(getattr(error, "real_stack", None) or [], file)
        line = frame.lineno if frame else 0
        if line not in breaks:
            code = (frame.line or "").strip() if frame else ""
            breaks[line] = (code, [_reason_text(str(error))])
    ops = [
        n
        for gm in graphs
        for n in gm.graph.nodes
        if n.op in ("call_function", "call_method", "call_module")
    ]
    report = DynamoTrace(
        graphs=len(graphs),
        breaks=tuple(
            DynamoBreak(line, code, tuple(reasons))
            for line, (code, reasons) in sorted(breaks.items())
        ),
        op_count=len(ops),
        error=None if error is None else str(error)[:2000],
        opaque=tuple(opaque_targets(graphs)),
    )
    torch._dynamo.reset()
    return report


def dynamo_request(server: Any, msg: DynamoRequest) -> Traced:
    """Trace the step on the judge's inputs (plain, then fullgraph=True)."""
    from gpulab.sandbox.failure import LearnerFailure

    fn = server.function(msg.function)
    args = materialize(server.arenas, msg.args)
    disabled = bool(
        getattr(fn, "_torchdynamo_disable", False) or hasattr(fn, "_torchdynamo_orig_callable")
    )
    try:
        plain = trace(fn, tuple(args), server.file)
        full = (
            trace(fn, tuple(materialize(server.arenas, msg.args)), server.file, fullgraph=True)
            if not plain.breaks
            else None
        )
    except learner.LearnerError as exc:
        raise LearnerFailure(exc.summary, exc.message) from None
    return Traced(
        plain=plain,
        full=full,
        disabled=disabled,
        config_changed=tuple(config_changes()),
    )


def compiled_request(server: Any, msg: CompileRequest) -> CompiledSteps:
    """torch.compile(step, backend, fullgraph=True) on each input set; each
    output copied into the judge's slot."""
    import torch._dynamo

    from gpulab.sandbox.failure import LearnerFailure

    fn = server.function(msg.function)
    torch._dynamo.reset()
    compiled: Callable[..., Any] = torch.compile(fn, backend=msg.backend, fullgraph=True)
    copied = []
    for args_json, slot_ref in zip(msg.inputs, msg.outs, strict=True):
        args = materialize(server.arenas, args_json)
        try:
            out = compiled(*args)
        except Exception as exc:  # noqa: BLE001 - the learner's step failed compiled
            torch._dynamo.reset()
            tb = learner.format_learner_traceback(exc, server.file)
            raise LearnerFailure(
                f"torch.compile({msg.backend}) of your step failed: {learner.error_line(exc, tb)}",
                tb,
            ) from None
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
        copied.append(ok)
    torch._dynamo.reset()
    return CompiledSteps(tuple(copied), tuple(config_changes()))


def config_request(server: Any, msg: DynamoConfigRequest) -> DynamoConfig:
    """Dynamo config changes since the snapshot (undone), and whether the
    step is wrapped so Dynamo never traces it."""
    fn = server.function(msg.function)
    disabled = bool(
        getattr(fn, "_torchdynamo_disable", False) or hasattr(fn, "_torchdynamo_orig_callable")
    )
    return DynamoConfig(tuple(config_changes()), disabled)


def count_kernels(run: Any) -> int:
    """GPU kernels one call launches, counted with torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    return sum(
        1
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA
        and "Memcpy" not in e.name
        and "Memset" not in e.name
    )


def _variant(fn: Any, mode: str | None, args: list[Any]) -> tuple[Any, float | None]:
    """The step eagerly, or torch.compile(step, mode=mode) compiled and warmed
    (with its compile time)."""
    import time

    import torch._dynamo

    if mode is None:
        return (lambda: fn(*args)), None
    torch._dynamo.reset()  # one mode's cache at a time
    compiled: Callable[..., Any] = torch.compile(fn, mode=mode)

    def call() -> Any:
        if mode == "reduce-overhead":
            # Each call is a new step: CUDA-graph outputs may be reused.
            step_begin: Callable[[], None] = torch.compiler.cudagraph_mark_step_begin
            step_begin()  # (untyped in torch)
        return compiled(*args)

    t0 = time.perf_counter()
    with torch.no_grad():
        call()
        call()  # reduce-overhead records its CUDA graph on a later call
    torch.cuda.synchronize()
    return call, time.perf_counter() - t0


def modes_request(server: Any, msg: ModesRequest) -> Modes:
    """Time the step eagerly and under each torch.compile mode (GPU), each
    output copied into the judge's slot for checking."""
    import torch._dynamo

    from gpulab.measure.timing import L2Flusher, measure
    from gpulab.sandbox.failure import LearnerFailure

    fn = server.function(msg.function)
    args = materialize(server.arenas, msg.args)
    slots = [view(server.arenas, s) for s in msg.outs]
    flusher = L2Flusher()
    rows = []
    try:
        for mode, slot in zip(msg.modes, slots, strict=True):
            if mode not in (None, "default", "reduce-overhead"):
                raise ValueError(f"unknown torch.compile mode {mode!r}")
            run, compile_s = _variant(fn, mode, args)
            with torch.no_grad():
                t = measure(run, flusher=flusher, log_clocks=False)
                out = run().clone()
                kernels = count_kernels(run)
            if type(out) is torch.Tensor and out.shape == slot.shape and out.dtype == slot.dtype:
                slot.copy_(out)
            rows.append(
                ModeRow.parse(
                    {
                        **{k: v for k, v in t.items() if isinstance(v, (int, float))},
                        "kernels": kernels,
                        "compile_s": compile_s,
                    }
                )
            )
    except ValueError as exc:
        if "unknown torch.compile mode" in str(exc):
            raise
        tb = learner.format_learner_traceback(exc, server.file)
        raise LearnerFailure(
            f"timing your step failed: {learner.error_line(exc, tb)}", tb
        ) from None
    except Exception as exc:  # noqa: BLE001 - the learner's step failed while timed
        tb = learner.format_learner_traceback(exc, server.file)
        raise LearnerFailure(
            f"timing your step failed: {learner.error_line(exc, tb)}", tb
        ) from None
    finally:
        torch._dynamo.reset()
    return Modes(tuple(rows))
