"""Points from a run: correctness, speed against the reference, lateness.

A passing submission earns its assignment's correctness points (`points`
less `speed_points`). Speed points need a GPU: the submission's median time
on each timed case is compared with the reference kernel's, timed on the
same GPU in the same batch (gpulab.gradebook.worker), and the geometric mean
of reference_ms / submission_ms over the cases both timed is the speed
ratio (1.0: as fast as the reference). At `full_at` or above, all the
speed points; at `zero_at` or below, none; linear between. The GPU's name
cancels out of the ratio, so a class graded half on A100s and half on H100s
is scored alike. On a CPU nothing is timed: correctness points only, and
the run's `speed_note` says so.

The judge's status is kept as it is; a failure the judge's words name as a
cheat is recorded as `refused` (REFUSALS).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpulab.gradebook.config import Assignment, GradeConfig
from gpulab.gradebook.records import CheckJson, ReferenceRecord

# The judge's words for a refusal of a cheat (gpulab.judge.kernel and the
# sandbox): a failure whose summary holds one is recorded as `refused`.
REFUSALS = ("cheat:", "second draw", "private channel", "refused", "implausible")
NOT_TIMED_CPU = "not timed (graded on the CPU): correctness points only"


@dataclass(frozen=True)
class Scored:
    status: str
    passed: bool
    timed: bool
    speed_ratio: float | None
    speed_note: str
    score: float  # before any late penalty
    max_score: float
    grade: str | None  # the judge's letter for the timing, on a GPU


def status_of(result: CheckJson) -> str:
    status = str(result.get("status") or "error")
    summary = str(result.get("summary") or "").lower()
    if status == "failed" and any(word in summary for word in REFUSALS):
        return "refused"
    return status


def _timed_cases(result: CheckJson | None) -> dict[str, float]:
    timing = (result or {}).get("timing")
    if not isinstance(timing, dict):
        return {}
    out: dict[str, float] = {}
    for case in timing.get("cases") or []:
        if not isinstance(case, dict):
            continue
        name, ms = case.get("name") or case.get("shape"), case.get("ms")
        if isinstance(name, str) and isinstance(ms, (int, float)) and not isinstance(ms, bool):
            if math.isfinite(ms) and ms > 0:
                out[name] = float(ms)
    return out


def speed_ratio(result: CheckJson, reference: ReferenceRecord | None) -> tuple[float | None, str]:
    """(the geometric mean of reference_ms / ms over the cases both timed,
    or None when there is nothing to compare) and a note for people."""
    mine = _timed_cases(result)
    if not mine:
        return None, NOT_TIMED_CPU if str(result.get("device", "")).startswith(
            "CPU"
        ) else "not timed"
    timing = result.get("timing") or {}
    if isinstance(timing, dict) and timing.get("implausible"):
        return None, f"timing refused as implausible: {timing.get('implausible')}"
    theirs = _timed_cases((reference or {}).get("result"))
    common = [n for n in mine if n in theirs]
    if not common:
        return None, "no reference timing on this GPU to compare with: no speed points"
    ratio = math.exp(sum(math.log(theirs[n] / mine[n]) for n in common) / len(common))
    gpu = (reference or {}).get("gpu") or "this GPU"
    return ratio, f"{ratio:.2f}x the reference's speed on {gpu} ({len(common)} cases)"


def speed_fraction(ratio: float, cfg: GradeConfig) -> float:
    span = cfg.speed_full_at - cfg.speed_zero_at
    return min(1.0, max(0.0, (ratio - cfg.speed_zero_at) / span))


def points(passed: bool, ratio: float | None, assignment: Assignment, cfg: GradeConfig) -> float:
    """A run's points before any late penalty, with the assignment as it is now."""
    if not passed:
        return 0.0
    score = assignment.points - assignment.speed_points
    if ratio is not None:
        score += assignment.speed_points * speed_fraction(ratio, cfg)
    return round(score, 4)


def score_run(
    result: CheckJson,
    reference: ReferenceRecord | None,
    assignment: Assignment,
    cfg: GradeConfig,
) -> Scored:
    status = status_of(result)
    passed = status == "passed"
    ratio, note = speed_ratio(result, reference) if passed else (None, "")
    score = points(passed, ratio, assignment, cfg)
    timing = result.get("timing")
    grade = timing.get("grade") if isinstance(timing, dict) else None
    return Scored(
        status=status,
        passed=passed,
        timed=bool(_timed_cases(result)),
        speed_ratio=ratio,
        speed_note=note if assignment.speed_points > 0 else "",
        score=round(score, 4),
        max_score=assignment.points,
        grade=grade if isinstance(grade, str) else None,
    )
