"""Grader for lesson 08's cost model: the bytes each split of the MLP moves.

The learner's `ring_bytes`, `step_cost` and `bubble` are compared with the
answers below on the lesson's worked example and on MLPs, meshes and links
drawn from this run's secret seed, so answers can't be memorised. A wrong
number is checked against the usual mistakes (an all-reduce counted once,
(n-1)·S for (n-1)/n·S, the backward all-reduce of tensor parallel left out,
GiB for GB, ...) so the learner hears which one it looks like.

The answers live here, in a grader module: the sandbox cannot read its
source or bytecode (gpulab.judge.policy.grader_files). Pure arithmetic: no torch,
no GPU; the same on every machine.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack

from gpulab.judge.case_row import case_row
from gpulab.judge.plain import fmt as _fmt
from gpulab.judge.plain import try_call as _try

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext

RTOL = 1e-6
N_RANDOM = 5
RING = ("all_gather", "reduce_scatter", "all_reduce")
STRATEGIES = ("data", "tensor", "zero12", "fsdp")
Field = Literal["bytes", "flops", "comm_ms", "compute_ms", "intensity", "bound"]
FIELDS: tuple[Field, ...] = ("bytes", "flops", "comm_ms", "compute_ms", "intensity", "bound")


class Cost(TypedDict):
    """What step_cost returns (FIELDS), worked out by the judge."""

    bytes: float
    flops: float
    comm_ms: float
    compute_ms: float
    intensity: float | None
    bound: str


class Mistake(TypedDict, total=False):
    """A usual mistake, made on purpose to name the learner's (cost's keywords)."""

    share: str
    once: bool
    elements: bool
    biases: bool
    no_dx: bool
    d_for_d_out: bool
    one_gather: bool
    train_factor: int
    all_flops: bool
    gib: bool
    flip: bool


def _close(got: Any, want: float | str | None) -> bool:
    if want is None or isinstance(want, str):
        return bool(got == want)
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return False
    return math.isfinite(got) and abs(got - want) <= RTOL * abs(want)


# --- the answers, and the mistakes they are told apart from ----------------------


def ring(
    collective: str, nbytes: float, n: int, *, share: str = "ring", once: bool = False
) -> float:
    """Bytes a device sends; `share` and `once` make the usual mistakes."""
    per = {"ring": (n - 1) / n, "whole": 1.0, "to_each": n - 1.0, "both_ways": 2 * (n - 1) / n}
    s = per[share] * nbytes
    return s if collective != "all_reduce" or once else 2 * s


def collectives(
    mlp: MLP, strategy: str, training: bool, **m: Unpack[Mistake]
) -> list[tuple[str, float]]:
    elt = 1 if m.get("elements") else mlp.elt
    weights = (mlp.d * mlp.h + mlp.h * mlp.d_out) * elt
    if m.get("biases"):
        weights += (mlp.h + mlp.d_out) * elt
    if strategy == "data":
        return [("all_reduce", weights)] if training else []
    if strategy == "tensor":
        y = ("all_reduce", mlp.batch * (mlp.d if m.get("d_for_d_out") else mlp.d_out) * elt)
        dx = ("all_reduce", mlp.batch * mlp.d * elt)
        return [y, dx] if training and not m.get("no_dx") else [y]
    if strategy == "zero12":
        return [("reduce_scatter", weights), ("all_gather", weights)] if training else []
    gather = ("all_gather", weights)
    if not training:
        return [gather]
    return (
        [gather, ("reduce_scatter", weights)]
        if m.get("one_gather")
        else [
            gather,
            gather,
            ("reduce_scatter", weights),
        ]
    )


def cost(mlp: MLP, n: int, strategy: str, training: bool, link: Link, **m: Unpack[Mistake]) -> Cost:
    nbytes = sum(
        ring(c, s, n, share=m.get("share", "ring"), once=m.get("once", False))
        for c, s in collectives(mlp, strategy, training, **m)
    )
    forward = 2 * mlp.batch * (mlp.d * mlp.h + mlp.h * mlp.d_out)
    flops = (
        (m.get("train_factor", 3) if training else 1) * forward / (1 if m.get("all_flops") else n)
    )
    giga = 2.0**30 if m.get("gib") else 1e9
    comm_ms = nbytes / (link.gbs * giga) * 1e3
    compute_ms = flops / (link.tflops * 1e12) * 1e3
    bound = "communication" if comm_ms > compute_ms else "compute"
    if m.get("flip"):
        bound = "compute" if bound == "communication" else "communication"
    return {
        "bytes": nbytes,
        "flops": flops,
        "comm_ms": comm_ms,
        "compute_ms": compute_ms,
        "intensity": flops / nbytes if nbytes else None,
        "bound": bound,
    }


def idle(p: int, m: int, v: int, mistake: str = "") -> float:
    if mistake == "ratio":
        return (p - 1) / (v * m)
    if mistake == "no_v":
        return (p - 1) / (m + p - 1)
    return (p - 1) / (v * m + p - 1)


RING_MISTAKES: tuple[tuple[str, Mistake], ...] = (
    ("you sent the whole tensor; a ring sends (n-1)/n of it", dict(share="whole")),
    (
        "you sent the tensor to each of the n-1 others; a ring sends (n-1)/n of it",
        dict(share="to_each"),
    ),
    ("you counted bytes sent and received; count what a device sends", dict(share="both_ways")),
    ("you counted an all-reduce once; it is a reduce-scatter and an all-gather", dict(once=True)),
)
STEP_MISTAKES: tuple[tuple[str, Mistake], ...] = RING_MISTAKES + (
    ("you counted elements, not bytes (times mlp.elt)", dict(elements=True)),
    ("you counted the biases; the conventions leave them out", dict(biases=True)),
    ("you left out tensor parallel's backward all-reduce of the gradient of x", dict(no_dx=True)),
    ("you used d for y's width; y is B×d_out", dict(d_for_d_out=True)),
    (
        "you gathered FSDP's weights once; it gathers before the forward and the backward",
        dict(one_gather=True),
    ),
    ("you took a training step as 2× the forward; it is 3×", dict(train_factor=2)),
    ("you gave each device all the FLOPs; each does 1/n", dict(all_flops=True)),
    ("you used 2**30 for giga (GiB/s); GB/s is 10**9 bytes", dict(gib=True)),
    ("you flipped the bound; compare the two times", dict(flip=True)),
)


def _diagnose(field: Field, got: Any, args: StepArgs) -> str:
    for label, change in STEP_MISTAKES:
        alt = cost(*args, **change)
        if alt[field] != cost(*args)[field] and _close(got, alt[field]):
            return f" — looks like {label}"
    return ""


# --- the cases ------------------------------------------------------------------------


@dataclass(frozen=True)
class MLP:
    batch: int
    d: int
    h: int
    d_out: int
    elt: int


@dataclass(frozen=True)
class Link:
    gbs: float
    tflops: float


# step_cost's arguments: (mlp, n, strategy, training, link).
StepArgs = tuple[MLP, int, str, bool, Link]


def _mlp(batch: int, d: int, h: int, d_out: int, elt: int) -> MLP:
    return MLP(batch, d, h, d_out, elt)


LESSON = (
    "the lesson's example",
    _mlp(8192, 8192, 32768, 8192, 2),
    8,
    Link(450.0, 989.0),
)
LINKS = [
    (450.0, 989.0),
    (50.0, 989.0),
    (900.0, 2250.0),
    (25.0, 312.0),
    (200.0, 67.0),
    (100.0, 495.0),
]


def _near_tie(mlp: MLP, n: int, link: Link) -> bool:
    for s in STRATEGIES:
        for t in (False, True):
            c = cost(mlp, n, s, t, link)
            if c["bytes"] and abs(c["comm_ms"] / c["compute_ms"] - 1) < 1e-3:
                return True
    return False


def _draw(rng: random.Random) -> tuple[MLP, int, Link]:
    for _ in range(1000):
        n = rng.choice([2, 3, 4, 8, 16, 64])
        d = rng.randrange(256, 16385, 128)
        d_out = d if rng.random() < 0.5 else rng.randrange(128, 16385, 128)
        h = rng.randrange(512, 65537, 256)
        mlp = _mlp(n * rng.randint(1, 4096), d, h, d_out, rng.choice([2, 4]))
        gbs, tflops = rng.choice(LINKS)
        link = Link(gbs, tflops)
        if not _near_tie(mlp, n, link):
            return mlp, n, link
    raise RuntimeError("could not draw a configuration (a gpulab bug)")


def scenarios(ctx: CaseContext) -> list[tuple[str, MLP, int, Link]]:
    out = [LESSON]
    for i in range(N_RANDOM):
        mlp, n, link = _draw(random.Random(ctx.seed(800 + i)))
        out.append((f"unseen MLP {i + 1}", mlp, n, link))
    return out


def _describe(mlp: MLP, n: int, link: Link) -> str:
    return (
        f"B={mlp.batch} d={mlp.d} h={mlp.h} d_out={mlp.d_out} elt={mlp.elt} n={n}; "
        f"link {link.gbs:g} GB/s, {link.tflops:g} TFLOP/s"
    )


def _check_ring(ctx: GradeContext, fn: Any, title: str, nbytes: float, n: int) -> None:
    """Each collective over y (B×d_out), the tensor tensor parallel all-reduces."""
    for c in RING:
        got, err = _try(ctx, fn, c, nbytes, n)
        want = ring(c, nbytes, n)
        detail = err
        if not err and not _close(got, want):
            detail = f"got {_fmt(got)}, expected {_fmt(want)}"
            for label, change in RING_MISTAKES:
                alt = ring(
                    c, nbytes, n, share=change.get("share", "ring"), once=change.get("once", False)
                )
                if alt != want and _close(got, alt):
                    detail += f" — looks like {label}"
                    break
        name = f"{title}: ring_bytes({c!r}, {nbytes:.0f}, n={n})"
        ctx.add_case(case_row(name=name, passed=not detail, detail=detail))


def _check_step(ctx: GradeContext, fn: Any, title: str, args: StepArgs) -> None:
    mlp, n, strategy, training, link = args
    got, err = _try(ctx, fn, *args)
    want = cost(*args)
    detail = err
    if not err:
        if not isinstance(got, dict):
            detail = f"returned {type(got).__name__}; expected a dict with keys {', '.join(FIELDS)}"
        elif missing := [f for f in FIELDS if f not in got]:
            detail = f"the returned dict lacks {', '.join(repr(k) for k in missing)}"
        else:
            bad = next((f for f in FIELDS if not _close(got[f], want[f])), None)
            if bad:
                detail = (
                    f"{bad}: got {_fmt(got[bad])}, expected {_fmt(want[bad])}"
                    f"{_diagnose(bad, got[bad], args)}"
                )
                if bad == "bound":
                    detail += (
                        f" (compute {want['compute_ms']:.4g} ms, "
                        f"communication {want['comm_ms']:.4g} ms)"
                    )
    name = f"{title}: {strategy} {'training step' if training else 'forward'}"
    ctx.add_case(
        case_row(
            name=name,
            passed=not detail,
            detail=detail + (f" [{_describe(mlp, n, link)}]" if detail else ""),
        )
    )


def _check_bubble(ctx: GradeContext, fn: Any, title: str, rng: random.Random) -> None:
    p, m, v = rng.choice([2, 4, 8, 16]), rng.choice([1, 4, 16, 64, 100]), rng.choice([1, 2, 4])
    got, err = _try(ctx, fn, p, m, v)
    want = idle(p, m, v)
    detail = err
    if not err and not _close(got, want):
        detail = f"got {_fmt(got)}, expected {_fmt(want)}"
        if v > 1 and _close(got, idle(p, m, v, "no_v")):
            detail += " — looks like GPipe's bubble; v stages a device shorten it"
        elif _close(got, idle(p, m, v, "ratio")):
            detail += (
                " — looks like the bubble's time over the work's; the fraction is of the whole"
            )
    ctx.add_case(
        case_row(name=f"{title}: bubble(p={p}, m={m}, v={v})", passed=not detail, detail=detail)
    )


def grade(ctx: GradeContext) -> None:
    fns = {name: ctx.function(name) for name in ("ring_bytes", "step_cost", "bubble")}
    for k, (title, mlp, n, link) in enumerate(scenarios(ctx)):
        rng = random.Random(ctx.seed(850 + k))
        _check_ring(ctx, fns["ring_bytes"], title, float(mlp.batch * mlp.d_out * mlp.elt), n)
        for strategy in STRATEGIES:
            for training in (False, True):
                _check_step(ctx, fns["step_cost"], title, (mlp, n, strategy, training, link))
        _check_bubble(ctx, fns["bubble"], title, rng)
    ctx.notes.append(
        "Checked on the lesson's worked example and on MLPs, meshes and links drawn "
        "fresh for this run; pure arithmetic, the same on every machine."
    )
