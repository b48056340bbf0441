"""Rendering a check result for people (rich renderables; used by CLI and TUI).

Every string of a result may carry text from learner code (its output, an
exception, a name it chose). Its control characters were made visible where
the lab read it (gpulab.textsafe: the judge's frames in gpulab.lab.runner, a
results file in Workspace.last_result), so `render` draws it as it is; table
cells are `Text`, never markup: a case named `[/]` must not crash the table,
nor `[link=…]` become a link.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpulab.gpu.traces import KernelTime, OpTime, RangeCalls, RangeTime
from gpulab.gpu.units import value_text
from gpulab.textsafe import visible
from gpulab.wire.protocol import JsonObject
from gpulab.wire.result import CaseRow, CheckResult, Timing


def _fmt(x: Any, spec: str = ".3g") -> str:
    # An error of NaN or inf is shown so (a NaN output is not "0 error").
    return "" if x is None else value_text(x, spec) if isinstance(x, float) else format(x, spec)


def cases_table(cases: list[CaseRow]) -> Any:
    """The cases, one a row. A column no case fills is left out (an
    exercise graded on numbers, like copy_ceiling's, has no dtype or
    error), so at 60 columns the names are not folded for empty ones."""
    from rich.table import Table
    from rich.text import Text

    rows = [
        (
            Text(c.label),
            Text(c.dtype or ""),
            _fmt(c.max_abs),
            _fmt(c.max_rel),
            "" if c.mismatches is None else str(c.mismatches),
            "[green]ok[/]" if c.passed else "[red]FAIL[/]",
        )
        for c in cases
    ]
    names = ("case", "dtype", "max abs err", "max rel err", "bad", "result")
    keep = [
        i for i in range(len(names)) if i in (0, len(names) - 1) or any(str(row[i]) for row in rows)
    ]
    t = Table(title="Correctness", title_justify="left", expand=False)
    for i in keep:
        t.add_column(names[i], overflow="fold")
    for row in rows:
        t.add_row(*(row[i] for i in keep))
    return t


def _us(ms: float | None) -> str:
    return "" if ms is None else f"{ms * 1e3:.1f}"


def timing_table(timing: Timing) -> Any:
    from rich.table import Table
    from rich.text import Text

    t = Table(
        title=f"Timing on {timing.device or 'GPU'} (median of N, L2 flushed)",
        title_justify="left",
    )
    for col in (
        "shape",
        "dtype",
        "time µs",
        "p20–p80 µs",
        timing.unit or "",
        "roofline",
        "speedup",
    ):
        t.add_column(col)
    for r in timing.cases:
        both = r.p20_ms is not None and r.p80_ms is not None
        spread = f"{_us(r.p20_ms)}–{_us(r.p80_ms)}" if both else ""
        t.add_row(
            Text(r.shape or ""),
            Text(r.dtype or ""),
            _us(r.ms),
            spread,
            _fmt(r.throughput, ".0f"),
            f"{r.roofline_fraction:.0%}" if r.roofline_fraction else "",
            f"{r.speedup:.2f}x" if r.speedup else "",
        )
    return t


def render(result: CheckResult) -> Any:
    """A rich Group: headline, details, cases, timing, notes, learner output."""
    from rich.console import Group
    from rich.text import Text

    parts: list[Any] = []
    ok = result.passed
    head = Text()
    head.append(
        " PASS " if ok else " FAIL ", style="bold white on green" if ok else "bold white on red"
    )
    head.append(f" {result.exercise}: {result.summary}")
    parts.append(head)
    if result.device:
        parts.append(
            Text(
                f"device: {result.device}   time: {result.duration_s or 0:.1f} s",
                style="dim",
            )
        )
    if result.message:
        parts.append(Text(result.message))
    if result.cases:
        parts.append(cases_table(result.cases))
        bad = [c for c in result.cases if not c.passed and c.detail]
        for c in bad[:3]:
            parts.append(Text(f"✘ {c.name}: {c.detail}", style="red"))
        from gpulab.gpu import loadmap

        if (drawn := loadmap.renderable(result.rest)) is not None:  # issue 48
            parts.append(drawn)
        if bad and isinstance(result.rest.get("debug"), str):
            parts.append(
                Text(
                    f"`gpulab debug {result.exercise}` reruns a wrong case in Python, outside "
                    "the sandbox, with its inputs and the reference (--case N for another).",
                    style="dim",
                )
            )
    timing = result.timing
    if timing is not None and timing.cases:
        parts.append(timing_table(timing))
        if timing.graded_on:  # what the letter was measured against (issue 47)
            parts.append(Text(f"The letter, {timing.grade or '?'}: {timing.graded_on}."))
    if timing is not None and timing.profile:  # lesson 07: ranges, top ops, trace
        parts.append(render_profile(timing.profile))
    from gpulab.explain.render import explain_renderable

    if (explained := explain_renderable(result.rest)) is not None:  # issue 21
        parts.append(explained)
    from gpulab.gpu import costmodel

    if (cost := costmodel.cost_renderable(result.rest)) is not None:  # issue 48
        parts.append(cost)
    for s in result.skipped or []:
        parts.append(Text(f"skipped: {s}", style="yellow"))
    for n in result.notes or []:
        parts.append(Text(n, style="dim"))
    if result.output.strip():
        parts.append(Text("Your program's output:", style="bold"))
        parts.append(Text(result.output.rstrip()[-2000:], style="dim"))
    return Group(*parts)


# --- profiles (lesson 07 and `gpulab profile`) ------------------------------------


def _short(name: str, width: int = 60) -> Any:
    """A name from the trace as plain Text: learner code chooses range names, so
    they are neither markup nor terminal commands (gpulab.textsafe)."""
    from rich.text import Text

    name = visible(name)
    return Text(name if len(name) <= width else name[: width - 1] + "…")


def top_ops_table(rows: Sequence[OpTime | KernelTime], *, title: str = "Top operations") -> Any:
    """Rows as produced by read_trace (ops or kernels) or the grader's top_ops
    (OpTime's with the device's time: gpulab.judge.graders.nvtx_profile.OpRow)."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    cols = [
        c
        for c in ("calls", "self_cpu_ms", "cpu_total_ms", "self_device_ms", "device_ms")
        if rows and c in rows[0] and any(r.get(c) for r in rows)
    ]
    t.add_column("operation", overflow="fold")
    for c in cols:
        t.add_column(c.replace("_ms", " ms").replace("_", " "), justify="right")
    for r in rows:
        cells: Mapping[str, object] = r  # read by the columns' names
        t.add_row(
            _short(r["name"]), *(str(cells[c]) if c == "calls" else f"{cells[c]:.3f}" for c in cols)
        )
    return t


