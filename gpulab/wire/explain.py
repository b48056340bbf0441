"""--explain's frames, judge <-> sandbox (gpulab.explain: advice, never
the grade).

This module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from gpulab.wire.fields import _int, _items, _need_str, _object, _opt_str, _strings
from gpulab.wire.protocol import ProtocolError, number, text
from gpulab.wire.replies import Reply

# --- --explain (gpulab.explain: advice, never the grade) ----------------------------


@dataclass(frozen=True, slots=True)
class ExplainRequest:
    """`explain`: trace the learner's function on each case (gpulab.explain
    .cases' descriptions, plain JSON) and compile the kernels for `arch`
    within `budget_s`, or, with `compile` "later", send their keys back
    for `explain_compile` requests."""

    TYPE: ClassVar[str] = "explain"
    function: str
    arch: str
    budget_s: float
    cases: list[Any]
    compile: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.TYPE,
            "function": self.function,
            "arch": self.arch,
            "budget_s": self.budget_s,
        }
        if self.compile is not None:
            out["compile"] = self.compile
        out["cases"] = self.cases
        return out

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> ExplainRequest:
        return cls(
            function=_need_str(msg, "function"),
            arch=str(msg.get("arch") or "sm_90"),
            budget_s=float(msg.get("budget_s", 1.5)),
            cases=list(msg.get("cases") or []),
            compile=_opt_str(msg.get("compile")),
        )


@dataclass(frozen=True, slots=True)
class Explained(Reply):
    """`explained`: each case's launches and the compile facts by kernel key
    (plain JSON: they go into the result's `explain.facts`), how many
    kernels were left uncompiled, the sandbox's seconds and steps, the
    keys still to compile ("later"), or why it could not (`error`)."""

    TYPE: ClassVar[str] = "explained"
    cases: list[Any] = field(default_factory=list)
    compiled: dict[str, Any] = field(default_factory=dict)
    not_compiled: int = 0
    seconds: float | None = None
    steps: dict[str, float] = field(default_factory=dict)
    arch: str = ""
    pending: tuple[str, ...] = ()
    error: str = ""

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Explained:
        steps = _object(frame.get("steps"))
        return cls(
            cases=[c for c in _items(frame.get("cases")) if isinstance(c, dict)],
            compiled=dict(_object(frame.get("compiled"))),
            not_compiled=_int(frame.get("not_compiled")),
            seconds=number(frame.get("seconds")),
            steps={str(k): v for k, v in steps.items() if number(v) is not None},
            arch=text(frame.get("arch"), 40),
            pending=_strings(frame.get("pending")),
            error=text(frame.get("error"), 400),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.TYPE, "cases": self.cases, "compiled": self.compiled}
        if self.error:
            out["error"] = self.error
            return out
        out.update(
            not_compiled=self.not_compiled,
            seconds=self.seconds,
            steps=self.steps,
            arch=self.arch,
            pending=list(self.pending),
        )
        return out


@dataclass(frozen=True, slots=True)
class ExplainPrepare:
    """`explain_prepare`: CPU --explain's first request, its reply read by
    the next one: torch, a compiled Triton and the learner's file imported."""

    TYPE: ClassVar[str] = "explain_prepare"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE}

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> ExplainPrepare:
        return cls()


@dataclass(frozen=True, slots=True)
class Prepared(Reply):
    """`prepared`: the imports done, or why not (`explain` says it again)."""

    TYPE: ClassVar[str] = "prepared"
    error: str | None = None

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Prepared:
        return cls(_opt_str(frame.get("error")))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.TYPE}
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(frozen=True, slots=True)
class ExplainCompile:
    """`explain_compile`: compile one kernel the last `explain` traced."""

    TYPE: ClassVar[str] = "explain_compile"
    key: str

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "key": self.key}

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> ExplainCompile:
        return cls(str(msg.get("key", "")))


@dataclass(frozen=True, slots=True)
class ExplainCompiled(Reply):
    """`compiled` (to an `explain_compile`): that kernel's compile facts by
    its key (plain JSON), nothing when it was not pending."""

    TYPE: ClassVar[str] = "compiled"
    compiled: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> ExplainCompiled:
        return cls(dict(_object(frame.get("compiled"))))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "compiled": self.compiled}


@dataclass(frozen=True, slots=True)
class ProfileRequest:
    """`profile`: one call of the function on `case` (its name, args and
    kwargs as gpulab.explain.judge.cases describes them, plain JSON) between
    cudaProfilerStart and Stop, after `warmup` calls, inputs drawn from `seed`."""

    TYPE: ClassVar[str] = "profile"
    function: str
    case: dict[str, Any]
    warmup: int = 1
    seed: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "function": self.function,
            "case": self.case,
            "warmup": self.warmup,
            "seed": self.seed,
        }

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> ProfileRequest:
        case = msg.get("case") or {}
        if not isinstance(case, dict):
            raise ProtocolError("a `profile` request whose case is not an object")
        return cls(
            _need_str(msg, "function"), case, int(msg.get("warmup", 1)), int(msg.get("seed", 0))
        )


@dataclass(frozen=True, slots=True)
class Profiled(Reply):
    """`profiled`: the kernels the profiled call launched, or why it failed
    (the numbers are ncu's own, read by the judge)."""

    TYPE: ClassVar[str] = "profiled"
    kernels: tuple[str, ...] = ()
    error: str = ""
    case: str = ""
    steps: dict[str, float] = field(default_factory=dict)

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Profiled:
        steps = _object(frame.get("steps"))
        return cls(
            kernels=_strings(frame.get("kernels"), 300),
            error=text(frame.get("error"), 300),
            case=text(frame.get("case"), 300),
            steps={str(k): v for k, v in steps.items() if number(v) is not None},
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.TYPE, "kernels": list(self.kernels)}
        if self.error:
            out["error"] = self.error
        else:
            out.update(case=self.case, steps=self.steps)
        return out
