"""Grader for lesson 01's copy_ceiling step: measure the memory ceiling yourself.

The learner writes `buffer_bytes(l2, free)`, how much to copy, and
`copy_bandwidth(gpu, nbytes)`, a copy benchmark that returns bytes per
second, read and write counted.

  1. buffer_bytes is checked against the lesson's rules on GPUs from the
     datasheet table: at least 8× the L2 and 1 GiB, at most a quarter of the
     free memory (two buffers and the flush must fit), the quarter winning
     when they conflict.
  2. copy_bandwidth runs at three sizes: the learner's own plan, 256 MiB and
     16 MiB (which the L2 holds unless it is flushed).
     * On a GPU it times the real device in the sandbox, and the judge times
       the same copies itself, with gpulab's protocol (L2 flushed, warm-up,
       CUDA events, median): the learner's figure must agree within 15%.
       The sandbox's figure is a claim compared with the judge's own
       measurement, never a grade of anything by itself.
     * On a CPU it runs on a model GPU (gpulab.sandbox.ceiling) drawn from
       this run's secret seed around a datasheet GPU; its ceiling at each
       size is known here, and the figure must agree within 4%. A wrong
       figure is matched against the usual mistakes (no flush, the flush
       timed, one direction counted, no warm-up, TB/s for bytes/s).
"""

from __future__ import annotations

import numbers
import random
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from gpulab.gpu.hardware import GPU, GPUS
from gpulab.judge.case_row import case_row
from gpulab.judge.graph_dynamo import sandbox_reply
from gpulab.judge.plain import fmt, try_call
from gpulab.wire.benches import Bench, BenchModel, BenchRequest
from gpulab.wire.status import StageKind

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext
    from gpulab.judge.remote import Remote

MiB, GiB = 1 << 20, 1 << 30
SMALL, MID = 16 * MiB, 256 * MiB
MODEL_TOL, GPU_TOL = 0.04, 0.15
# (datasheet GPU, free bytes or None for 95% of its memory); the last one is
# short of memory: a quarter of it is less than 1 GiB.
PLANS: list[tuple[str, int | None]] = [
    ("t4", None),
    ("a100-80gb", None),
    ("h100-sxm", None),
    ("h200", None),
    ("b200", None),
]
PLANS += [("mi300x", None), ("h100-sxm", 3 * GiB)]
MODELS = ("h200", "h100-sxm", "a100-80gb", "b200")
COLD = (3.0, 2.0, 1.5)  # the model's first copies (gpulab.sandbox.ceiling)


def _l2_bytes(gpu: GPU) -> int:
    assert gpu.l2_mb is not None, f"{gpu.name}: gpus.toml gives no L2 size"
    return int(gpu.l2_mb * MiB)


def _l2_free(key: str, free: int | None) -> tuple[int, int]:
    gpu = GPUS[key]
    return _l2_bytes(gpu), free if free is not None else int(gpu.memory_gb * 1e9 * 0.95)


def plan_bounds(l2: int, free: int) -> tuple[int, int]:
    """The sizes the lesson's rules allow (a MiB of rounding below)."""
    upper = free // 4
    return min(max(8 * l2, GiB), upper) - MiB, upper


@dataclass(frozen=True)
class ModelGPU:
    """The model GPU a CPU check's benchmark runs on (gpulab.sandbox.ceiling),
    drawn from the run's secret seed around a datasheet GPU."""

    hbm_bps: float
    l2_bytes: int
    overhead_s: float
    seed: int
    efficiency: float  # of the datasheet GPU's bandwidth

    def bench(self) -> BenchModel:
        return BenchModel(self.hbm_bps, self.l2_bytes, self.overhead_s, self.seed)


def model_params(ctx: CaseContext) -> tuple[str, ModelGPU]:
    rng = random.Random(ctx.seed(4242))
    key = rng.choice(MODELS)
    gpu = GPUS[key]
    eff = rng.uniform(0.82, 0.95)
    return key, ModelGPU(
        hbm_bps=eff * gpu.bandwidth_tbs * 1e12,
        l2_bytes=_l2_bytes(gpu),
        overhead_s=rng.uniform(2e-6, 8e-6),
        seed=rng.randrange(2**31),
        efficiency=eff,
    )


