"""Grading a kernel exercise: correctness cases under guards, then timing.

An exercise's grader module describes its cases, reference, banned ops and
baseline in a `KernelSpec` (gpulab.judge.kernel_spec); `check_cases` and
`speed.time_cases` do the rest the same way for every kernel (see
docs/grading.md); gpulab.judge.standard is the body the kernel graders
share. The guards' rules are gpulab.judge.kernel_guards, the two-draw rule
gpulab.judge.two_draws. The learner's function runs in the sandbox;
everything here runs in the judge.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from gpulab.judge.advice import NothingAhead
from gpulab.judge.allowance import CaseClock
from gpulab.judge.case_row import CaseFields, case_row
from gpulab.judge.compare import compare, describe_mismatch, dtype_name
from gpulab.judge.context import GradeFailed
from gpulab.judge.cost import on_wrong_case
from gpulab.judge.kernel_guards import AuditSpan, guards_for, judge_report
from gpulab.judge.kernel_spec import Case, Expect, KernelSpec, desc_problem
from gpulab.judge.remote import storage_bytes
from gpulab.judge.replay import MISMATCH, REPLAY_KILLED, Result
from gpulab.judge.replay_again import (
    AGAIN_MISMATCH,
    INVARIANT_NOTE,
    OTHER_SCALES,
    draw_scale,
    scale_case,
)

# What encode puts in the arena; defined beside the replay's plan (which must
# not import this module), and given to encode's callers from here.
from gpulab.judge.replay_plan import Refs as Refs
from gpulab.judge.two_draws import Draws, draw_key, first_of_pair, same_launches
from gpulab.sandbox import learner
from gpulab.wire.calls import CallRequest, Guards, Returned
from gpulab.wire.launch_record import LaunchRecord
from gpulab.wire.protocol import Kwargs
from gpulab.wire.replies import BadReply, Broken, Raised
from gpulab.wire.sandbox_start import CompileAhead, CompiledAhead
from gpulab.wire.status import StageKind, Status

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext


def _tensors(args: Any) -> list[torch.Tensor]:
    if isinstance(args, torch.Tensor):
        return [args]
    if isinstance(args, (list, tuple)):
        return [t for a in args for t in _tensors(a)]
    if isinstance(args, dict):
        return [t for a in args.values() for t in _tensors(a)]
    return []


def _storage_nbytes(ts: list[torch.Tensor]) -> int:
    seen: dict[int, int] = {}
    for t in ts:
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values()) + 256 * (len(seen) + 1)


def encode(arena: Any, obj: Any, refs: Refs) -> Any:
    """Arguments as JSON, tensors copied into the arena. A storage is copied
    once, so views of one buffer stay views of one buffer there."""
    if isinstance(obj, torch.Tensor):
        if id(obj) not in refs:
            ptr = obj.untyped_storage().data_ptr()
            placed = refs.get(("storage", ptr))
            if placed is None:
                ref = arena.put(obj)
                refs[("storage", ptr)] = ref
            else:
                ref = dataclasses.replace(
                    placed,
                    dtype=str(obj.dtype).replace("torch.", ""),
                    shape=tuple(obj.shape),
                    stride=tuple(obj.stride()),
                    storage_offset=obj.storage_offset(),
                )
            refs[id(obj)] = (obj, ref)
        return refs[id(obj)][1].to_json()
    if isinstance(obj, tuple):
        return {"__tuple__": [encode(arena, v, refs) for v in obj]}
    if isinstance(obj, list):
        return [encode(arena, v, refs) for v in obj]
    if isinstance(obj, dict):
        return {str(k): encode(arena, v, refs) for k, v in obj.items()}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot pass a {type(obj).__name__} to the sandbox")


def remote_call(
    ctx: GradeContext,
    name: str,
    args: tuple[Any, ...],
    kwargs: Kwargs,
    *,
    expect: Expect | None,
    guards: Guards | None,
    contiguous: bool | None = None,
    grad_args: Sequence[int] = (),
    grad_output: torch.Tensor | None = None,
    grad_api: str | None = None,
    extra_tensors: Sequence[torch.Tensor] = (),
    slots: Sequence[Expect] = (),
    refs_out: Refs | None = None,
    rest: Sequence[Expect] = (),
) -> tuple[Returned, torch.Tensor | None, list[torch.Tensor]]:
    """One call in the sandbox. Returns (its reply, judge-side copy of the
    result or None, [copies of extra slots]). With `grad_args`, the backward
    of those arguments for `grad_output` too (its gradients in `slots`).
    With `rest`, the function returns 1 + len(rest) tensors: the first is
    the result, the others' copies follow the gradients' in the list."""
    inputs = _tensors(args) + _tensors(kwargs) + list(extra_tensors)
    need = _storage_nbytes(inputs)
    for e in ([expect] if expect else []) + list(slots) + list(rest):
        need += math.prod(e.shape) * e.like.dtype.itemsize + 256
    arena = ctx.arena(need)
    refs: Refs = {}
    # In this order into the arena, as ever: the arguments, the upstream
    # gradient, the result's slot, the gradients' slots.
    args_json = [encode(arena, a, refs) for a in args]
    kwargs_json = {k: encode(arena, v, refs) for k, v in kwargs.items()}
    dy_ref = None
    if grad_output is not None:
        encode(arena, grad_output, refs)
        dy_ref = refs[id(grad_output)][1]
    out_ref = arena.slot(tuple(expect.shape), expect.like.dtype) if expect else None
    slot_refs = [arena.slot(tuple(e.shape), e.like.dtype) for e in slots]
    rest_refs = [arena.slot(tuple(e.shape), e.like.dtype) for e in rest]
    request = CallRequest(
        function=name,
        args=args_json,
        kwargs=kwargs_json,
        out=out_ref,
        guards=guards,
        grad_slots=tuple(slot_refs),
        contiguous=contiguous,
        grad_args=tuple(grad_args),
        grad_output=dy_ref,
        grad_api=grad_api or "grad",  # sent with grad_args only
        rest=tuple(rest_refs),
    )
    if ctx.device == "cuda":
        torch.cuda.synchronize()
    try:
        reply = ctx.sandbox.ask(request, Returned)
    except BadReply as exc:
        ctx.fail(exc.summary, exc.message)
    if isinstance(reply, Raised):
        raise learner.LearnerError(reply.summary, reply.message)
    if isinstance(reply, Broken):
        ctx.fail(f"the sandbox failed: {reply.summary}", reply.message)
    # Inputs must be exactly as the judge wrote them.
    for t, ref in (v for k, v in refs.items() if not isinstance(k, tuple)):
        if not torch.equal(arena.storage_bytes(ref), storage_bytes(t)):
            ctx.fail(
                "your code wrote into its inputs",
                "Inputs must be left exactly as they were; write to a new output tensor.",
            )
    out = arena.view(out_ref).clone() if out_ref and reply.copied else None
    extras = [arena.view(r).clone() for r in (*slot_refs, *rest_refs)]
    if refs_out is not None:
        refs_out.update(refs)
    return reply, out, extras


@dataclass
class Kept:
    """What a replay of a correctness call needs (gpulab.judge.replay): the
    sandbox's record of its launches (its reply's JSON, read by the replay),
    the call's tensors in the arena, and what it was to return."""

    record: LaunchRecord | None = None
    refs: Refs = field(default_factory=dict)
    expect: Expect | None = None


