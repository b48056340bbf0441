"""Lesson 07 in the sandbox: the learner's train_step, run and profiled.

The judge sends the model's initial weights and the batch (shared memory);
this module builds the model around them, runs the steps through the
learner's `train_step`, profiles one of them, and sends back the losses,
the final weights (into the judge's slots) and the profile's events as plain
data. The judge trains its own copy and applies the range rules
(gpulab.judge.nvtx_ranges): the verdict is its own. The events are this
process's report, like Dynamo's trace for lesson 06.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from gpulab.sandbox.tensors import view
from gpulab.wire.replies import Raised
from gpulab.wire.training import KernelRow, OpRow, ProfileEvent, Trained, TrainRequest

LR, MOMENTUM = 0.1, 0.9
RANGES = ("train_step", "forward", "loss", "backward", "optimizer_step")
MAX_EVENTS = 20000


def build_model(device: str) -> tuple[nn.Module, torch.optim.Optimizer]:
    """The lesson's model and optimizer, weights as torch initialises them
    (the judge seeds them and sends its own)."""
    model = nn.Sequential(
        nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 10)
    ).to(device)
    return model, torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def train_request(server: Any, msg: TrainRequest) -> Trained | Raised:
    from gpulab.sandbox.learner import LearnerError

    try:
        return _train(server, msg)
    except LearnerError as exc:
        return Raised(exc.summary, exc.message)


def _train(server: Any, msg: TrainRequest) -> Trained:
    from gpulab.sandbox import learner

    fn = server.function(msg.function)
    device = server.device
    if device == "cpu":
        # Tiny tensors: waking OpenMP threads costs more than the work (an op
        # took ~16 ms instead of ~30 µs on a busy 2-core machine).
        torch.set_num_threads(1)
    model, optimizer = build_model(device)
    params = list(model.parameters())
    start = [view(server.arenas, r) for r in msg.params]
    if len(start) != len(params):
        raise ValueError("the judge's weights do not fit the model")
    with torch.no_grad():
        for p, w in zip(params, start, strict=True):
            p.copy_(w)
    x, y = (view(server.arenas, r).clone() for r in msg.batch)
    steps, profiled = msg.steps, msg.profiled
    losses: list[float] = []
    prof: Any = None
    nvtx = NvtxLog() if device == "cuda" else None
    for i in range(steps):
        if i == profiled:
            out, prof = _profiled_step(fn, server.file, model, (x, y), optimizer, nvtx)
        else:
            out = learner.call(fn, server.file, model, (x, y), optimizer)
        if not (isinstance(out, torch.Tensor) and out.numel() == 1):
            return Trained(losses=tuple(losses), returned=type(out).__name__)
        losses.append(float(out.detach()))
    with torch.no_grad():
        for p, r in zip(params, msg.final, strict=True):
            view(server.arenas, r).copy_(p.detach())
    cuda = device == "cuda"
    return Trained(
        losses=tuple(losses),
        events=tuple(cpu_events(prof)[:MAX_EVENTS]),
        top_ops=top_ops(prof, device),
        top_kernels=top_kernels(prof) if cuda else (),
        nvtx=tuple(sorted(set(nvtx.names))) if nvtx else (),
        trace_error=_write_trace(prof, msg.trace),
    )


def _profiled_step(
    fn: Any, file: str, model: nn.Module, batch: tuple[Any, ...], optimizer: Any, nvtx: Any
) -> tuple[Any, Any]:
    from torch.profiler import ProfilerActivity, profile

    from gpulab.sandbox import learner

    cuda = torch.cuda.is_available() and next(model.parameters()).is_cuda
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    if cuda:
        torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        if nvtx is not None:
            with nvtx:
                out = learner.call(fn, file, model, batch, optimizer)
        else:
            out = learner.call(fn, file, model, batch, optimizer)
        if cuda:
            torch.cuda.synchronize()
    return out, prof


def _write_trace(prof: Any, path: Any) -> str:
    if not isinstance(path, str) or not path:
        return ""
    try:
        prof.export_chrome_trace(path)
    except OSError as exc:
        return str(exc)
    return ""


def cpu_events(prof: Any) -> list[ProfileEvent]:
    """The profile's host-side events (name, start, end in µs)."""
    out = []
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CPU:
            continue  # the GPU-side copies of ranges and the kernels
        # is_user_annotation marks record_function ranges (None on an older torch).
        user = getattr(e, "is_user_annotation", None)
        out.append(ProfileEvent(e.name, e.time_range.start, e.time_range.end, user))
    return out