def model_ceiling(p: ModelGPU, nbytes: int, mistake: str = "") -> float:
    """What a right benchmark reads off the model at `nbytes` (or a wrong one)."""
    moved = 2 * nbytes
    bw = p.hbm_bps
    if mistake == "no_flush" and moved <= p.l2_bytes:
        bw = 2 * p.hbm_bps  # the model's L2 is twice its HBM
    t = p.overhead_s + moved / bw
    if mistake == "flush_timed":
        t += 8 * p.l2_bytes / p.hbm_bps
    if mistake == "cold":
        t *= COLD[0]
    value = moved / t
    return {"one_way": value / 2, "tbs": value / 1e12, "gbs": value / 1e9}.get(mistake, value)


MISTAKES = (
    ("one_way", "you counted the bytes once; a copy reads every byte and writes it"),
    ("tbs", "you returned TB/s; return bytes per second"),
    ("gbs", "you returned GB/s; return bytes per second"),
    ("no_flush", "the L2 served the copy: flush it before each timed copy"),
    ("flush_timed", "you timed the flush too: flush before the start event"),
    ("cold", "you timed the device's first copy: warm up first"),
)


def _number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _check_plans(ctx: GradeContext, fn: Any) -> None:
    """Each datasheet GPU's plan, one case each."""
    for key, free in PLANS:
        l2, free_b = _l2_free(key, free)
        got, err = try_call(ctx, fn, l2, free_b)
        lo, hi = plan_bounds(l2, free_b)
        detail = err
        if not err:
            if not _number(got):
                detail = f"returned {fmt(got)}; expected a number of bytes"
            elif got > hi:
                detail = (
                    f"{fmt(got)} bytes: two buffers and the flush must fit in {free_b} free "
                    f"bytes, so at most a quarter of it ({hi})"
                )
            elif got < lo and lo + MiB == hi:
                detail = (
                    f"{fmt(got)} bytes: with {free_b} bytes free, a quarter of them ({hi}) is "
                    "the most that fits, and the closest to 8× the L2 and 1 GiB"
                )
            elif got < lo:
                detail = (
                    f"returned {fmt(got)} bytes, too few: a buffer must be at least 8× the "
                    f"L2 ({8 * l2}) and 1 GiB, here {lo + MiB} bytes, so HBM and not the "
                    "cache is measured"
                )
        name = f"buffer_bytes for {GPUS[key].name}" + (" with 3 GiB free" if free else "")
        ctx.add_case(case_row(name=name, passed=not detail, detail=detail))


def _sizes(ctx: GradeContext, fn: Any, l2: int, free: int) -> list[int]:
    got, err = try_call(ctx, fn, l2, free)
    lo, hi = plan_bounds(l2, free)
    plan = int(got) if not err and _number(got) and lo <= got <= hi else max(lo + MiB, MiB)
    return [plan, MID, SMALL]


def _bench(
    ctx: GradeContext, fn: Any, device: str, sizes: list[int], model: ModelGPU | None
) -> tuple[list[Any], list[int]]:
    """Each size's figure, and how many event times the run read (-1: not counted)."""
    gpu = model.bench() if model is not None else None
    msg = BenchRequest(fn.name, device, tuple(sizes), gpu)
    reply = sandbox_reply(ctx.sandbox.ask(msg, Bench))
    n = len(sizes)
    return (list(reply.values) + [None] * n)[:n], (list(reply.times_read) + [-1] * n)[:n]


def _label(nbytes: int) -> str:
    return f"{nbytes / GiB:g} GiB" if nbytes >= GiB else f"{nbytes // MiB} MiB"