def guarded_call(
    ctx: GradeContext,
    spec: KernelSpec,
    fn: Any,
    case: Case,
    guards: Guards | Callable[[Case], Guards] | None = None,
    keep: Kept | None = None,
    span: AuditSpan | None = None,
    audit: bool = True,
) -> tuple[Any, str | None]:
    """Call the learner's function once in the sandbox under its guards.
    Returns (the result, copied to the judge, or None; what is wrong with it).
    `keep` receives what a replay of the call needs. With `span`
    the call is a window of the profile the correctness cases share: its
    audit is read with the others' (AuditSpan), after the last case."""
    assert spec.expect is not None, "a spec graded in the sandbox says what it returns"
    expect = spec.expect(case)
    if callable(guards):
        guards = guards(case)
    guards = guards or guards_for(spec)
    if not audit:
        guards = dataclasses.replace(guards, audit=False)
    if span is not None:
        guards = dataclasses.replace(guards, audit_span=True)
        span.calls.append(case.name)
    if keep is not None:
        # The sandbox records its launches (gpulab.judge.replay).
        guards = dataclasses.replace(guards, replay=True)
    refs: Refs = {}
    reply, out, _ = remote_call(
        ctx,
        fn.name,
        case.args,
        case.kwargs,
        expect=expect,
        guards=guards,
        contiguous=expect.contiguous,
        refs_out=refs,
    )
    report = reply.report
    ctx.nan_at = report.nan_at
    if keep is not None:
        keep.record, keep.refs, keep.expect = report.replay, refs, expect
    off = report.audit_off or ""
    note = f"torch's profiler could not watch the calls ({off}): only the op guards did."
    if off and note not in ctx.notes:
        ctx.notes.append(note)
    judge_report(
        ctx,
        spec,
        dataclasses.replace(report, wrote_out=True, altered_after=False, aliases_input=False),
        case.name,
        span,
    )
    problem = desc_problem(reply.desc, expect)
    if problem is None:
        judge_report(ctx, spec, report, case.name, span)
        if out is None:
            problem = "the result could not be copied out of the sandbox"
    return out, problem