def ranges_table(ranges: Sequence[RangeCalls | RangeTime]) -> Any:
    """A trace's ranges (read_trace: calls) or the nvtx grader's (ops inside)."""
    from rich.table import Table

    t = Table(title="Your ranges", title_justify="left")
    t.add_column("range")
    t.add_column("ms", justify="right")
    t.add_column("calls / ops", justify="right")
    for r in ranges:
        t.add_row(_short(r["name"], 80), f"{r['ms']:.3f}", str(r.get("calls", r.get("ops", ""))))
    return t


def render_profile(profile: JsonObject) -> Any:
    """A check result's timing["profile"] (see gpulab.judge.graders.nvtx_profile)."""
    from rich.console import Group
    from rich.text import Text

    parts: list[Any] = []
    if profile.get("ranges"):
        parts.append(ranges_table(profile["ranges"]))
    if profile.get("top_kernels"):
        parts.append(top_ops_table(profile["top_kernels"], title="Top GPU kernels"))
    if profile.get("top_ops"):
        parts.append(top_ops_table(profile["top_ops"], title="Top operations"))
    if profile.get("nvtx") is not None:
        seen = visible(", ".join(map(str, profile["nvtx"]))) or "none"
        parts.append(Text(f"NVTX ranges pushed (what Nsight Systems shows): {seen}", style="dim"))
    return Group(*parts)