def top_ops(prof: Any, device: str, n: int = 12) -> tuple[OpRow, ...]:
    rows = []
    names = range_names(prof)
    for a in prof.key_averages():
        if a.key in RANGES or is_device_range(a, names):
            continue
        self_dev = getattr(a, "self_device_time_total", None)
        if self_dev is None:
            self_dev = getattr(a, "self_cuda_time_total", 0)
        rows.append(
            OpRow(
                name=a.key,
                calls=a.count,
                self_cpu_ms=a.self_cpu_time_total / 1e3,
                cpu_total_ms=a.cpu_time_total / 1e3,
                self_device_ms=(self_dev or 0) / 1e3,
            )
        )
    if device == "cuda":
        rows.sort(key=lambda r: r.self_device_ms, reverse=True)
    else:
        rows.sort(key=lambda r: r.self_cpu_ms, reverse=True)
    return tuple(rows[:n])


# Kineto's name for a record_function range as the GPU timeline saw it.
GPU_ANNOTATION = "gpu_user_annotation"
USER_SCOPE = 7  # torch.autograd.RecordScope.USER_SCOPE: record_function's scope


def range_names(prof: Any) -> set[str]:
    """The names of the profile's record_function ranges, from the host side,
    where both torch versions flag them (is_user_annotation, USER_SCOPE): the
    learner's, `Optimizer.step#SGD.step`, `ProfilerStep#3`..."""
    names = set(RANGES)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CPU and (
            getattr(e, "is_user_annotation", None) or getattr(e, "scope", None) == USER_SCOPE
        ):
            names.add(e.name)
    return names


def is_device_range(e: Any, names: set[str]) -> bool:
    """Whether a device-side event (or key_averages row) is a range, not GPU work.

    torch.profiler copies each record_function range onto the GPU's timeline
    under the range's own name (Kineto's gpu_user_annotation, device CUDA),
    spanning the range's first kernel to its last, gaps included (on the
    H200, `Optimizer.step#SGD.step` spanned 0.146 ms, more than the step's
    kernels took together).
    torch 2.13 says so in activity_type, is_user_annotation may say so, and
    on any version the name is a host range's."""
    if e.device_type == torch.autograd.DeviceType.CPU:
        return False
    return bool(
        getattr(e, "activity_type", None) == GPU_ANNOTATION
        or getattr(e, "is_user_annotation", None)
        or e.key in names
    )


def top_kernels(prof: Any, n: int = 10) -> tuple[KernelRow, ...]:
    """The GPU's work by device time: kernels (and copies, memsets), never a
    range (is_device_range)."""
    total: dict[str, list[float]] = {}
    names = range_names(prof)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and not is_device_range(e, names):
            total.setdefault(e.name, []).append(e.time_range.elapsed_us())
    rows = [KernelRow(k, len(v), sum(v) / 1e3) for k, v in total.items()]
    rows.sort(key=lambda r: r.device_ms, reverse=True)
    return tuple(rows[:n])


class NvtxLog:
    """Records torch.cuda.nvtx range names pushed while active (GPU only):
    nsys shows exactly these ranges, so the result can say what it will see."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def __enter__(self) -> NvtxLog:
        import torch.cuda.nvtx as nvtx

        self._nvtx = nvtx
        self._push: Callable[..., Any] = nvtx.range_push  # (untyped in torch)

        def push(msg: str, *a: Any, **k: Any) -> Any:
            self.names.append(str(msg))
            return self._push(msg, *a, **k)

        nvtx.range_push = push
        return self

    def __exit__(self, *exc: object) -> None:
        self._nvtx.range_push = self._push