def compile_ahead(ctx: GradeContext) -> None:
    """On a GPU, once before the first case: the sandbox compiles, side by
    side, the kernels the last check of this file compiled
    (gpulab.sandbox.ahead). Speed only: its reply decides nothing, and a
    kernel it did not compile compiles in its graded call, as without it."""
    if ctx.device != "cuda" or ctx.interpreter or ctx.warmed:
        return
    ctx.stage(
        StageKind.COMPILE, "compiling your kernels side by side (as your last check compiled them)"
    )
    done = ctx.sandbox.ask(CompileAhead(), CompiledAhead)
    ctx.warmed.append(done.record() if isinstance(done, CompiledAhead) else NothingAhead())


def check_cases(
    ctx: GradeContext, spec: KernelSpec, fn: Any, cases: list[Case], guards: Any = None
) -> None:
    """Correctness: every case against a float64 reference, in the sandbox."""
    ctx.uses_triton = True
    compile_ahead(ctx)
    # On the CPU (and on a GPU where gpulab.judge.replay.gpu_replay says so)
    # every passing case is replayed apart from the learner's code. Its
    # sandbox starts with the first passing case (Replayer.submit), not here:
    # a file that passes no case never pays for a second torch import (about
    # a third of a failing check's CPU time on a 2-core box).
    replayer = getattr(ctx, "replayer", None)
    total = len(cases)
    gaps: list[str] = []
    draws: Draws = {}  # a shape's first draw: its launches
    paired = Counter(draw_key(case) for case in cases)  # shapes drawn twice: > 1
    # On a GPU with the replay, the replay judges whether the kernels alone
    # did the work (their compiled binaries, launched apart from the file):
    # torch's profiler in the learner's process is not asked (its CUPTI start
    # and stop cost seconds a check). A case the replay finds wrong is run
    # once more under it, to name the torch ops the wrapper ran.
    audited = not (replayer is not None and ctx.device == "cuda")
    by_name = {case.name: case for case in cases}
    # One profile for all the cases (about 0.15 s a call saved on an H200).
    span = AuditSpan() if audited else None
    invariant: list[str] = []  # cases whose answer g(x) does not change (_again)
    clock = _case_clock(ctx, cases)
    for i, case in enumerate(cases):
        allow = clock.start(i) if clock is not None else None
        ctx.stage(
            StageKind.CORRECTNESS, f"case {i + 1} of {total}: {case.name}", i, total, allow_s=allow
        )
        keep = Kept() if replayer is not None else None
        try:
            if keep is not None and ctx.device == "cuda" and first_of_pair(draws, paired, case):
                # The two-draw rule compares this call's launches with the
                # second draw's. A wrapper may choose among kernels by timing
                # them on a shape's first call (the softmax and matmul
                # references do, on a GPU) and launch the chosen one after:
                # called once first, unrecorded, both draws launch as its
                # later calls do.
                guarded_call(ctx, spec, fn, case, guards, None, span, audited)
            out, problem = guarded_call(ctx, spec, fn, case, guards, keep, span, audited)
            if keep is not None and _overflowed(keep):
                # A shape's first call, timing candidates, took more
                # launches than a record holds (the references' Hopper
                # paths on an H100). Its later calls launch the chosen
                # kernel alone: called again, that call is recorded. Only
                # then, so a kernel without such a first call waits for no
                # second call.
                keep = Kept()
                out, problem = guarded_call(ctx, spec, fn, case, guards, keep, span, audited)
        except learner.LearnerError as exc:
            hint = _known_gap(ctx, exc)
            if hint is None:
                # Kept for `gpulab debug` (advice; the error stands).
                on_wrong_case(
                    ctx,
                    case,
                    len(ctx.cases) + 1,
                    functools.partial(spec.reference, case),
                    exc.summary,
                    spec.tolerance(case.dtype),
                )
                if span is not None:  # an earlier call's cheat first
                    span.judge(ctx, upto=len(span.calls) - 1)
                raise
            if replayer is not None and paired[draw_key(case)] > 1:
                # A known gap is only the text of an error, and any wrapper
                # can raise it. Skipped, the shape drawn twice would take
                # the two-draw rule with it (same_launches), and with it
                # the check of every other case's launch numbers: answers
                # worked out in Python and handed over as arguments passed.
                if span is not None:
                    span.judge(ctx, upto=len(span.calls) - 1)
                ctx.fail(
                    f"case {case.name}: {exc.summary}",
                    f"{hint} On the CPU this case's shape is run twice, on other values, "
                    "to check that your kernels computed the answer, so it cannot be skipped.",
                )
            # A right kernel can fail on one release of Triton (gpulab.course.known_gaps):
            # that case is skipped with what to do, and the others still judge.
            gaps.append(case.name)
            ctx.skipped.append(f"{case.name}: {hint}")
            if len(gaps) == total:
                ctx.fail(f"every case hit a known gap of this Triton: {exc.summary}", hint)
            continue
        record: CaseFields = {
            "name": case.name,
            "shape": case.shape,
            "dtype": dtype_name(case.dtype),
        }
        if problem:
            record.update({"passed": False, "detail": problem})
            ctx.add_case(case_row(**record), total)
            continue
        ref = spec.reference(case)
        atol, rtol = spec.tolerance(case.dtype)
        rep = compare(out, ref, atol, rtol)
        record.update(
            {
                "max_abs": rep.max_abs,
                "max_rel": rep.max_rel,
                "mismatches": rep.mismatches,
                "passed": rep.mismatches == 0,
            }
        )
        if rep.mismatches:
            record["detail"] = _named(spec, case, out, ref) + describe_mismatch(
                rep, (*case.args, *case.kwargs.values()), ctx.nan_at
            )
            record["first_bad"] = rep.first_bad_json()
            # Advice for `gpulab debug` and the load map (gpulab.judge.cost),
            # after the case before it has its replay's verdict.
            if replayer is not None and replayer.pending is not None and ctx.interpreter:
                replay_verdict(ctx, replayer.collect())
            detail = record["detail"] or ""
            on_wrong_case(ctx, case, len(ctx.cases) + 1, ref, detail, (atol, rtol), keep)
        elif keep is not None and replayer is not None:  # keep is kept for the replayer
            other = same_launches(draws, case, keep.record)
            if other:
                ctx.add_case(
                    case_row(
                        name=f"{case.name}, your launches",
                        passed=False,
                        detail=(
                            f"your kernels were launched with other numbers (or buffers "
                            f"your code filled otherwise) here than in case {other}, which "
                            "has the same shapes and other values: a kernel's scalar "
                            "arguments, grid and prepared buffers must come from the "
                            "shapes, the settings and the inputs as they are, not from "
                            "the input's values (an answer handed to a kernel as numbers "
                            "or prepared buffers is not one it computed)"
                        ),
                    )
                )
            collected = replayer.collect()  # the case before this one
            if not audited:
                audit_again(ctx, spec, fn, by_name, guards, collected)
            replay_verdict(ctx, collected)
            again = _again(ctx, spec, case, ref, invariant)
            result = Result(keep.expect, ref, spec.tolerance(case.dtype))
            why = replayer.submit(
                case,
                keep.record,
                keep.refs,
                [result],
                None
                if again is None
                else (again[0], [dataclasses.replace(result, reference=again[1])]),
            )
            replay_verdict(ctx, (case.name, why) if why else None)
        ctx.add_case(case_row(**record), total)
    if span is not None:
        span.judge(ctx)
    if replayer is not None and replayer.pending is not None:
        ctx.stage(
            StageKind.REPLAY,
            "your kernels again, apart from your code: the last case",
            allow_s=clock.last() if clock is not None else None,
        )
        collected = replayer.collect()
        if not audited:
            audit_again(ctx, spec, fn, by_name, guards, collected)
        replay_verdict(ctx, collected)
    if invariant:  # the grader's bookkeeping, in --json only (issue 48: jargon in the notes)
        ctx.json_only["replay_scale_invariant"] = {
            "cases": invariant,
            "why": INVARIANT_NOTE.format(cases=", ".join(invariant)),
        }


