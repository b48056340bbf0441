"""Lesson 06's graph-break rules, applied to Dynamo's report from the sandbox.

Dynamo's trace can only happen where the learner's step lives: the sandbox
traces it (gpulab.sandbox.dynamo) and reports the graphs, the breaks and any
opaque calls; the judge (gpulab.judge.graders.graph_breaks) applies the rules here.
Also the small helpers the grader's sandbox requests share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpulab.judge.case_row import case_row
from gpulab.sandbox import learner
from gpulab.wire.dynamo import DynamoBreak, DynamoRequest, DynamoTrace, Traced
from gpulab.wire.replies import Broken, R, Raised
from gpulab.wire.status import StageKind, Status

if TYPE_CHECKING:
    from gpulab.judge.context import GradeContext

# --- the sandbox's replies ------------------------------------------------------


def as_int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def args_nbytes(args: tuple[Any, ...]) -> int:
    """Arena bytes to send `args` to the sandbox."""
    from gpulab.judge.kernel import _storage_nbytes, _tensors

    return sum(_storage_nbytes([t]) for t in _tensors(args)) + 256 * 16


def sandbox_reply(got: R | Raised | Broken) -> R:
    """The reply when it is the kind asked for (gpulab.judge.remote.Sandbox.ask);
    the learner's error or the sandbox's failure raised otherwise."""
    if isinstance(got, Raised):
        raise learner.LearnerError(got.summary[:2000], got.message)
    if isinstance(got, Broken):
        from gpulab.judge.context import GradeFailed

        raise GradeFailed(
            f"the sandbox failed: {got.summary}", got.message[:4000], status=Status.ERROR
        )
    return got


def config_changed(ctx: GradeContext, changed: tuple[str, ...]) -> None:
    """A step that sets Dynamo's config while it runs (capture_scalar_outputs
    lets .item() into the graph) changes the rules it is traced under."""
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


def _break_detail(b: DynamoBreak) -> str:
    return (f"`{b.code}`: " if b.code else "") + " / ".join(b.reasons)


def check_dynamo(ctx: GradeContext, fn: Any, inputs: list[tuple[str, tuple[Any, ...]]]) -> bool:
    """One case per input traced, one per remaining break. True when clean."""
    clean = True
    seen: set[int] = set()
    for label, args in inputs:
        report = _trace(ctx, fn, label, args)
        if not _judge_trace(ctx, label, report, seen):
            clean = False
    return clean


def _trace(ctx: GradeContext, fn: Any, label: str, args: tuple[Any, ...]) -> Traced:
    """Dynamo's report on the step traced in the sandbox on `args`."""
    from gpulab.judge.kernel import Refs, encode

    ctx.stage(StageKind.TRACING, f"tracing with Dynamo ({label})")
    arena = ctx.arena(args_nbytes(args) + 4096)
    refs: Refs = {}
    request = DynamoRequest(fn.name, [encode(arena, a, refs) for a in args])
    report = sandbox_reply(ctx.sandbox.ask(request, Traced))
    config_changed(ctx, report.config_changed)
    if report.disabled:
        refuse_disabled(ctx)
    return report


def _judge_trace(ctx: GradeContext, label: str, report: Traced, seen: set[int]) -> bool:
    """The cases of one input's trace; True when it holds no break."""
    plain = report.plain
    breaks = plain.breaks
    _break_cases(ctx, breaks, seen)
    graphs, ops = plain.graphs, plain.op_count
    if breaks:
        ctx.add_case(
            case_row(
                name=f"Dynamo ({label})",
                passed=False,
                graphs=graphs,
                graph_breaks=len(breaks),
                detail=f"{len(breaks)} graph break(s), {graphs} graph(s)",
            )
        )
        return False
    _refuse_hidden_work(ctx, plain, graphs, ops)
    return _fullgraph(ctx, label, report, ops)


def _break_cases(ctx: GradeContext, breaks: tuple[DynamoBreak, ...], seen: set[int]) -> None:
    """A failed case per break, once per line over all the inputs traced."""
    for b in breaks:
        if b.line in seen:
            continue  # already reported from an earlier input
        seen.add(b.line)
        ctx.add_case(
            case_row(
                name=f"graph break at line {b.line}",
                passed=False,
                line=b.line,
                reasons=list(b.reasons[:5]),
                detail=_break_detail(b),
            )
        )


def _refuse_hidden_work(ctx: GradeContext, plain: DynamoTrace, graphs: int, ops: int) -> None:
    """No graph at all, or black boxes in it: the breaks were hidden, not removed."""
    if not graphs or ops == 0:
        ctx.fail(
            "Dynamo captured no operations from your step",
            "Your step ran without being traced: is it wrapped in "
            "torch.compiler.disable / torch._dynamo.disable, or does it hide its work "
            "from Dynamo? The exercise is to make the real code traceable.",
        )
    hidden = plain.opaque
    if hidden:
        ctx.fail(
            "cheat: Dynamo sees opaque calls instead of your step's operations: "
            + ", ".join(hidden[:8]),
            "allow_in_graph and custom ops put a black box in the graph, which hides "
            "the breaks instead of removing them. Write the step with torch ops.",
        )


def _fullgraph(ctx: GradeContext, label: str, report: Traced, ops: int) -> bool:
    """The authoritative check: fullgraph=True raises on any break at all."""
    full = report.full or DynamoTrace()
    if full.error is not None or full.graphs != 1:
        b = full.breaks[0] if full.breaks else DynamoBreak(reasons=(full.error or "",))
        ctx.add_case(
            case_row(
                name=f"Dynamo fullgraph=True ({label})",
                passed=False,
                detail=_break_detail(b),
            )
        )
        return False
    ctx.add_case(
        case_row(
            name=f"Dynamo ({label})",
            passed=True,
            graphs=1,
            graph_breaks=0,
            ops=ops,
            detail=f"one graph of {ops} ops, no break",
        )
    )
    return True
