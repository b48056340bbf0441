"""--explain's frames, judge <-> sandbox (gpulab.explain: advice, never
the grade).

Each frame is declared once; gpulab.wire.codec writes and reads it (a
request strictly, a reply tolerantly). The cases and the compile facts are
plain JSON: they go into the result as they are (`explain.facts`).

This module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from gpulab.wire.codec import Frame, Tolerant, wire
from gpulab.wire.protocol import JsonObject
from gpulab.wire.replies import Reply

# --- --explain (gpulab.explain: advice, never the grade) ----------------------------


@dataclass(frozen=True, slots=True)
class ExplainRequest(Frame):
    """`explain`: trace the learner's function on each case (gpulab.explain
    .cases' descriptions, plain JSON) and compile the kernels for `arch`
    within `budget_s`, or, with `compile` "later", send their keys back
    for `explain_compile` requests."""

    TYPE: ClassVar[str] = "explain"
    function: str
    arch: str
    budget_s: float
    cases: list[Any]
    compile: str | None = wire(None, omit=True)


@dataclass(frozen=True, slots=True)
class Explained(Tolerant, Reply):
    """`explained`: each case's launches and the compile facts by kernel key
    (the cases that are objects), how many kernels were left uncompiled,
    the sandbox's seconds and steps, the keys still to compile ("later"),
    or why it could not (`error`)."""

    TYPE: ClassVar[str] = "explained"
    cases: list[JsonObject] = wire(factory=list)
    compiled: JsonObject = wire(factory=dict)
    not_compiled: int = 0
    seconds: float | None = None
    steps: dict[str, float] = wire(factory=dict)
    arch: str = wire("", limit=40)
    pending: tuple[str, ...] = ()
    error: str = wire("", omit=True, limit=400)


@dataclass(frozen=True, slots=True)
class ExplainPrepare(Frame):
    """`explain_prepare`: CPU --explain's first request, its reply read by
    the next one: torch, a compiled Triton and the learner's file imported."""

    TYPE: ClassVar[str] = "explain_prepare"


@dataclass(frozen=True, slots=True)
class Prepared(Tolerant, Reply):
    """`prepared`: the imports done, or why not (`explain` says it again)."""

    TYPE: ClassVar[str] = "prepared"
    error: str | None = wire(None, omit=True)


@dataclass(frozen=True, slots=True)
class ExplainCompile(Frame):
    """`explain_compile`: compile one kernel the last `explain` traced."""

    TYPE: ClassVar[str] = "explain_compile"
    key: str


@dataclass(frozen=True, slots=True)
class ExplainCompiled(Tolerant, Reply):
    """`compiled` (to an `explain_compile`): that kernel's compile facts by
    its key (plain JSON), nothing when it was not pending."""

    TYPE: ClassVar[str] = "compiled"
    compiled: JsonObject = wire(factory=dict)


@dataclass(frozen=True, slots=True)
class ProfileRequest(Frame):
    """`profile`: one call of the function on `case` (its name, args and
    kwargs as gpulab.explain.judge.cases describes them, plain JSON) between
    cudaProfilerStart and Stop, after `warmup` calls, inputs drawn from `seed`."""

    TYPE: ClassVar[str] = "profile"
    function: str
    case: JsonObject
    warmup: int = 1
    seed: int = 0


@dataclass(frozen=True, slots=True)
class Profiled(Tolerant, Reply):
    """`profiled`: the kernels the profiled call launched, or why it failed
    (the numbers are ncu's own, read by the judge)."""

    TYPE: ClassVar[str] = "profiled"
    kernels: tuple[str, ...] = wire((), limit=300)
    error: str = wire("", omit=True, limit=300)
    case: str = wire("", limit=300)
    steps: dict[str, float] = wire(factory=dict)