def _named(spec: KernelSpec, case: Case, out: torch.Tensor, ref: torch.Tensor) -> str:
    """The spec's name for a wrong output's mistake, as the detail's first words."""
    if spec.diagnose is None:
        return ""
    from gpulab.judge.named_mistakes import safely

    words = safely(spec.diagnose, case, out, ref)
    return f"{words} — " if words else ""


def audit_again(
    ctx: GradeContext,
    spec: KernelSpec,
    fn: Any,
    cases: dict[str, Case],
    guards: Any,
    verdict: tuple[str, str] | None,
) -> None:
    """A case whose kernels, replayed alone, gave another answer: called
    once more, under torch's profiler, so that a wrapper doing maths with
    torch is told which ops (the friendly message the audit gave before a
    GPU's replay made it redundant). Advice from the learner's process: it
    can only fail the check sooner, with a better message; the replay's
    verdict stands either way."""
    if verdict is None or not verdict[1].startswith((MISMATCH, AGAIN_MISMATCH)):
        return
    case = cases.get(verdict[0])
    if case is not None:
        ctx.stage(
            StageKind.CORRECTNESS,
            f"case {case.name} again, under torch's profiler: what ran outside your kernels",
        )
        guarded_call(ctx, spec, fn, case, guards, None, None, True)


