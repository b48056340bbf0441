"""Timing a learner's kernel from the judge, in batches on fresh inputs.

The sandbox times each call with CUDA events (as gpulab.device.timing does
for the bench), but its numbers are only a claim. The judge:

1. draws every repetition's inputs fresh from its own generator (same
   shapes, strides and distribution as the case), so no answer can be cached;
2. checks every repetition's output against its own reference, so work
   skipped in the timed region shows up as a wrong answer;
3. measures the wall-clock time of the whole batch itself and refuses a
   claim that leaves more time unexplained than the L2 flushes and result
   copies (timed by the judge on the same GPU) and a small launch allowance:
   work moved between the timed regions shows up there.

docs/grading.md states what this does and does not guarantee.
"""

from __future__ import annotations

import math
import statistics
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from gpulab.device.timing import _stats
from gpulab.grading import learner
from gpulab.grading.compare import compare, describe_mismatch
from gpulab.protocol import numbers, text

MAX_REPS = 40
BATCH_REPS = 20
WARMUP_S = 0.2
REL_ERR = 0.01
# Per repetition, on top of the judge-timed flush and copy: the gaps
# between launches, and a share of the claim for event and clock noise.
GAP_MS, GAP_SHARE = 0.05, 0.10
FIXED_ALLOWANCE_MS = 5.0
# The result's copy out, timed in the sandbox, against the judge's own copy.
COPY_SLACK, COPY_FLOOR_MS = 1.5, 0.02
GROSS_MS = 0.5


@dataclass
class Backward:
    """Time the backward instead: the gradients of `grad_args` for a fresh
    upstream gradient each repetition. `reference(rep, dy)` gives the
    expected gradients, `tolerance(ref, dtype)` their (atol, rtol);
    `forward_ms` is the learner's forward as the judge timed it, which bounds
    the forward the sandbox runs (untimed) before each backward."""

    grad_args: tuple[int, ...]
    y_shape: tuple[int, ...]
    y_dtype: torch.dtype
    reference: Callable[[Any, torch.Tensor], tuple[torch.Tensor, ...]]
    tolerance: Callable[[torch.Tensor, torch.dtype], tuple[float, float]]
    forward_ms: float
    labels: tuple[str, ...] = ()  # "dx", "dweight": how failures name the gradients


# A forward claim beyond this (x the judged forward, + the floor) hides work.
FWD_SLACK, FWD_FLOOR_MS = 2.5, 0.05


