"""Timing that rests on no claim of the sandbox's: a case's launches,
recorded once at the timed size, run again and timed in the replay's
sandbox (gpulab.sandbox.replay.replay_time), which runs no learner Python.

The sandbox's own timed batches (gpulab.judge.batches) time the learner's
whole call and report the times themselves: a claim, which the judge can
bound only by its wall clock, and on a GPU the host's time between calls
(80-130 µs on an H200) hides a claim 20% short of a 13 µs kernel. Here the
judge's own code makes the measurement: the kernels the file defines (as
gpulab.sandbox.replay_source keeps them), launched as the record says, on
the judge's own copies of the inputs, between CUDA events,
the L2 flushed before each; every repetition's result is checked against
the judge's reference, as a timed batch's is. The repetitions run on the
recorded call's inputs scaled by powers of two (TIMED_SCALES). What the grade does not
count: the wrapper's host time between launches (the bench does not count
it either) and torch ops other than a replay's steps.

On a GPU this runs where gpulab.judge.replay.gpu_replay says so (off until
a GPU run has checked it against every reference); the CPU runs the same
requests through the interpreter, timed by a clock, to test the path.
"""

from __future__ import annotations

import math
import zlib
from typing import TYPE_CHECKING, Any

import torch

from gpulab.judge.batches import BATCH_REPS, MAX_REPS, REL_ERR, _batch_size, mismatches
from gpulab.judge.replay import WHY
from gpulab.judge.replay_again import scale_case
from gpulab.measure.timing import _stats

if TYPE_CHECKING:
    from gpulab.judge.kernel import Kept
    from gpulab.judge.replay import Replayer

WRONG = "your Triton kernels, run again alone at the timed size, gave a wrong result"
# Each repetition runs on the recorded call's inputs times one of these,
# drawn from the judge's secret seed, and must give the reference there:
# launches recorded at the timed size are held to the rule the correctness
# cases' replays are (gpulab.judge.replay_again), repetition by repetition.
# No learner code runs in the replay's sandbox and its buffers are made
# afresh each repetition, so no answer can be kept from one to the next.
TIMED_SCALES = (1.0, 0.5, 0.25, 0.125)


def replayed_times(
    replayer: Replayer,
    spec: Any,
    case: Any,
    kept: Kept,
    seed: int,
    warmup_s: float,
    batch: int = BATCH_REPS,
) -> tuple[dict[str, float] | None, str]:
    """The statistics of the case's replayed launches (gpulab.measure.timing's
    keys: ms, min_ms, ..., reps), or None and why they could not be had.
    `kept`: a guarded call at the case's size, recorded; `seed`: the
    judge's secret seed for this case (which power of two each repetition's
    inputs are scaled by, and which rows of a large result are checked)."""
    if kept.expect is None:
        return None, "the timed size's call was not recorded"
    plan, problem = replayer.plan(kept.record, kept.refs, [kept.expect])
    if plan is None:
        return None, WHY + problem
    if replayer.pending is not None:  # a correctness case's replay still in flight
        return None, "a correctness replay was still running"
    g = torch.Generator().manual_seed(seed + zlib.crc32(f"replay {case.name}".encode()) % 100003)
    pick = torch.Generator().manual_seed(seed + zlib.crc32(f"replay rows {case.name}".encode()))
    if kept.expect.like.is_cuda:
        # As the sandbox's batches are sized: the judge's copies of the
        # inputs and the result slots, and the replay's buffers, at 30% of
        # the free memory at most.
        per_rep = 2 * sum(b.nbytes for b in plan.buffers) + 2 * _nbytes(kept.expect)
        batch = min(batch, _batch_size(per_rep))
    times: list[float] = []
    warm = warmup_s
    while len(times) < MAX_REPS:
        scales = [
            TIMED_SCALES[int(i)] for i in torch.randint(len(TIMED_SCALES), (batch,), generator=g)
        ]
        reply, results, problem = replayer.time(plan, scales, [kept.expect], warm)
        if reply is None or problem:
            return None, problem
        if len(reply.times_ms) != batch or min(reply.times_ms) < 0:
            return None, "the replay's timing came back malformed"
        for n, (c, row) in enumerate(zip(scales, results, strict=True)):
            why = _wrong(spec, scale_case(case, c), row[0], pick)
            if why:
                return None, f"{WRONG} (repetition {n + 1}: {why})."
        times.extend(reply.times_ms)
        warm = 0.0
        if len(times) >= 10 and _stats(times)["rse"] <= REL_ERR:
            break
    return _stats(times), ""


def _nbytes(expect: Any) -> int:
    return math.prod(expect.shape) * expect.like.dtype.itemsize


def _wrong(spec: Any, case: Any, got: torch.Tensor, pick: torch.Generator) -> str:
    """What is wrong with one repetition's result ("" when it is right), by
    the rule a timed batch's results are checked with."""
    from gpulab.judge.batches import _output_and_reference

    label, got, want = _output_and_reference(spec, case, got, pick)
    atol, rtol = spec.tolerance(case.dtype)
    bad = mismatches(got, want, atol, rtol)
    if bad:
        return f"{bad} of {label or 'its'} values wrong"
    return ""
