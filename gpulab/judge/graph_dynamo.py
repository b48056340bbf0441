"""Lesson 06's graph-break rules, applied to Dynamo's report from the sandbox.

Dynamo's trace can only happen where the learner's step lives: the sandbox
traces it (gpulab.sandbox.dynamo) and reports the graphs, the breaks and any
opaque calls; the judge (gpulab.judge.graders.graph_breaks) applies the rules here.
Also the small helpers the grader's sandbox requests share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpulab.check.protocol import dict_field, text
from gpulab.sandbox import learner

if TYPE_CHECKING:
    from gpulab.judge.context import GradeContext

# --- the sandbox's replies ------------------------------------------------------


def as_int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def args_nbytes(args: tuple) -> int:
    """Arena bytes to send `args` to the sandbox."""
    from gpulab.judge.kernel import _storage_nbytes, _tensors

    return sum(_storage_nbytes([t]) for t in _tensors(args)) + 256 * 16


def sandbox_reply(reply: dict[str, Any], kind: str) -> dict[str, Any]:
    """The reply when it is of `kind`; the learner's error or the sandbox's
    failure raised otherwise."""
    if reply.get("type") == "raised":
        raise learner.LearnerError(
            text(reply.get("summary"), 2000), text(reply.get("message"), 20000)
        )
    if reply.get("type") != kind:
        from gpulab.judge.context import GradeFailed

        raise GradeFailed(
            f"the sandbox failed: {text(reply.get('summary'))}",
            text(reply.get("message"), 4000),
            status="error",
        )
    return reply


def config_changed(ctx: GradeContext, report: dict[str, Any]) -> None:
    """A step that sets Dynamo's config while it runs (capture_scalar_outputs
    lets .item() into the graph) changes the rules it is traced under."""
    changed = [text(k, 80) for k in report.get("config_changed", []) if isinstance(k, str)]
    if changed:
        ctx.fail(
            "your step changes torch._dynamo.config while it runs: " + ", ".join(changed),
            "The check traces your step under Dynamo's defaults; remove the graph breaks "
            "instead of changing what counts as one.",
        )


def refuse_disabled(ctx: GradeContext) -> None:
    ctx.fail(
        "`step` is wrapped by torch.compiler.disable / torch._dynamo.disable / torch.compile",
        "The grader compiles your plain function itself: remove the decorator and "
        "make the code traceable instead.",
    )


# --- Dynamo's report ------------------------------------------------------------


def _break_detail(b: dict[str, Any]) -> str:
    reasons = [text(r) for r in b.get("reasons", []) if isinstance(r, str)]
    code = text(b.get("code"))
    return (f"`{code}`: " if code else "") + " / ".join(reasons)


def _line(b: dict[str, Any]) -> int:
    return b["line"] if isinstance(b.get("line"), int) else 0


def check_dynamo(ctx: GradeContext, fn: Any, inputs: list[tuple[str, tuple]]) -> bool:
    """One case per input traced, one per remaining break. True when clean."""
    clean = True
    seen: set[int] = set()
    for label, args in inputs:
        report = _trace(ctx, fn, label, args)
        if not _judge_trace(ctx, label, report, seen):
            clean = False
    return clean


def _trace(ctx: GradeContext, fn: Any, label: str, args: tuple) -> dict[str, Any]:
    """Dynamo's report on the step traced in the sandbox on `args`."""
    from gpulab.judge.kernel import Refs, encode

    ctx.stage(f"tracing with Dynamo ({label})")
    arena = ctx.arena(args_nbytes(args) + 4096)
    refs: Refs = {}
    reply = ctx.sandbox.request(
        {"type": "dynamo", "function": fn.name, "args": [encode(arena, a, refs) for a in args]}
    )
    report = sandbox_reply(reply, "traced")
    config_changed(ctx, report)
    if report.get("disabled"):
        refuse_disabled(ctx)
    return report


def _judge_trace(ctx: GradeContext, label: str, report: dict[str, Any], seen: set[int]) -> bool:
    """The cases of one input's trace; True when it holds no break."""
    plain = dict_field(report, "plain")
    breaks = [b for b in plain.get("breaks", []) if isinstance(b, dict)]
    _break_cases(ctx, breaks, seen)
    graphs, ops = as_int(plain.get("graphs")), as_int(plain.get("op_count"))
    if breaks:
        ctx.add_case(
            {
                "name": f"Dynamo ({label})",
                "passed": False,
                "graphs": graphs,
                "graph_breaks": len(breaks),
                "detail": f"{len(breaks)} graph break(s), {graphs} graph(s)",
            }
        )
        return False
    _refuse_hidden_work(ctx, plain, graphs, ops)
    return _fullgraph(ctx, label, report, ops)


def _break_cases(ctx: GradeContext, breaks: list[dict[str, Any]], seen: set[int]) -> None:
    """A failed case per break, once per line over all the inputs traced."""
    for b in breaks:
        if _line(b) in seen:
            continue  # already reported from an earlier input
        seen.add(_line(b))
        ctx.add_case(
            {
                "name": f"graph break at line {_line(b)}",
                "passed": False,
                "line": _line(b),
                "reasons": [text(r) for r in b.get("reasons", [])][:5],
                "detail": _break_detail(b),
            }
        )


def _refuse_hidden_work(ctx: GradeContext, plain: dict[str, Any], graphs: int, ops: int) -> None:
    """No graph at all, or black boxes in it: the breaks were hidden, not removed."""
    if not graphs or ops == 0:
        ctx.fail(
            "Dynamo captured no operations from your step",
            "Your step ran without being traced: is it wrapped in "
            "torch.compiler.disable / torch._dynamo.disable, or does it hide its work "
            "from Dynamo? The exercise is to make the real code traceable.",
        )
    hidden = [text(h, 120) for h in plain.get("opaque", []) if isinstance(h, str)]
    if hidden:
        ctx.fail(
            "cheat: Dynamo sees opaque calls instead of your step's operations: "
            + ", ".join(hidden[:8]),
            "allow_in_graph and custom ops put a black box in the graph, which hides "
            "the breaks instead of removing them. Write the step with torch ops.",
        )


def _fullgraph(ctx: GradeContext, label: str, report: dict[str, Any], ops: int) -> bool:
    """The authoritative check: fullgraph=True raises on any break at all."""
    full = dict_field(report, "full")
    if full.get("error") is not None or as_int(full.get("graphs")) != 1:
        fb = [b for b in full.get("breaks", []) if isinstance(b, dict)]
        b = fb[0] if fb else {"line": 0, "code": "", "reasons": [text(full.get("error"))]}
        ctx.add_case(
            {
                "name": f"Dynamo fullgraph=True ({label})",
                "passed": False,
                "detail": _break_detail(b),
            }
        )
        return False
    ctx.add_case(
        {
            "name": f"Dynamo ({label})",
            "passed": True,
            "graphs": 1,
            "graph_breaks": 0,
            "ops": ops,
            "detail": f"one graph of {ops} ops, no break",
        }
    )
    return True
