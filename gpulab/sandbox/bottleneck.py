"""Lesson 07's find-the-bottleneck step in the sandbox: the learner's block
called on the judge's inputs, and one call of it profiled.

Every output goes into a slot the judge owns; the judge compares it with its
own reference and times each request with its own clock
(gpulab.judge.graders.find_bottleneck). The profile's rows and the BOTTLENECK
string are this process's report, as plain data: the judge holds the verdict
and cross-checks the profile's times against its clock.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import torch

from gpulab.sandbox import learner
from gpulab.sandbox.failure import LearnerFailure
from gpulab.sandbox.tensors import view
from gpulab.wire.protocol import TensorRef
from gpulab.wire.training import BlockOp, Blocks, BottleneckRequest, KernelRow

MAX_ROWS = 200  # operator rows sent back (the judge looks up its operator there)


def block_request(server: Any, msg: BottleneckRequest) -> Blocks:
    """Call the block once per input (each output copied to its slot); with
    `profile`, the calls run under torch.profiler."""
    fn = server.function(msg.function)
    if server.device == "cpu":
        torch.set_num_threads(1)  # as in the judge, which times the original so
    weights = {k: view(server.arenas, r, own_storage=False) for k, r in msg.weights.items()}
    pairs = list(zip(msg.inputs, msg.outs, strict=True))
    answer, kind = _answer(server)
    if msg.profile:
        xs = [view(server.arenas, x_ref, own_storage=False) for x_ref, _ in pairs]
        outs, report = _profiled(fn, server.file, xs, weights, msg.trace)
        copied = tuple(_copy(o, s, server) for o, (_, s) in zip(outs, pairs, strict=True))
        return replace(report, answer=answer, answer_type=kind, copied=copied)
    copies = []
    start = time.perf_counter()
    for x_ref, slot_ref in pairs:
        x = view(server.arenas, x_ref, own_storage=False)
        copies.append(_copy(_call(fn, server.file, x, weights), slot_ref, server))
    seconds = time.perf_counter() - start  # the sandbox's own figure: a note only
    return Blocks(answer=answer, answer_type=kind, copied=tuple(copies), seconds=seconds)


def _answer(server: Any) -> tuple[str | None, str]:
    """The file's BOTTLENECK when it is a string, else None and its type's name."""
    value = getattr(server.module, "BOTTLENECK", None)
    if isinstance(value, str):
        return str.__str__(value)[:200], "str"
    return None, type(value).__name__


def _call(fn: Any, file: str, x: torch.Tensor, weights: dict[str, torch.Tensor]) -> Any:
    try:
        return learner.call(fn, file, x, weights)
    except learner.LearnerError as exc:
        raise LearnerFailure(exc.summary, exc.message) from None


def _copy(out: Any, slot_ref: TensorRef, server: Any) -> bool:
    slot = view(server.arenas, slot_ref, own_storage=False)
    ok = (
        isinstance(out, torch.Tensor)
        and tuple(out.shape) == tuple(slot.shape)
        and out.dtype == slot.dtype
        and out.device.type == slot.device.type
    )
    if ok:
        with torch.no_grad():
            slot.copy_(out.detach())
    return ok


def _profiled(
    fn: Any, file: str, xs: list[torch.Tensor], weights: dict[str, torch.Tensor], trace: Any
) -> tuple[list[Any], Blocks]:
    """The calls under torch.profiler, one after another (several, so that a
    pause of the machine inside one operator weighs less); the profile's
    figures as the reply holds them."""
    from torch.profiler import ProfilerActivity, profile

    cuda = xs[0].is_cuda
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    if cuda:
        torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        outs = [_call(fn, file, x, weights) for x in xs]  # (each synchronizes on a GPU)
        wall = time.perf_counter() - start
    rows = op_rows(prof)
    kernels: tuple[KernelRow, ...] = ()
    if cuda:
        from gpulab.sandbox.training import top_kernels

        kernels = top_kernels(prof)
    return outs, Blocks(
        calls=len(xs),
        wall_s=wall,
        cpu_total_us=sum(r.self_cpu_us for r in rows),
        ops=tuple(sorted(rows, key=lambda r: r.cpu_total_us, reverse=True)[:MAX_ROWS]),
        top_kernels=kernels,
        trace_error=_write_trace(prof, trace),
    )


def op_rows(prof: Any) -> list[BlockOp]:
    """torch.profiler's table as data (times in µs), one row per operator
    (a range as the GPU saw it is no operator: gpulab.sandbox.training)."""
    from gpulab.sandbox.training import is_device_range, range_names

    rows = []
    names = range_names(prof)
    for a in prof.key_averages():
        if is_device_range(a, names):
            continue
        self_dev = getattr(a, "self_device_time_total", None)
        if self_dev is None:
            self_dev = getattr(a, "self_cuda_time_total", 0)
        rows.append(BlockOp(a.key, a.count, a.self_cpu_time_total, a.cpu_time_total, self_dev or 0))
    return rows


def _write_trace(prof: Any, path: Any) -> str:
    if not isinstance(path, str) or not path:
        return ""
    try:
        prof.export_chrome_trace(path)
    except OSError as exc:
        return str(exc)
    return ""
