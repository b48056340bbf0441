"""Grading a kernel exercise: correctness cases under guards, then timing.

An exercise's grader module describes its cases, reference, banned ops and
baseline in a `KernelSpec`; `check_cases` and `time_cases` do the rest the
same way for every kernel (see ../shared/guide/GRADING.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from gpulab import ceilings
from gpulab.content import eval_formula
from gpulab.grading import learner
from gpulab.grading.compare import (
    DEFAULT_TOLERANCE,
    bit_equal,
    compare,
    describe_mismatch,
    dtype_name,
)
from gpulab.grading.guards import LaunchRecorder, op_guard, tamper_snapshot, tampered


@dataclass
class Case:
    name: str
    args: tuple
    dtype: torch.dtype
    sizes: dict[str, float] = field(default_factory=dict)
    kwargs: dict[str, Any] = field(default_factory=dict)
    shape: str = ""


@dataclass
class KernelSpec:
    reference: Callable[[Case], torch.Tensor]
    banned: tuple = ()
    banned_aten: tuple[str, ...] = ()
    # aten ops banned only when a tensor argument has >= 4096 elements: the
    # elementwise pieces the op could be rebuilt from (mul + sum for matmul).
    banned_large: tuple[str, ...] = ()
    banned_label: str = ""
    tolerance: Callable[[torch.dtype], tuple[float, float]] = lambda dt: DEFAULT_TOLERANCE[dt]
    out_check: Callable[[Case, Any], str | None] | None = None
    baseline: Callable[[Case], Callable[[], Any]] | None = None
    baseline_name: str = ""
    # Grade from the geometric mean of the roofline fraction (or the
    # speedup, when `grade_on` is "speedup"): (threshold, letter), best first.
    grade_on: str = "roofline"
    grades: tuple[tuple[float, str], ...] = ((0.85, "A"), (0.70, "B"), (0.50, "C"), (0.0, "D"))


def output_problem(out: Any, shape: tuple, like: torch.Tensor, like_name: str,
                   contiguous: bool = False) -> str | None:
    """What is wrong with a returned tensor's type, shape, dtype or device
    (and layout, when the contract asks for a contiguous output), or None."""
    if not isinstance(out, torch.Tensor):
        return f"returned {type(out).__name__}, expected a torch.Tensor"
    if tuple(out.shape) != tuple(shape):
        return f"returned shape {tuple(out.shape)}, expected {tuple(shape)}"
    if out.dtype != like.dtype:
        return (f"returned dtype {dtype_name(out.dtype)}, expected {dtype_name(like.dtype)} "
                f"({like_name}'s dtype)")
    if out.device != like.device:
        return f"returned a tensor on {out.device}, expected {like.device}"
    if contiguous and not out.is_contiguous():
        return "returned a non-contiguous tensor; allocate a new contiguous output"
    return None


def _tensors(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    return [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]


def _base(t: torch.Tensor) -> torch.Tensor:
    return t._base if t._base is not None else t


def guarded_call(ctx: Any, spec: KernelSpec, fn: Callable, case: Case) -> Any:
    """Call the learner's function once under every guard; fail on a cheat."""
    bases = [_base(t) for t in _tensors(case.args, case.kwargs)]
    snapshots = [b.clone() for b in bases]
    with LaunchRecorder() as launches, op_guard(spec.banned, spec.banned_aten,
                                                        banned_large=spec.banned_large) as v:
        out = learner.call(fn, ctx.file, *case.args, **case.kwargs)
    if v.banned:
        names = ", ".join(sorted(set(v.banned)))
        ctx.fail(f"cheat: your code called {names}, the op this exercise replaces",
                 f"{spec.banned_label or 'The library op'} is off the graded path: "
                 "write the computation in your Triton kernel.")
    for b, s in zip(bases, snapshots, strict=True):
        if not bit_equal(b, s):
            ctx.fail(f"case {case.name}: your code wrote into its inputs",
                     "Inputs must be left exactly as they were; write to a new output tensor.")
    if not launches.launches:
        ctx.fail(f"case {case.name}: no Triton kernel was launched",
                 "The result must be computed by your Triton kernel (kernel[grid](...)).")
    if launches.side_streams():
        ctx.fail(f"case {case.name}: a kernel was launched on a side stream",
                 "Launch on the current stream: work on another stream escapes the timing.")
    if isinstance(out, torch.Tensor):
        if type(out) is not torch.Tensor:
            ctx.fail(f"case {case.name}: returned a {type(out).__name__}, not a plain torch.Tensor")
        if not launches.wrote(out):
            ctx.fail(f"case {case.name}: the returned tensor was not written by your Triton kernel",
                     "Return the output buffer that you passed to your kernel.")
    return out


def check_cases(ctx: Any, spec: KernelSpec, fn: Callable, cases: list[Case]) -> None:
    """Correctness: every case against a float64 reference, under the guards."""
    ctx.uses_triton = True
    total = len(cases)
    for i, case in enumerate(cases):
        ctx.stage(f"case {i + 1} of {total}: {case.name}")
        out = guarded_call(ctx, spec, fn, case)
        record: dict[str, Any] = {"name": case.name, "shape": case.shape,
                                  "dtype": dtype_name(case.dtype)}
        problem = spec.out_check(case, out) if spec.out_check else None
        if problem:
            record.update(passed=False, detail=problem)
            ctx.add_case(record, total)
            continue
        ref = spec.reference(case)
        atol, rtol = spec.tolerance(case.dtype)
        rep = compare(out, ref, atol, rtol)
        record.update(max_abs=rep["max_abs"], max_rel=rep["max_rel"],
                      mismatches=rep["mismatches"], passed=rep["mismatches"] == 0)
        if rep["mismatches"]:
            record["detail"] = describe_mismatch(rep)
            record["first_bad"] = rep.get("first_bad", [])
        ctx.add_case(record, total)