def _case(
    ctx: GradeContext,
    nbytes: int,
    got: Any,
    want: float,
    tol: float,
    model: ModelGPU | None,
    times_read: int = -1,
) -> None:
    name = f"copy_bandwidth, {_label(nbytes)}"
    if not _number(got):
        detail = f"returned {fmt(got)}; expected bytes per second"
        ctx.add_case(case_row(name=name, passed=False, detail=detail))
        return
    off = got / want - 1
    ok = abs(off) <= tol
    detail = f"yours {got / 1e12:.4g} TB/s, the ceiling {want / 1e12:.4g} TB/s ({off:+.1%})"
    if times_read == 0:
        # The model's device time is seen only through events: a figure from
        # the host's clock is the Python around the copies, and on a slow
        # machine it can land near the ceiling by chance (CI's oldest stack
        # once passed the starter's 16 MiB case that way).
        ok = False
        detail += (
            " — your benchmark read no event's time: the host's clock around a copy the "
            "host only queues measures the queueing, not the copy"
        )
    elif not ok and off > 1.5:
        detail += " — far above the ceiling: the host's clock around a copy the host only queues?"
    elif not ok and model is not None:
        for key, label in MISTAKES:
            alt = model_ceiling(model, nbytes, key)
            if alt != want and abs(got / alt - 1) <= tol:
                detail += f" — looks like {label}"
                break
    ctx.add_case(case_row(name=name, passed=ok, detail=detail, ms=2 * nbytes / want * 1e3))


def grade(ctx: GradeContext) -> None:
    fns = {n: ctx.function(n) for n in ("buffer_bytes", "copy_bandwidth")}
    _check_plans(ctx, fns["buffer_bytes"])
    if ctx.device == "cuda":
        _grade_gpu(ctx, fns)
        return
    key, model = model_params(ctx)
    l2, free = _l2_free(key, None)
    sizes = _sizes(ctx, fns["buffer_bytes"], l2, free)
    ctx.stage(StageKind.RUNNING, "running your benchmark on a model GPU")
    got, read = _bench(ctx, fns["copy_bandwidth"], "model", sizes, model)
    for nbytes, value, n in zip(sizes, got, read, strict=True):
        _case(ctx, nbytes, value, model_ceiling(model, nbytes), MODEL_TOL, model, n)
    ctx.notes.append(
        f"On the CPU your benchmark ran on a model of a GPU ({model.efficiency:.0%} of the "
        f"{GPUS[key].name}'s {GPUS[key].bandwidth_tbs:g} TB/s datasheet, drawn for this run): "
        "its stream is asynchronous, its L2 holds small buffers, its first copies are slow. "
        "On a GPU the check times the real copies beside yours."
    )


def _grade_gpu(ctx: GradeContext, fns: dict[str, Remote]) -> None:
    import torch

    from gpulab.gpu.gpulock import gpu_timing_lock
    from gpulab.measure.timing import L2Flusher, l2_bytes, measure

    gpu = torch.cuda.current_device()
    free = torch.cuda.mem_get_info(gpu)[0]
    sizes = _sizes(ctx, fns["buffer_bytes"], l2_bytes(gpu), free)
    with gpu_timing_lock("checking copy_ceiling", gpu=gpu, on_wait=ctx.waiting):
        want = []
        flusher = L2Flusher(gpu)
        for nbytes in sizes:
            ctx.stage(StageKind.TIMING, f"timing gpulab's own copy of {_label(nbytes)}")
            src = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device="cuda")
            dst = torch.empty_like(src)
            t = measure(partial(dst.copy_, src), flusher=flusher, budget_s=1.0)
            want.append(2 * nbytes / (t["ms"] * 1e-3))
            del src, dst
        del flusher
        torch.cuda.empty_cache()
        ctx.stage(StageKind.RUNNING, "running your benchmark")
        got, _ = _bench(ctx, fns["copy_bandwidth"], "cuda", sizes, None)
    for nbytes, g, w in zip(sizes, got, want, strict=True):
        _case(ctx, nbytes, g, w, GPU_TOL, None)
    ctx.notes.append(
        "Your figures are your benchmark's claims, compared with the same copies timed by "
        "gpulab itself (L2 flushed, CUDA events, median) within 15%."
    )
