"""Grader for lesson 01's matmul_ceiling step: measure the tensor-core rate yourself.

The learner writes `matmul_tflops(gpu, m, n, k)`: a benchmark of a bf16
matrix product, m×k by k×n, that returns TFLOP/s (2·M·N·K FLOPs, warm-up
by time, CUDA events read after a synchronize, repeats, the median).

  * On a GPU it times the real device in the sandbox, and the judge times
    the same products itself with gpulab's protocol (random bf16 data,
    warm-up until the clock has settled, L2 flushed, CUDA events, median):
    the learner's figure must agree within 15%, and no figure may pass the
    datasheet's dense bf16 tensor-core roof. The sandbox's figure is a
    claim compared with the judge's own measurement, never a grade by
    itself.
  * On a CPU it runs on a model GPU (gpulab.sandbox.flops) drawn from this
    run's secret seed around a datasheet GPU; its sustained rate at each
    shape is known here, and the figure must agree within 4%. A wrong
    figure is matched against the usual mistakes (M·N·K counted once,
    FLOP/s or GFLOP/s for TFLOP/s, the warm-up too short for the clock to
    settle, the first product timed, the flush timed, seconds for
    milliseconds).
"""

from __future__ import annotations

import math
import numbers
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpulab.gpu.hardware import GPUS
from gpulab.judge.case_row import case_row
from gpulab.judge.graph_dynamo import sandbox_reply
from gpulab.judge.plain import fmt
from gpulab.wire.benches import Bench, MatmulBenchRequest, MatmulModel
from gpulab.wire.status import StageKind

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext
    from gpulab.judge.remote import Remote

MiB = 1 << 20
# (m, n, k): two squares the lesson quotes and one whose sides differ, so
# that 2·M·N·K is the only count that fits all three.
SHAPES: tuple[tuple[int, int, int], ...] = (
    (8192, 8192, 8192),
    (4096, 4096, 4096),
    (8192, 2048, 4096),
)
MODEL_TOL, GPU_TOL = 0.04, 0.15
MODELS = ("h200", "h100-sxm", "a100-80gb", "b200")
# Warm-up: the model's clock starts BOOST above its sustained rate and falls
# with an e-folding time of TAU seconds of products: after 0.2 s it is still
# about 5-8% fast (the H200's 7.4%, BENCHMARKS.md), after 0.5 s within 1%.
BOOST, TAU = (0.2, 0.3), 0.15
FIRST = (0.02, 0.06)  # the first product's one-off cost, seconds


def flops(m: int, n: int, k: int) -> float:
    return 2.0 * m * n * k


@dataclass(frozen=True)
class Drawn:
    """The model GPU of this run: its datasheet GPU and its parameters."""

    key: str
    model: MatmulModel
    efficiency: float  # of the datasheet's dense bf16 rate


def draw(ctx: CaseContext) -> Drawn:
    rng = random.Random(ctx.seed(4343))
    key = rng.choice(MODELS)
    gpu = GPUS[key]
    eff = rng.uniform(0.62, 0.78)
    assert gpu.l2_mb is not None, f"{gpu.name}: gpus.toml gives no L2 size"
    model = MatmulModel(
        peak_flops=eff * gpu.tflops["bf16"] * 1e12,
        overhead_s=rng.uniform(3e-6, 8e-6),
        boost=rng.uniform(*BOOST),
        tau_s=TAU,
        first_s=rng.uniform(*FIRST),
        hbm_bps=0.88 * gpu.bandwidth_tbs * 1e12,
        l2_bytes=int(gpu.l2_mb * MiB),
        seed=rng.randrange(2**31),
    )
    return Drawn(key, model, eff)


def model_tflops(p: MatmulModel, shape: tuple[int, int, int], mistake: str = "") -> float:
    """What a right benchmark reads off the model at `shape` (or a wrong one)."""
    f = flops(*shape)
    work = f / p.peak_flops
    t = p.overhead_s + work
    if mistake == "flush_timed":
        t += 8 * p.l2_bytes / p.hbm_bps
    if mistake == "first":
        t += p.first_s
    return f / t / 1e12 * SCALES.get(mistake, 1.0)


# A figure off by one of these factors: FLOPs counted once, FLOP/s or
# GFLOP/s returned, milliseconds read as seconds.
SCALES = {"mnk": 0.5, "flops": 1e12, "gflops": 1e3, "seconds": 1e-3}


MISTAKES = (
    ("mnk", "you counted M·N·K FLOPs; each of them is a multiply and an add: 2·M·N·K"),
    ("flops", "you returned FLOP/s; return TFLOP/s (10¹² FLOP/s)"),
    ("gflops", "you returned GFLOP/s; return TFLOP/s"),
    ("seconds", "elapsed_time is in milliseconds, not seconds"),
    ("flush_timed", "you timed the L2 flush too: flush before the start event, or not at all"),
    ("first", "you timed the first product, which pays the library's one-off setup"),
)


def _number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(float(v))


def _label(shape: tuple[int, int, int]) -> str:
    m, n, k = shape
    return f"{m}×{k} @ {k}×{n} bf16"


def _roof(device_name: str) -> tuple[float | None, str]:
    """The dense bf16 tensor-core roof of the datasheet GPU, TFLOP/s, and its name."""
    from gpulab.gpu.hardware import match_gpu

    gpu = match_gpu(device_name)
    if gpu is None or not gpu.tflops.get("bf16"):
        return None, ""
    return gpu.tflops["bf16"], gpu.name