def _geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else 0.0


def time_cases(ctx: Any, spec: KernelSpec, fn: Callable, cases: list[Case]) -> None:
    """Time the learner's kernel and the baseline side by side (GPU only),
    holding the GPU's timing lock so no other gpulab run times at once."""
    from gpulab.gpulock import gpu_timing_lock

    index = torch.cuda.current_device()
    with gpu_timing_lock(f"checking {ctx.request.get('exercise', '?')}", gpu=index,
                         on_wait=ctx.stage):
        _time_cases(ctx, spec, fn, cases)


def _time_cases(ctx: Any, spec: KernelSpec, fn: Callable, cases: list[Case]) -> None:
    from gpulab.grading.timing import L2Flusher, measure

    req = ctx.request
    device_name = torch.cuda.get_device_name(0)
    ws = req.get("workspace")
    flusher = L2Flusher()
    peak_bw, peak_flops = ceilings.floor_peaks(device_name)
    rows, fractions, speedups = [], [], []
    implausible = None
    total = len(cases)
    for i, case in enumerate(cases):
        ctx.stage(f"timing {i + 1} of {total}: {case.name}")
        out = guarded_call(ctx, spec, fn, case)  # also compiles/autotunes
        last: dict[str, Any] = {}

        def run(case: Case = case, last: dict = last) -> None:
            last["out"] = fn(*case.args, **case.kwargs)

        before = tamper_snapshot()
        try:
            t = measure(run, flusher=flusher)
        except BaseException as exc:  # noqa: BLE001
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise learner.LearnerError(f"timing {case.name} failed: {exc}",
                                       learner.format_learner_traceback(exc, ctx.file)) from None
        if tampered(before):
            ctx.fail("cheat: timing functions were replaced during the run",
                     ", ".join(tampered(before)))
        # Work deferred past the timed region shows up as a wrong timed output.
        ref = spec.reference(case)
        atol, rtol = spec.tolerance(case.dtype)
        for label, o in (("first", out), ("timed", last.get("out"))):
            rep = compare(o, ref, atol, rtol)
            if rep["mismatches"]:
                ctx.fail(f"timing {case.name}: the {label} output is wrong",
                         describe_mismatch(rep))
        row: dict[str, Any] = {"name": case.name, "shape": case.shape,
                               "dtype": dtype_name(case.dtype), **t}
        names = {**case.sizes, "elt": case.dtype.itemsize}
        nbytes = eval_formula(req["bytes"], names) if req.get("bytes") else None
        flops = eval_formula(req["flops"], names) if req.get("flops") else None
        sec = t["ms"] * 1e-3
        # Carried in the row so the roofline can place this run later.
        row.update(flops=flops, bytes=nbytes, kind=req.get("kind"), sizes=dict(case.sizes),
                   intensity=(flops / nbytes) if flops and nbytes else None)
        if req.get("kind") == "compute" and flops:
            row["throughput"], row["unit"] = flops / sec / 1e12, "TFLOP/s"
            cap, label = ceilings.ceiling("compute", dtype_name(case.dtype), device_name, ws)
            row["roofline_fraction"] = (flops / sec) / cap if cap else None
        elif nbytes:
            row["throughput"], row["unit"] = nbytes / sec / 1e9, "GB/s"
            cap, label = ceilings.ceiling("memory", dtype_name(case.dtype), device_name, ws)
            row["roofline_fraction"] = (nbytes / sec) / cap if cap else None
        else:
            label = ""
        row["ceiling"] = label
        floor = max((nbytes or 0) / peak_bw if peak_bw else 0.0,
                    (flops or 0) / peak_flops.get(dtype_name(case.dtype), math.inf)
                    if peak_flops else 0.0)
        if floor and sec < 0.9 * floor:
            implausible = (f"{case.name} took {t['ms'] * 1e3:.1f} µs, below the "
                           f"{floor * 1e6:.1f} µs the datasheet allows")
        if spec.baseline is not None:
            ctx.stage(f"timing {i + 1} of {total}: {case.name} ({spec.baseline_name})")
            b = measure(spec.baseline(case), flusher=flusher, log_clocks=False)
            row["baseline"], row["baseline_ms"] = spec.baseline_name, b["ms"]
            row["speedup"] = b["ms"] / t["ms"]
            speedups.append(row["speedup"])
        if row.get("roofline_fraction"):
            fractions.append(row["roofline_fraction"])
        rows.append(row)
    score = _geomean(speedups if spec.grade_on == "speedup" else fractions)
    grade = next(letter for threshold, letter in spec.grades if score >= threshold)
    unit = rows[0].get("unit", "") if rows else ""
    summary = f"grade {grade}: {_geomean(fractions):.0%} of the roofline"
    if speedups:
        summary += f", {_geomean(speedups):.2f}x {spec.baseline_name}"
    ctx.timing = {
        "cases": rows,
        "grade": grade,
        "roofline_fraction": _geomean(fractions),
        "speedup": _geomean(speedups) if speedups else None,
        "baseline": spec.baseline_name,
        "throughput": _geomean([r.get("throughput", 0) for r in rows]),
        "unit": unit,
        "ms": _geomean([r["ms"] for r in rows]),
        "summary": summary,
        "implausible": implausible,
        "device": device_name,
    }
