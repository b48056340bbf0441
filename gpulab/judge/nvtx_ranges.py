"""Lesson 07's range rules: the ranges a training step's profile must hold.

Read off the profile's events as the sandbox reports them
(gpulab.sandbox.training), for the judge (gpulab.judge.graders.nvtx_profile):
each range exists once, they nest and come in order without overlapping,
each holds the operations it should (matmuls in forward, the loss op in
loss, autograd's ...Backward nodes in backward, the optimizer's update in
optimizer_step) and none that belong to another.
"""

from __future__ import annotations

from collections.abc import Callable

from gpulab.gpu.traces import RangeTime
from gpulab.judge.case_row import case_row
from gpulab.sandbox.training import RANGES
from gpulab.wire.result import CaseRow
from gpulab.wire.training import ProfileEvent

# One of the profile's host-side events, as the judge parsed it
# (gpulab.wire.training.Trained keeps those whose every field has its type).
Event = ProfileEvent


STEP = "train_step"
PHASES = ("forward", "loss", "backward", "optimizer_step")

MATMUL = {"aten::addmm", "aten::mm", "aten::matmul", "aten::linear", "aten::bmm"}
LOSS = {
    "aten::cross_entropy_loss",
    "aten::nll_loss",
    "aten::nll_loss_nd",
    "aten::nll_loss_forward",
    "aten::log_softmax",
    "aten::_log_softmax",
}
OPTIM_OPS = {"aten::add_", "aten::mul_", "aten::addcmul_", "aten::addcdiv_", "aten::lerp_"}


def is_backward(name: str) -> bool:
    return name.startswith("autograd::engine::evaluate_function") or name.endswith("Backward0")


def is_optim(name: str) -> bool:
    return (
        name.startswith(("Optimizer.step#", "aten::_foreach_", "aten::_fused_"))
        or name in OPTIM_OPS
    )


# Per phase: what marks its work (used to spot it in another range), what it
# must hold (any one of), and how to say so.
MARKS: dict[str, Callable[[str], bool]] = {
    "forward": lambda n: n in MATMUL,
    "loss": lambda n: n in LOSS,
    "backward": is_backward,
    "optimizer_step": lambda n: n.startswith("Optimizer.step#"),
}
NEEDS: dict[str, tuple[Callable[[str], bool], str]] = {
    "forward": (MARKS["forward"], "matmul (aten::addmm / aten::mm)"),
    "loss": (MARKS["loss"], "loss op (aten::cross_entropy_loss)"),
    "backward": (is_backward, "autograd backward node (…Backward0)"),
    "optimizer_step": (
        is_optim,
        "optimizer update (Optimizer.step#…, aten::add_, aten::_foreach_*)",
    ),
}
# The backward pass runs matmuls of its own: those are not forward's work.
FOREIGN = {
    p: [q for q in PHASES if q != p and not (p == "backward" and q == "forward")] for p in PHASES
}


def _inside(e: Event, r: Event) -> bool:
    return e.start >= r.start and e.end <= r.end


def user_ranges(events: list[Event]) -> list[str]:
    """Names of ranges the learner made (record_function), torch's own left out."""
    names = []
    for e in events:
        n = e.name
        if n.startswith(("aten::", "autograd::", "Optimizer.", "ProfilerStep", "cuda", "Memcpy")):
            continue
        if e.user or (
            e.user is None and "::" not in n and not n.endswith("Backward0") and n != "detach"
        ):
            if n not in names:
                names.append(n)
    return names


_RETURNING = frozenset(
    {
        "detach",
        "alias",
        "view",
        "_local_scalar_dense",
        "item",
        "clone",
        "to",
        "_to_copy",
        "copy_",
        "empty_strided",
        "empty_like",
        "lift_fresh",
    }
)


def check_ranges(events: list[Event]) -> list[CaseRow]:
    """The range checks as result cases (name, passed, detail)."""
    found = {name: [e for e in events if e.name == name] for name in RANGES}
    present = _present_case(events, found)
    if not present.passed:
        return [present]
    r = {n: found[n][0] for n in RANGES}
    ops = [e for e in events if e.name not in RANGES]
    return [
        present,
        _order_case(r),
        *(_phase_case(name, ops, r) for name in PHASES),
        _outside_case(ops, r),
    ]