def fresh_like(t: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """A tensor with t's dtype, shape, strides and storage size, its values
    drawn afresh with t's mean and spread (integers and bools kept)."""
    if not t.is_floating_point():
        return t.clone()
    st = t.untyped_storage()
    n = st.nbytes() // t.element_size()
    finite = t[torch.isfinite(t)].float() if t.numel() else t.float()
    mean = float(finite.mean()) if finite.numel() else 0.0
    std = float(finite.std()) if finite.numel() > 1 else 1.0
    base = torch.randn(n, generator=g, device=t.device, dtype=torch.float32)
    base = (base * std + mean).to(t.dtype)
    return torch.as_strided(base, t.shape, t.stride(), t.storage_offset())


def fresh_case(case: Any, g: torch.Generator) -> Any:
    made: dict[int, torch.Tensor] = {}

    def swap(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            if id(v) not in made:
                made[id(v)] = fresh_like(v, g)
            return made[id(v)]
        return v

    return replace(
        case,
        args=tuple(swap(a) for a in case.args),
        kwargs={k: swap(v) for k, v in case.kwargs.items()},
    )


def mismatches(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> int:
    """compare()'s rule, counted on the device (the full report, on the CPU,
    is only built for a failure)."""
    if out.shape != ref.shape:
        return max(out.numel(), 1)
    o, r = out.to(ref.device, torch.float64), ref.to(torch.float64)
    close = (o - r).abs() <= atol + rtol * r.abs()
    ok = close | (o.isnan() & r.isnan()) | ((o == r) & o.isinf())
    return int((~ok).sum())


class _GradSlots:
    """The extra inputs and slots of a backward batch: a fresh dy per
    repetition, and a slot for each gradient after the first."""

    def __init__(self, backward: Backward, case: Any) -> None:
        self.b, self.case = backward, case
        self.like = [case.args[i] for i in backward.grad_args]

    def extra_bytes(self) -> int:
        dy = math.prod(self.b.y_shape) * self.b.y_dtype.itemsize
        return dy + sum(t.numel() * t.element_size() + 256 for t in self.like[1:])

    def dy(self, g: torch.Generator) -> torch.Tensor:
        device = self.like[0].device
        return torch.randn(self.b.y_shape, generator=g, device=device).to(self.b.y_dtype)

    def add(self, message: dict, arena: Any, refs: dict, dys: list) -> list[list[Any]]:
        from gpulab.grading.kernel import encode

        more = [[arena.slot(tuple(t.shape), t.dtype) for t in self.like[1:]] for _ in dys]
        for entry, dy in zip(message["inputs"], dys, strict=True):
            entry["grad_output"] = encode(arena, dy, refs)
        message["grad_args"] = list(self.b.grad_args)
        message["extra_outs"] = [[x.to_json() for x in row] for row in more]
        return more

    def checks(self, rep: Any, dy: torch.Tensor, got: list) -> list[tuple]:
        want = self.b.reference(rep, dy)
        names = list(self.b.labels) or [f"gradient of argument {i}" for i in self.b.grad_args]
        return [
            (n, gt, w, self.b.tolerance(w, t.dtype))
            for n, gt, w, t in zip(names, got, want, self.like, strict=True)
        ]


def _event_ms(fn: Any, reps: int = 5) -> float:
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def _batch_size(per_rep_bytes: int) -> int:
    free, _ = torch.cuda.mem_get_info()
    fit = int(0.3 * free // max(per_rep_bytes, 1))
    return max(2, min(BATCH_REPS, fit))


def time_remote(
    ctx: Any, spec: Any, fn: Any, case: Any, flusher: Any, backward: Backward | None = None
) -> dict[str, Any]:
    from gpulab.grading.kernel import _storage_nbytes, _tensors, encode

    expect = spec.expect(case)
    out_bytes = math.prod(expect.shape) * expect.like.dtype.itemsize
    # Fresh inputs get a storage each, even where the case's share one.
    per_rep = (
        sum(_storage_nbytes([t]) for t in _tensors(case.args) + _tensors(case.kwargs))
        + out_bytes
        + 512
    )
    grads = _GradSlots(backward, case) if backward else None
    if grads:
        per_rep += grads.extra_bytes()
    k = _batch_size(per_rep)
    g = torch.Generator(device=expect.like.device).manual_seed(
        ctx.seed(zlib.crc32(case.name.encode()) % 100003)
    )
    # What the sandbox's loop costs besides the kernel, timed here.
    flush_ms = _event_ms(flusher)
    src = torch.empty(expect.shape, dtype=expect.like.dtype, device=expect.like.device)
    dst = torch.empty_like(src)
    copy_ms = _event_ms(lambda: dst.copy_(src))
    times: list[float] = []
    clocks: dict[str, Any] = {}
    implausible = None
    batch = 0
    walls: list[dict[str, float]] = []
    # Warm-up by time, in a request of its own so the timed batches below
    # carry no allowance for it.
    warm = fresh_case(case, g)
    arena = ctx.arena(per_rep + 4096)
    refs: dict[int, Any] = {}
    warm_in = {
        "args": [encode(arena, a, refs) for a in warm.args],
        "kwargs": {n: encode(arena, v, refs) for n, v in warm.kwargs.items()},
    }
    message = {
        "type": "time",
        "function": fn.name,
        "warmup_s": WARMUP_S,
        "flush": True,
        "inputs": [warm_in],
        "outs": [arena.slot(tuple(expect.shape), expect.like.dtype).to_json()],
    }
    if grads:
        grads.add(message, arena, refs, [grads.dy(g)])
    reply = ctx.sandbox.request(message)
    if reply.get("type") == "raised":
        raise learner.LearnerError(text(reply.get("summary")), text(reply.get("message")))
    if isinstance(reply.get("clocks"), dict):
        clocks = {
            key: v
            for key, v in reply["clocks"].items()
            if isinstance(v, (int, float, bool, str, list))
        }
    while len(times) < MAX_REPS:
        reps = [fresh_case(case, g) for _ in range(k)]
        arena = ctx.arena(k * per_rep + 4096)
        refs: dict[int, Any] = {}
        inputs = [
            {
                "args": [encode(arena, a, refs) for a in r.args],
                "kwargs": {n: encode(arena, v, refs) for n, v in r.kwargs.items()},
            }
            for r in reps
        ]
        slots = [arena.slot(tuple(expect.shape), expect.like.dtype) for _ in reps]
        message = {
            "type": "time",
            "function": fn.name,
            "inputs": inputs,
            "outs": [s.to_json() for s in slots],
            "flush": True,
            "warmup_s": 0.0,
        }
        dys = [grads.dy(g) for _ in reps] if grads else []
        more = grads.add(message, arena, refs, dys) if grads else []
        torch.cuda.synchronize()
        started = time.perf_counter()
        reply = ctx.sandbox.request(message)
        wall_ms = (time.perf_counter() - started) * 1e3
        if reply.get("type") == "raised":
            raise learner.LearnerError(text(reply.get("summary")), text(reply.get("message")))
        claimed = numbers(reply.get("ms"))
        if (
            reply.get("type") != "timed"
            or claimed is None
            or len(claimed) != k
            or min(claimed, default=0) <= 0
        ):
            ctx.fail(
                f"timing {case.name}: the sandbox sent no usable timing", text(reply.get("summary"))
            )
        copied = reply.get("copied") if isinstance(reply.get("copied"), list) else []
        for i, (r, slot) in enumerate(zip(reps, slots, strict=True)):
            if i >= len(copied) or copied[i] is not True:
                ctx.fail(
                    f"timing {case.name}: repetition {i + 1} returned no result of the "
                    "expected shape and dtype"
                )
            if grads:
                got_all = [arena.view(slot)] + [arena.view(x) for x in more[i]]
                checks = grads.checks(r, dys[i], got_all)
            else:
                checks = [
                    ("output", arena.view(slot), spec.reference(r), spec.tolerance(case.dtype))
                ]
            for label, got, want, tol in checks:
                if mismatches(got, want, *tol):
                    rep = compare(got, want, *tol)
                    ctx.fail(
                        f"timing {case.name}: the {label} of timed repetition {i + 1} "
                        "(fresh inputs) is wrong",
                        describe_mismatch(rep) + ". Every timed call must compute its "
                        "own inputs' answer inside the timed region.",
                    )
        copies = numbers(reply.get("copy_ms"))
        if copies is None or len(copies) != k:
            ctx.fail(f"timing {case.name}: the sandbox sent no usable timing")
        slow_copy = statistics.median(copies)
        if slow_copy > COPY_SLACK * copy_ms + COPY_FLOOR_MS:
            implausible = (
                f"{case.name}: copying each result out took {slow_copy * 1e3:.0f} µs "
                f"(median), where a copy of that size takes {copy_ms * 1e3:.0f} µs: "
                "work done outside the timed region?"
            )
        total = sum(claimed)
        allowance = k * (flush_ms + copy_ms + GAP_MS) + GAP_SHARE * total + FIXED_ALLOWANCE_MS
        if grads:
            fwd = numbers(reply.get("fwd_ms"))
            if fwd is None or len(fwd) != k:
                ctx.fail(f"timing {case.name}: the sandbox sent no usable timing")
            bound = FWD_SLACK * backward.forward_ms + FWD_FLOOR_MS
            if statistics.median(fwd) > bound:
                implausible = (
                    f"{case.name}: the forward before each timed backward took "
                    f"{statistics.median(fwd) * 1e3:.0f} µs (median), where your "
                    f"forward alone takes {backward.forward_ms * 1e3:.0f} µs: "
                    "backward work done ahead of the timed region?"
                )
            # The forwards (bounded above) and the second gradient's copy
            # run between the timed regions.
            allowance += sum(fwd) + k * copy_ms
        walls.append(
            {"reps": k, "wall_ms": wall_ms, "claimed_ms": total, "copy_ms_median": slow_copy}
        )
        if total > wall_ms + 1.0:
            implausible = (
                f"{case.name}: the kernels claim {total:.2f} ms of GPU time in a "
                f"batch that took {wall_ms:.2f} ms"
            )
        elif wall_ms - total > allowance:
            unexplained = (wall_ms - total - k * (flush_ms + copy_ms)) / k
            text_ = (
                f"{case.name}: a batch of {k} calls took {wall_ms:.1f} ms, its timed "
                f"regions {total:.1f} ms and the flushes and copies "
                f"{k * (flush_ms + copy_ms):.1f} ms: {unexplained * 1e3:.0f} µs a call "
                "unexplained"
            )
            # Host work between calls (a wrapper that synchronises, Python
            # set-up) is honest and shows here too (measured on an H200: up
            # to ~0.5 ms a call for attention); only a gap larger than the
            # kernel itself is refused, the rest is reported.
            if unexplained > 2 * total / k + GROSS_MS:
                implausible = text_ + ", more than the kernel: work outside the timed region?"
            else:
                ctx.notes.append(
                    "timing: " + text_ + " (host time between calls, or work "
                    "outside the timed region)."
                )
        times.extend(claimed)
        batch += 1
        st = _stats(times)
        if implausible or (len(times) >= 10 and st["rse"] <= REL_ERR):
            break
    out = _stats(times)
    out.update(
        clocks=clocks,
        batch_reps=k,
        judge_flush_ms=flush_ms,
        judge_copy_ms=copy_ms,
        batches=walls,
        implausible=implausible,
    )
    return out
