"""Lesson 06's reduce-overhead step in the sandbox: the learner's timing
method on simulated devices, their compiled step on the judge's inputs,
and runs of that step for the judge's clock.

Everything here is the learner's process reporting on itself: the judge
checks every output against its own reference, knows what each simulated
device's true time per call is, and on a GPU times the compiled step
itself, around whole requests (gpulab.judge.graders.reduce_overhead).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from gpulab.sandbox import learner
from gpulab.sandbox.failure import LearnerFailure
from gpulab.sandbox.tensors import view
from gpulab.wire.dynamo import Overhead, OverheadRequest, Scenario
from gpulab.wire.protocol import Kwargs, number

# What torch.compile may be asked that means CUDA graphs: a mode whose
# Inductor options include them, Inductor's option itself, or the backend
# that does nothing else.
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")


class SimulatedDevice:
    """A device that runs asynchronously, as a GPU does: each call costs the
    host `launch` seconds and queues `work` seconds of device time, which
    runs while the host goes on; `sync` waits until the queue is empty. The
    first `slow_calls` calls cost the host `slow` seconds each (compiling,
    then recording a CUDA graph). Once warm, a call costs max(launch, work)."""

    def __init__(self, scenario: Scenario) -> None:
        launch_ms, work_ms, self.slow_calls, slow_ms = scenario
        self.launch, self.work, self.slow = launch_ms / 1e3, work_ms / 1e3, slow_ms / 1e3
        self.calls = 0
        self.free_at = 0.0

    def step(self, x: Any) -> Any:
        self.calls += 1
        time.sleep(self.slow if self.calls <= self.slow_calls else self.launch)
        self.free_at = max(self.free_at, time.perf_counter()) + self.work
        return x

    def sync(self) -> None:
        wait = self.free_at - time.perf_counter()
        if wait > 0:
            time.sleep(wait)


@dataclass(frozen=True, slots=True)
class CompiledStep:
    """The learner's model and the step their `compile_step` made of it,
    kept by the server (its `overhead`) from the request that compiled them
    for the runs the judge times."""

    model: Any
    step: Any


def overhead_request(server: Any, msg: OverheadRequest) -> Overhead:
    with torch.no_grad():
        if msg.part == "method":
            return _method(server, msg.scenarios)
        if msg.part == "compile":
            return _compile(server, msg)
        if msg.part == "run":
            return _run(server, msg)
        return _report(server, msg)


def _method(server: Any, scenarios: tuple[Scenario, ...]) -> Overhead:
    fn = server.function("time_per_call")
    measured: list[float | None] = []
    errors: list[str] = []
    for scenario in scenarios:
        device = SimulatedDevice(scenario)
        try:
            got = learner.call(fn, server.file, device.step, torch.zeros(4), device.sync)
        except learner.LearnerError as exc:
            measured.append(None)
            errors.append(exc.summary)
            continue
        value = number(got) if isinstance(got, (int, float)) else None
        measured.append(value)
        errors.append("" if value is not None else f"returned {type(got).__name__}, not a number")
    return Overhead(measured=tuple(measured), errors=tuple(errors))


@contextlib.contextmanager
def recording_compile(device: str) -> Iterator[list[Kwargs]]:
    """torch.compile, its calls' settings recorded. On the CPU (no CUDA
    graphs there) each compiles with Dynamo's eager backend instead: the
    graph is captured and run as it is, without Inductor's C++ build."""
    real = torch.compile
    calls: list[Kwargs] = []  # each call's keyword arguments

    def compile_(model: Any = None, **kwargs: Any) -> Any:
        calls.append(dict(kwargs))
        if device != "cuda":
            kwargs = {k: v for k, v in kwargs.items() if k not in ("mode", "options", "backend")}
            kwargs["backend"] = "eager"
        return real(**kwargs) if model is None else real(model, **kwargs)

    torch.compile = compile_  # a recorder in its place
    try:
        yield calls
    finally:
        torch.compile = real


