"""The sandbox's guards around a kernel call: what they are told
(guards_for: the torch ops the exercise bans) and what their report fails
(report_failures; AuditSpan, the profile the correctness calls share)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from gpulab.judge.context import GradeFailed
from gpulab.judge.kernel_spec import KernelSpec
from gpulab.wire.calls import (
    AUDIT_MALFORMED,
    AUDIT_MALFORMED_WHY,
    Audited,
    AuditEnd,
    GuardReport,
    Guards,
)
from gpulab.wire.replies import BadReply

if TYPE_CHECKING:
    from gpulab.judge.context import GradeContext


def dotted(f: Any) -> str:
    """The importable name of a torch callable, for the sandbox's guards."""
    for prefix, space in (
        ("torch", torch),
        ("torch.Tensor", torch.Tensor),
        ("torch.nn.functional", torch.nn.functional),
        ("torch.special", torch.special),
        ("torch.linalg", torch.linalg),
    ):
        for name in dir(space):
            try:
                if getattr(space, name) is f:
                    return f"{prefix}.{name}"
            except Exception:  # noqa: BLE001 - lazy attributes
                continue
    qual = getattr(f, "__qualname__", "")
    if "." in qual:  # torch.nn.Softmax.forward and friends
        owner = qual.split(".")[0]
        if getattr(torch.nn, owner, None) is not None:
            return f"torch.nn.{qual}"
    return f"{getattr(f, '__module__', 'torch')}.{qual or getattr(f, '__name__', '?')}"


def guards_for(spec: KernelSpec, eager_width: int = 0) -> Guards:
    return Guards(
        banned=tuple(dotted(f) for f in spec.banned),
        banned_aten=tuple(spec.banned_aten),
        banned_large=tuple(spec.banned_large),
        label=spec.banned_label,
        eager_width=eager_width,
    )


def report_failures(
    ctx: GradeContext,
    spec: KernelSpec,
    report: GuardReport,
    case_name: str,
    require_written: bool = True,
) -> None:
    if report.banned:
        ctx.fail(
            f"cheat: your code called {', '.join(report.banned)}, the op this exercise replaces",
            f"{spec.banned_label or 'The library op'} is off the graded path: "
            "write the computation in your Triton kernel.",
        )
    if not report.launches:
        ctx.fail(
            f"case {case_name}: no Triton kernel was launched",
            "The result must be computed by your Triton kernel (kernel[grid](...)).",
        )
    if report.eager:
        ctx.fail(
            f"cheat: your forward computed eagerly with {', '.join(report.eager[:6])} instead of "
            "in Triton",
            "Only allocations, views and copies may run outside your kernels (and, "
            "in lesson 05's exercise, the final (P, D) -> (D,) sum of dweight "
            "partials); the maths belongs in them.",
        )
    _audit_failures(ctx, report.audit, case_name)
    if report.side_stream:
        ctx.fail(
            f"case {case_name}: a kernel was launched on a side stream",
            "Launch on the current stream: work on another stream escapes the timing.",
        )
    if report.overruns:
        ctx.fail(
            f"case {case_name}: your kernel wrote past the end of a buffer",
            spec.overrun
            or "A store landed just after a tensor your code allocated: check the mask "
            "(`offs < n`, not `<=`) and the last block's offsets.",
        )
    if require_written and report.aliases_input:
        ctx.fail(f"case {case_name}: returned one of its inputs", "Allocate a new output tensor.")
    if require_written and not report.wrote_out:
        ctx.fail(
            f"case {case_name}: the returned tensor was not written by your Triton kernel",
            "Return the output buffer that you passed to your kernel, together with "
            "the inputs it reads.",
        )
    if require_written and report.altered_after:
        ctx.fail(
            f"case {case_name}: the returned tensor was changed after your kernel wrote it",
            "The result must be what your kernel stored, not filled in by torch afterwards.",
        )


def _audit_failures(ctx: GradeContext, audit: Sequence[str], case_name: str) -> None:
    """The profiler's findings of one call (gpulab.sandbox.audit): a cheat."""
    if any(a.startswith(("the profiler was stopped", "a profiler range")) for a in audit):
        ctx.fail(
            f"cheat: {audit[0]}",
            "gpulab watches each graded call with torch's profiler; code that stops it, "
            "or imitates gpulab's own ranges, cannot be graded.",
        )
    if audit:
        ctx.fail(
            f"cheat: during your call torch ran {', '.join(audit[:6])}"
            + (f" (case {case_name})" if case_name else ""),
            "torch's profiler watched the call in every thread (so switching the op "
            "guards off or working from a second thread does not hide it). Only "
            "allocations, views and copies may run outside your Triton kernels.",
        )


class AuditSpan:
    """The correctness calls' shared profile, as the judge keeps it: the
    cases sent, in order (the profile's windows), and once read, each
    window's findings (gpulab.sandbox.audit.SpanAudit)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.found: tuple[tuple[str, ...], ...] | None = None

    def end(self, ctx: GradeContext) -> tuple[tuple[str, ...], ...]:
        """Each call's findings (the sandbox stops the profile the first time)."""
        if self.found is None:
            self.found = ()  # asked once, even when the answer is refused
            try:
                audited = ctx.sandbox.ask(AuditEnd(), Audited)
                if not isinstance(audited, Audited) or len(audited.findings) != len(self.calls):
                    raise BadReply(AUDIT_MALFORMED, AUDIT_MALFORMED_WHY)
            except BadReply as exc:
                ctx.fail(exc.summary, exc.message)
            self.found = audited.findings
        return self.found

    def judge(self, ctx: GradeContext, upto: int | None = None) -> None:
        """Fail on the first of the calls (the first `upto`) whose window
        saw torch at work."""
        found = self.end(ctx)
        for name, one in list(zip(self.calls, found, strict=False))[:upto]:
            _audit_failures(ctx, one, name)


def judge_report(
    ctx: GradeContext,
    spec: KernelSpec,
    report: GuardReport,
    case_name: str,
    span: AuditSpan | None,
) -> None:
    """report_failures, with a shared profile's findings read first where
    the call fails on its own report: what each call's profile saw ranks as
    it did when every call was profiled apart."""
    if span is None:
        report_failures(ctx, spec, report, case_name)
        return
    try:
        report_failures(ctx, spec, dataclasses.replace(report, audit=()), case_name)
    except GradeFailed:
        found = span.end(ctx)
        span.judge(ctx, upto=len(span.calls) - 1)
        last = found[-1] if found else ()
        report_failures(ctx, spec, dataclasses.replace(report, audit=last), case_name)
        raise
