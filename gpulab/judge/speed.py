"""Timing a kernel exercise's cases (GPU only) and placing them on the roofline.

The judge times the learner's kernel in batches on fresh inputs
(gpulab.judge.batches) beside the exercise's baseline, in one run, under
the GPU's timing lock; each row carries what the roofline needs to place it
later. A time below what the datasheet allows makes the check implausible.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from gpulab.course.content import eval_formula
from gpulab.gpu import ceilings
from gpulab.judge.batches import WARMUP_NEXT_S, WARMUP_S
from gpulab.judge.compare import dtype_name
from gpulab.judge.kernel import Kept, guarded_call
from gpulab.judge.kernel_guards import AuditSpan
from gpulab.judge.kernel_spec import Case, KernelSpec
from gpulab.judge.timed_rows import BackwardRow, GradedOn, KernelRow, KernelTiming, RemoteTiming
from gpulab.wire.status import StageKind

if TYPE_CHECKING:
    from gpulab.judge.context import GradeContext
    from gpulab.measure.timing import L2Flusher


def time_cases(ctx: GradeContext, spec: KernelSpec, fn: Any, cases: list[Case]) -> None:
    """Time the learner's kernel and the baseline side by side (GPU only),
    holding the GPU's timing lock so no other gpulab run times at once."""
    from gpulab.gpu.gpulock import gpu_timing_lock

    index = torch.cuda.current_device()
    with gpu_timing_lock(f"checking {ctx.request.exercise}", gpu=index, on_wait=ctx.waiting):
        _time_cases(ctx, spec, fn, cases)


def _geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else 0.0


def _time_cases(ctx: GradeContext, spec: KernelSpec, fn: Any, cases: list[Case]) -> None:
    from gpulab.measure.timing import L2Flusher

    device_name = torch.cuda.get_device_name(0)
    flusher = L2Flusher()
    kept = _check_sizes(ctx, spec, fn, cases)
    rows: list[KernelRow] = []
    implausible = None
    for i, case in enumerate(cases):
        ctx.stage(StageKind.TIMING, f"timing {i + 1} of {len(cases)}: {case.name}", i, len(cases))
        # The first case's warm-up also brings the clocks up from idle; the
        # others follow timed work at once.
        warmup_s = WARMUP_S if i == 0 else WARMUP_NEXT_S
        row, why = _time_case(
            ctx, spec, fn, case, flusher, device_name, warmup_s, kept.get(case.name)
        )
        implausible = implausible or why
        if spec.baseline is not None:
            ctx.stage(
                StageKind.TIMING,
                f"timing {i + 1} of {len(cases)}: {case.name} ({spec.baseline_name})",
                i,
                len(cases),
            )
            _time_baseline(spec, case, row, flusher)
        rows.append(row)
    ctx.timing = _summary(spec, rows, device_name, implausible, ctx.request.workspace)


def _check_sizes(
    ctx: GradeContext, spec: KernelSpec, fn: Any, cases: list[Case]
) -> dict[str, Kept]:
    """Each timed case once under the guards first (which also compiles and
    autotunes its kernels), the calls sharing one profile (AuditSpan, as the
    correctness cases do: on an H200 a profile apart cost about 0.15 s a
    call). The profile ends before the first timed batch. Where the replay
    times the kernels (gpulab.judge.replay_timing), each case is called a
    second time with its launches recorded: the first call of a shape may
    choose among kernels by timing them (the softmax reference does), the
    second launches only the chosen ones. Returns those records by case."""
    kept: dict[str, Kept] = {}
    replaying = ctx.replayer is not None and ctx.device == "cuda"
    # The replay times and checks the kernels apart from the file: torch's
    # profiler in the learner's process is not asked then (as for the
    # correctness cases: gpulab.judge.kernel.check_cases).
    span = None if replaying else AuditSpan()
    for i, case in enumerate(cases):
        ctx.stage(
            StageKind.TIMING,
            f"timing {i + 1} of {len(cases)}: {case.name} (checked first)",
            i,
            len(cases),
        )
        _, problem = guarded_call(ctx, spec, fn, case, span=span, audit=not replaying)
        if not problem and replaying:
            keep = Kept()
            _, problem = guarded_call(ctx, spec, fn, case, keep=keep, audit=False)
            kept[case.name] = keep
        if problem:
            if span is not None:  # an earlier call's cheat first
                span.judge(ctx, upto=len(span.calls) - 1)
            ctx.fail(f"timing {case.name}: {problem}")
    if span is not None:
        span.judge(ctx)
    return kept