def _named(
    shape: tuple[int, int, int], got: float, want: float, tol: float, model: MatmulModel | None
) -> str:
    """The usual mistake a wrong figure matches, or "": the units and the
    count anywhere (a scale of the right figure), the model's timing
    mistakes on the model."""
    for key, words in MISTAKES:
        if model is not None:
            alt = model_tflops(model, shape, key)
        elif key in SCALES:
            alt = want * SCALES[key]
        else:
            continue
        if abs(got / alt - 1) <= tol:
            return words
    return ""


def _case(
    ctx: GradeContext,
    shape: tuple[int, int, int],
    got: Any,
    want: float,
    tol: float,
    roof: tuple[float | None, str],
    model: MatmulModel | None,
    times_read: int = -1,
) -> None:
    name = f"matmul_tflops, {_label(shape)}"
    if not _number(got):
        detail = f"returned {fmt(got)}; expected TFLOP/s (a number)"
        ctx.add_case(case_row(name=name, passed=False, detail=detail))
        return
    got = float(got)
    off = got / want - 1
    ok = abs(off) <= tol
    detail = f"yours {got:.4g} TFLOP/s, the ceiling {want:.4g} TFLOP/s ({off:+.1%})"
    peak, gpu_name = roof
    named = "" if ok else _named(shape, got, want, tol, model)
    if times_read == 0:
        ok = False
        detail += (
            " — your benchmark read no event's time: the host's clock around a product the "
            "host only queues measures the queueing, not the product"
        )
    elif named:
        detail += f" — looks like {named}"
    elif peak is not None and got > peak:
        ok = False
        detail += (
            f" — above the {gpu_name} datasheet's {peak:g} dense bf16 TFLOP/s, the tensor "
            "cores' roof: no benchmark can pass it (count the FLOPs, and time with events)"
        )
    elif not ok and model is not None and want < got <= want * (1 + model.boost) * (1 + tol):
        detail += (
            " — too fast: the clock had not yet fallen to where a sustained load holds it; "
            "warm up by time (at least half a second of products) before the timed ones"
        )
    elif not ok and off > 1.5:
        detail += " — far above the ceiling: the host's clock around work the host only queues?"
    ctx.add_case(case_row(name=name, passed=ok, detail=detail, ms=flops(*shape) / want * 1e-9))


def _bench(ctx: GradeContext, fn: Remote, device: str, model: MatmulModel | None) -> Bench:
    msg = MatmulBenchRequest(fn.name, device, SHAPES, model)
    reply: Bench = sandbox_reply(ctx.sandbox.ask(msg, Bench))
    return reply


def _values(reply: Bench) -> tuple[list[Any], list[int]]:
    n = len(SHAPES)
    values = (list(reply.values) + [None] * n)[:n]
    return values, (list(reply.times_read) + [-1] * n)[:n]


def grade(ctx: GradeContext) -> None:
    fn = ctx.function("matmul_tflops")
    if ctx.device == "cuda":
        _grade_gpu(ctx, fn)
        return
    drawn = draw(ctx)
    ctx.stage(StageKind.RUNNING, "running your benchmark on a model GPU")
    values, read = _values(_bench(ctx, fn, "model", drawn.model))
    gpu = GPUS[drawn.key]
    roof = (gpu.tflops["bf16"], gpu.name)
    for shape, value, n in zip(SHAPES, values, read, strict=True):
        want = model_tflops(drawn.model, shape)
        _case(ctx, shape, value, want, MODEL_TOL, roof, drawn.model, n)
    ctx.notes.append(
        f"On the CPU your benchmark ran on a model of a GPU ({drawn.efficiency:.0%} of the "
        f"{gpu.name}'s {gpu.tflops['bf16']:g} dense bf16 TFLOP/s datasheet roof, drawn for this "
        "run): its stream is asynchronous, its first product is slow, and its clock starts "
        "high and falls under a sustained load. On a GPU the check times the real products "
        "beside yours."
    )


def _grade_gpu(ctx: GradeContext, fn: Remote) -> None:
    from functools import partial

    import torch

    from gpulab.gpu.gpulock import gpu_timing_lock
    from gpulab.measure.timing import L2Flusher, measure

    index = torch.cuda.current_device()
    device_name = torch.cuda.get_device_name(index)
    roof = _roof(device_name)
    with gpu_timing_lock("checking matmul_ceiling", gpu=index, on_wait=ctx.waiting):
        want = []
        flusher = L2Flusher(index)
        for m, n, k in SHAPES:
            ctx.stage(StageKind.TIMING, f"timing gpulab's own {_label((m, n, k))}")
            a = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
            b = torch.randn(k, n, dtype=torch.bfloat16, device="cuda")
            t = measure(partial(torch.matmul, a, b), flusher=flusher, budget_s=1.5)
            want.append(flops(m, n, k) / (t["ms"] * 1e-3) / 1e12)
            del a, b
        del flusher
        torch.cuda.empty_cache()
        ctx.stage(StageKind.RUNNING, "running your benchmark")
        values, _ = _values(_bench(ctx, fn, "cuda", None))
    for shape, value, w in zip(SHAPES, values, want, strict=True):
        _case(ctx, shape, value, w, GPU_TOL, roof, None)
    peak, name = roof
    of_roof = (
        f" (gpulab's own: {max(want):.0f} TFLOP/s, {max(want) / peak:.0%} of the {name} "
        f"datasheet's {peak:g} dense bf16 TFLOP/s)"
        if peak
        else ""
    )
    ctx.notes.append(
        "Your figures are your benchmark's claims, compared with the same products timed by "
        f"gpulab itself (random bf16 data, warm-up until the clock settles, L2 flushed, CUDA "
        f"events, median) within 15%{of_roof}."
    )