def _case_clock(ctx: GradeContext, cases: list[Case]) -> CaseClock | None:
    """Each case's own time limit, where the lab lets the judge give it
    (a CPU check with no limit of the learner's: gpulab.judge.allowance)."""
    if not ctx.interpreter or not ctx.request.timeout_cap:
        return None
    return CaseClock(cases)


def _again(
    ctx: GradeContext, spec: KernelSpec, case: Case, ref: torch.Tensor, invariant: list[str]
) -> tuple[float, torch.Tensor] | None:
    """c and the reference of g(x) = c·x for the replay's second run
    (gpulab.judge.replay_again); None where that reference is x's within the
    tolerance (an answer that does not change with the inputs' scale: the
    second run would pass a wrapper's answer for x, and proves nothing)."""
    atol, rtol = spec.tolerance(case.dtype)
    drawn = draw_scale(ctx.secret_seed, case.name)
    # The drawn c first; an answer that saturates (a softmax of large
    # values is one-hot at c = 2) may still change at another.
    for c in (drawn, *(s for s in OTHER_SCALES if s != drawn)):
        ref_again = spec.reference(scale_case(case, c))
        if compare(ref_again, ref, atol, rtol).mismatches:
            return c, ref_again
    invariant.append(case.name)
    return None


def _overflowed(keep: Kept) -> bool:
    """Whether the call's record ran past the launches one can hold."""
    return keep.record is not None and keep.record.overflow is not None


def replay_verdict(ctx: GradeContext, verdict: tuple[str, str] | None) -> None:
    """A replay that ran and gave another answer is a wrong case (a read
    past a buffer's end gives one too); one that could not run fails the check."""
    if verdict is None:
        return
    name, why = verdict
    if why.startswith(REPLAY_KILLED):  # its process killed from outside: not the kernels
        summary, _, advice = why[len(REPLAY_KILLED) :].partition(". ")
        raise GradeFailed(summary, advice, status=Status.ERROR)
    if why.startswith(AGAIN_MISMATCH):
        ctx.add_case(
            case_row(name=f"{name}, your kernels alone on other inputs", passed=False, detail=why)
        )
    elif why.startswith(MISMATCH):
        ctx.add_case(case_row(name=f"{name}, your kernels alone", passed=False, detail=why))
    else:
        ctx.fail(f"case {name}: your Triton kernels alone did not give the answer", why)


def _known_gap(ctx: CaseContext, exc: Any) -> str | None:
    from gpulab.course.known_gaps import hint_for

    return hint_for(f"{exc.summary}\n{exc.message}", interpreter=bool(ctx.interpreter))


INTERPRETER_NOTE = (
    "Ran in the Triton interpreter on the CPU at reduced sizes: "
    "correctness is graded, speed is not."
)