def _replayed(
    ctx: GradeContext, spec: KernelSpec, case: Case, keep: Kept, warmup_s: float
) -> tuple[dict[str, float] | None, str]:
    """The case's kernels timed in the replay's sandbox: the statistics, or
    None and why they could not be had."""
    import zlib

    from gpulab.judge.replay_timing import replayed_times

    assert ctx.replayer is not None
    ctx.stage(StageKind.TIMING, f"timing {case.name} (your kernels replayed)")
    seed = ctx.seed(zlib.crc32(f"replay timing {case.name}".encode()) % 100003)
    return replayed_times(ctx.replayer, spec, case, keep, seed, warmup_s)


def _time_replayed(
    ctx: GradeContext, spec: KernelSpec, case: Case, keep: Kept, t: RemoteTiming, warmup_s: float
) -> str | None:
    """The case's kernels timed again in the replay's sandbox: `t` takes the
    replay's times, the sandbox's claim kept beside them (`claimed_ms`); or
    why they could not be had, which makes the timing implausible: with the
    replay on, no time rests on the sandbox's claim alone."""
    return _take_replayed(case, t, _replayed(ctx, spec, case, keep, warmup_s))


def _take_replayed(
    case: Case, t: RemoteTiming, replayed: tuple[dict[str, float] | None, str]
) -> str | None:
    stats, why = replayed
    if stats is None:
        return f"{case.name}: the replay could not time your kernels: {why}"
    t.claimed_ms = t.ms
    t.stats = stats
    return None


def _time_case(
    ctx: GradeContext,
    spec: KernelSpec,
    fn: Any,
    case: Case,
    flusher: L2Flusher,
    device_name: str,
    warmup_s: float = 0.2,
    keep: Kept | None = None,
) -> tuple[KernelRow, str | None]:
    """One case timed through the judge: its row, and why it is implausible
    (if it is). `keep`: the case's launches recorded, where the replay
    times them (the sandbox's batches then stop after one that passes:
    their checks of the whole call still count, their times do not)."""
    from gpulab.judge.batches import time_remote

    req, ws = ctx.request, ctx.request.workspace
    # The graded time first, then the sandbox's checking batch: a size's
    # first heavy work finds the GPU as a check without the replay finds it
    # (on the H100 matmul's replayed times, taken right after 20 products
    # of the sandbox's batch, were 1-5% above that batch's own).
    replayed = _replayed(ctx, spec, case, keep, warmup_s) if keep is not None else None
    t = time_remote(ctx, spec, fn, case, flusher, warmup_s=warmup_s, one_batch=keep is not None)
    implausible = t.implausible
    if replayed is not None and not implausible:
        implausible = _take_replayed(case, t, replayed)
    names = {**case.sizes, "elt": case.dtype.itemsize}
    nbytes = eval_formula(req.bytes, names) if req.bytes else None
    flops = eval_formula(req.flops, names) if req.flops else None
    sec = t.ms * 1e-3
    # Carried in the row so the roofline can place this run later.
    row = KernelRow(
        name=case.name,
        shape=case.shape,
        dtype=dtype_name(case.dtype),
        timed=t,
        flops=flops,
        bytes=nbytes,
        kind=req.kind,
        sizes=dict(case.sizes),
        intensity=(flops / nbytes) if flops and nbytes else None,
    )
    place(row, req.kind, sec, device_name, ws)
    peak_bw, peak_flops = ceilings.floor_peaks(device_name)
    floor = max(
        (nbytes or 0) / peak_bw if peak_bw else 0.0,
        (flops or 0) / peak_flops.get(dtype_name(case.dtype), math.inf) if peak_flops else 0.0,
    )
    if floor and sec < 0.9 * floor:
        implausible = (
            f"{case.name} took {t.ms * 1e3:.1f} µs, below the "
            f"{floor * 1e6:.1f} µs the datasheet allows"
        )
    return row, implausible


def place(
    row: KernelRow, kind: str | None, sec: float, device_name: str, workspace: str | None
) -> None:
    """Where a row's time puts it: its throughput, and its fraction of the
    roof the letter is measured against, one fixed roof, the datasheet's
    (gpulab.gpu.ceilings.grading_roof): the same kernel, the same letter,
    whether or not the probe has run. Where the probe measured the copy, the
    row's fraction of that too, shown beside."""
    flops, nbytes, dtype = row.flops, row.bytes, row.dtype
    if kind == "compute" and flops:
        row.throughput, row.unit = flops / sec / 1e12, "TFLOP/s"
        row.roof = ceilings.grading_roof("compute", dtype, device_name, workspace)
        rate = flops / sec
    elif nbytes:
        row.throughput, row.unit = nbytes / sec / 1e9, "GB/s"
        row.roof = ceilings.grading_roof("memory", dtype, device_name, workspace)
        rate = nbytes / sec
        copy = ceilings.measured_copy(workspace, device_name)
        if copy and row.roof.source == "datasheet":
            row.of_measured_copy = rate / copy
    else:
        return
    row.roofline_fraction = rate / row.roof.value if row.roof.value else None
    row.ceiling = row.roof.label