def _present_case(events: list[Event], found: dict[str, list[Event]]) -> CaseRow:
    """Each range once, by its exact name."""
    missing = [n for n in RANGES if not found[n]]
    twice = [n for n in RANGES if len(found[n]) > 1]
    others = [n for n in user_ranges(events) if n not in RANGES]
    detail = ""
    if missing:
        detail = "missing: " + ", ".join(missing)
        if others:
            detail += (
                "; ranges found with other names: "
                + ", ".join(others[:8])
                + " (names must match exactly)"
            )
    elif twice:
        detail = (
            ", ".join(f"{n} appears {len(found[n])} times" for n in twice)
            + " in one step (each range once)"
        )
    return case_row(
        name="ranges present",
        passed=not detail,
        detail=detail or "train_step, forward, loss, backward, optimizer_step",
    )


def _order_case(r: dict[str, Event]) -> CaseRow:
    """The four phases inside the step's range, in order, none overlapping."""
    problems = [f"{n} is not inside {STEP}" for n in PHASES if not _inside(r[n], r[STEP])]
    for a, b in zip(PHASES, PHASES[1:], strict=False):
        if r[a].start > r[b].start:
            problems.append(f"{a} starts after {b} (expected order: {', '.join(PHASES)})")
        elif r[a].end > r[b].start:
            problems.append(f"{a} overlaps {b} (close one range before opening the next)")
    return case_row(
        name="ranges nest and come in order",
        passed=not problems,
        detail="; ".join(problems) or f"four phases inside {STEP}, in order",
    )


def _phase_case(name: str, ops: list[Event], r: dict[str, Event]) -> CaseRow:
    """One phase's range holds its own work and no other phase's."""
    inside = [e.name for e in ops if _inside(e, r[name])]
    need, label = NEEDS[name]
    problems = [] if any(need(n) for n in inside) else [f"holds no {label}"]
    for other in FOREIGN[name]:
        stray = [n for n in inside if MARKS[other](n)]
        if stray:
            problems.append(f"holds {other}'s work ({stray[0]})")
    ms = (r[name].end - r[name].start) / 1e3
    return case_row(
        name=f"range {name}",
        passed=not problems,
        ops=len(inside),
        ms=ms,
        detail="; ".join(problems) or f"{len(inside)} ops, {ms:.3f} ms",
    )


def _outside_case(ops: list[Event], r: dict[str, Event]) -> CaseRow:
    """Each phase's work must be inside its range, not (also) outside it."""
    outside = []
    for name in PHASES:
        for e in ops:
            if not MARKS[name](e.name) or _inside(e, r[name]):
                continue
            if name == "forward" and _inside(e, r["backward"]):
                continue
            outside.append(f"{e.name} ({name}'s work) runs outside the {name} range")
            break
    # And the step's own work (zero_grad included) inside train_step; handing
    # the loss back (detach, .item(), a copy) may follow it.
    for e in ops:
        if (
            e.name.startswith(("aten::", "Optimizer.", "autograd::"))
            and e.name[len("aten::") :] not in _RETURNING
            and not _inside(e, r[STEP])
        ):
            outside.append(
                f"{e.name} runs outside the {STEP} range (the whole step, "
                "zero_grad included, belongs inside it)"
            )
            break
    return case_row(
        name="all of each phase inside its range",
        passed=not outside,
        detail="; ".join(outside) or "nothing of a phase left outside it",
    )


def range_times(events: list[Event]) -> list[RangeTime]:
    """Each expected range found: its wall time and how many ops ran inside."""
    rows: list[RangeTime] = []
    for name in RANGES:
        mine = [e for e in events if e.name == name]
        if mine:
            r = mine[0]
            ops = sum(1 for e in events if e.name not in RANGES and _inside(e, r))
            rows.append({"name": name, "ms": (r.end - r.start) / 1e3, "ops": ops})
    return rows