def asks_cudagraphs(kwargs: Kwargs) -> bool:
    options = kwargs.get("options")
    return (
        kwargs.get("mode") in CUDAGRAPH_MODES
        or kwargs.get("backend") == "cudagraphs"
        or (isinstance(options, dict) and options.get("triton.cudagraphs") is True)
    )


def _describe(kwargs: Kwargs) -> str:
    said = {k: kwargs[k] for k in ("mode", "options", "backend") if k in kwargs}
    return ", ".join(f"{k}={v!r}"[:120] for k, v in said.items()) or "no mode"


def _model(server: Any, msg: OverheadRequest) -> Any:
    """The learner's Model with the judge's weights, on the device."""
    cls = getattr(server.module, "Model", None)
    if not callable(cls):
        raise LearnerFailure(
            "your file does not define the class Model",
            "Leave the starter's Model as it is: the check builds it with its own weights.",
        )
    weights = {k: view(server.arenas, r, own_storage=False) for k, r in msg.weights.items()}
    try:
        model = learner.call(cls, server.file)
        learner.call(model.load_state_dict, server.file, weights)
    except learner.LearnerError as exc:
        raise LearnerFailure(exc.summary, exc.message) from None
    return model.to(server.device).eval()


def _call(fn: Callable[..., Any], file: str, *args: Any) -> Any:
    try:
        return learner.call(fn, file, *args)
    except learner.LearnerError as exc:
        raise LearnerFailure(exc.summary, exc.message) from None


def _copy(out: Any, ref: Any, server: Any) -> bool:
    slot = view(server.arenas, ref, own_storage=False)
    ok = (
        type(out) is torch.Tensor
        and tuple(out.shape) == tuple(slot.shape)
        and out.dtype == slot.dtype
        and out.device.type == slot.device.type
    )
    if ok:
        slot.copy_(out.detach())
    return ok


def _compile(server: Any, msg: OverheadRequest) -> Overhead:
    model = _model(server, msg)
    with recording_compile(server.device) as calls:
        step = _call(server.function("compile_step"), server.file, model)
    server.overhead = CompiledStep(model, step)
    copied = []
    for x_ref, out_ref in zip(msg.inputs, msg.outs, strict=True):
        x = view(server.arenas, x_ref, own_storage=False)
        copied.append(_copy(_call(step, server.file, x), out_ref, server))
    return Overhead(
        compiles=tuple(_describe(c) for c in calls),
        cudagraphs=tuple(asks_cudagraphs(c) for c in calls),
        copied=tuple(copied),
    )


def _sync(server: Any) -> Callable[[], None]:
    return torch.cuda.synchronize if server.device == "cuda" else (lambda: None)


def _compiled(server: Any) -> CompiledStep:
    kept = getattr(server, "overhead", None)
    if not isinstance(kept, CompiledStep):
        raise LearnerFailure("the step was run before it was compiled (gpulab's own error)")
    return kept


def _run(server: Any, msg: OverheadRequest) -> Overhead:
    step = _compiled(server).step
    x = view(server.arenas, msg.inputs[0], own_storage=False)
    out = None
    for _ in range(max(msg.calls, 1)):
        out = _call(step, server.file, x)
    _sync(server)()
    return Overhead(copied=(_copy(out, msg.outs[0], server),))


def _report(server: Any, msg: OverheadRequest) -> Overhead:
    kept = _compiled(server)
    x = view(server.arenas, msg.inputs[0], own_storage=False)
    fn, sync = server.function("time_per_call"), _sync(server)
    eager = _call(fn, server.file, kept.model, x, sync)
    step = _call(fn, server.file, kept.step, x, sync)
    return Overhead(
        eager_ms=number(eager) if isinstance(eager, (int, float)) else None,
        step_ms=number(step) if isinstance(step, (int, float)) else None,
    )