def _time_baseline(spec: KernelSpec, case: Case, row: KernelRow, flusher: L2Flusher) -> None:
    from gpulab.measure.timing import measure

    assert spec.baseline is not None  # timed only for a spec that has one
    # Right after the learner's batches, at their clocks: a short warm-up,
    # still held until two successive batches agree (measure's rule).
    b = measure(spec.baseline(case), flusher=flusher, log_clocks=False, warmup_s=WARMUP_NEXT_S)
    row.baseline, row.baseline_ms = spec.baseline_name, float(b["ms"])
    row.speedup = row.baseline_ms / row.ms


def _summary(
    spec: KernelSpec,
    rows: list[KernelRow],
    device_name: str,
    implausible: str | None,
    workspace: str | None = None,
) -> KernelTiming:
    fractions = [r.roofline_fraction for r in rows if r.roofline_fraction]
    speedups = [r.speedup for r in rows if r.speedup]
    copies = [r.of_measured_copy for r in rows if r.of_measured_copy]
    on_speedup = spec.grade_on == "speedup"
    score = _geomean(speedups if on_speedup else fractions)
    against = roof_text([r.roof for r in rows if r.roof is not None])
    graded = bool(speedups if on_speedup else fractions)
    grade = (
        next(letter for threshold, letter in spec.grades if score >= threshold) if graded else "–"
    )
    roofline = f"{_geomean(fractions):.0%} of {against}" if fractions else ""
    if copies:
        copy = ceilings.measured_copy(workspace, device_name)
        at = f" {copy / 1e12:.3g} TB/s" if copy else ""
        roofline += f" ({_geomean(copies):.0%} of the{at} copy ceiling this GPU measured)"
    if not graded:
        summary = f"not graded: {against or 'no roof for this GPU'}"
    elif on_speedup:
        summary = f"grade {grade}: {_geomean(speedups):.2f}x {spec.baseline_name}"
        summary += f"; {roofline}" if roofline else ""
    else:
        summary = f"grade {grade}: {roofline}"
        if speedups:
            summary += f", {_geomean(speedups):.2f}x {spec.baseline_name}"
    cases: list[KernelRow | BackwardRow] = [*rows]
    return KernelTiming(
        cases=cases,
        grade=grade,
        roofline_fraction=_geomean(fractions),
        speedup=_geomean(speedups) if speedups else None,
        baseline=spec.baseline_name,
        throughput=_geomean([r.throughput or 0.0 for r in rows]),
        unit=rows[0].unit if rows else "",
        ms=_geomean([r.ms for r in rows]),
        summary=summary,
        implausible=implausible,
        device=device_name,
        graded_on=graded_on(spec, score, against if not on_speedup else spec.baseline_name),
    )


def roof_text(roofs: list[ceilings.Roof]) -> str:
    """What the rows' fractions were taken against, in one phrase: "the H200
    datasheet's 4.8 TB/s", or each roof of a datasheet named once ("the
    H200 datasheet's 989 bf16 TFLOP/s and 989 fp16 TFLOP/s")."""
    labels = list(dict.fromkeys(r.label for r in roofs if r.value))
    if len(labels) <= 1:
        return labels[0] if labels else (roofs[0].label if roofs else "")
    prefix = labels[0].split("'s ")[0] + "'s "
    if all(label.startswith(prefix) for label in labels):
        return prefix + " and ".join(label[len(prefix) :] for label in labels)
    return "; ".join(labels)


def graded_on(spec: KernelSpec, score: float, against: str) -> GradedOn:
    """The letter's basis, for the result's JSON and the Results pane: what
    was measured, against what, and the bands ("A from 65%, B from 55%...")."""
    speedup = spec.grade_on == "speedup"
    bands = [(t, letter) for t, letter in spec.grades if t > 0]
    shown = ", ".join(
        f"{letter} from {t:.2f}x" if speedup else f"{letter} from {t:.0%}" for t, letter in bands
    )
    what = f"the speedup over {against}" if speedup else f"the fraction of {against}"
    return {
        "basis": spec.grade_on,
        "against": against,
        "score": score,
        "bands": [[t, letter] for t, letter in spec.grades],
        "text": f"graded on {what}: {shown}" if against else "",
    }
