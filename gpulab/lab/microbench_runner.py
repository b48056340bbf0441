"""Parent side of the microbenchmarks: run the child, relay progress, cache.

`run_microbench()` starts `python -m gpulab.measure.microbench` in its own process
session, hands its progress and notes to `on_event` (the CLI's progress bar, the
TUI's Device pane), and on success writes the ceilings where gpulab.gpu.ceilings
reads them. Imports neither torch nor triton; safe from a UI thread worker.
"""

from __future__ import annotations

import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

from gpulab.fsutil import atomic_write_json
from gpulab.gpu import ceilings
from gpulab.lab import child
from gpulab.wire.microbench import Ceilings, ClockSummary, Row, ShownEvent
from gpulab.wire.status import Status

DEFAULT_TIMEOUT = 1800.0


class BenchOutcome(TypedDict):
    """How a run of the benchmarks ended (the CLI's --json prints `result`
    with `cache`; the TUI's Device pane saves and draws it)."""

    ok: bool
    # The child's result event's `result`, as it printed it (gpulab.measure.
    # microbench): the ceilings, saved as they are for gpulab.gpu.ceilings.
    result: NotRequired[Ceilings]
    error: NotRequired[str]  # why there is no result
    cache: NotRequired[str]  # where the result was saved
    notes: NotRequired[list[str]]  # the child's notes (e.g. little free memory)


def run_microbench(
    workspace_root: Path | None,
    *,
    quick: bool = False,
    on_event: Callable[[ShownEvent], object] | None = None,
    cancel: threading.Event | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> BenchOutcome:
    """Run the benchmarks; `on_event` gets the child's progress and notes as read."""
    cmd = child.python_module("gpulab.measure.microbench", *(["--quick"] if quick else []))
    notes: list[str] = []
    with tempfile.TemporaryFile() as err:
        try:
            proc = child.spawn(
                cmd,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=child.env(PYTHONUNBUFFERED="1"),
            )
        except OSError as exc:
            return {"ok": False, "error": f"could not start the benchmarks: {exc}", "notes": []}
        assert proc.stdout is not None
        events = child.Events(
            child.json_line_reader(proc.stdout), deadline=time.monotonic() + timeout, cancel=cancel
        )
        result: Ceilings | None = None
        error: str | None = None
        try:
            for ev in events:
                if ev.get("type") == "result":
                    got = ev.get("result")
                    if isinstance(got, dict):
                        # gpulab's own child (gpulab.measure.microbench), never
                        # learner code: its result has the shape it writes.
                        result = cast(Ceilings, got)
                    else:  # what the CLI and the TUI would fail on, said here
                        error = "the benchmarks' result is not a JSON object"
                elif ev.get("type") == "error":
                    error = str(ev.get("message"))
                elif ev.get("type") == "note":
                    notes.append(str(ev.get("text")))
                if on_event is not None and ev.get("type") in ("progress", "note"):
                    # gpulab's own child: its events have the shapes it writes
                    # (gpulab.wire.microbench); the readers .get them all the same.
                    on_event(cast(ShownEvent, ev))
            if events.stopped == Status.CANCELLED:
                error = "cancelled"
            elif events.stopped == Status.TIMEOUT:
                error = f"timed out after {timeout:g} s"
        finally:
            # Done, it exits by itself; stopped, its whole group is killed.
            child.kill_tree(proc, exit_s=2)
        if result is None and error is None:
            err.seek(0)
            tail = err.read().decode("utf-8", "replace").strip().splitlines()
            error = f"the benchmark process exited with code {proc.returncode}" + (
                f": {tail[-1]}" if tail else ""
            )
    if error is not None or result is None:  # no result: the exit code says why
        return {"ok": False, "error": str(error), "notes": notes}
    out: BenchOutcome = {"ok": True, "result": result, "notes": notes}
    if workspace_root is not None and result.get("device"):
        out["cache"] = str(save(workspace_root, result))
    return out


def save(workspace_root: Path, result: Ceilings) -> Path:
    """Write the child's result where gpulab.gpu.ceilings reads it, as it is."""
    path = ceilings.cache_path(Path(workspace_root), result["device"])
    atomic_write_json(path, result)
    return path


# --- rendering --------------------------------------------------------------------


def _us(ms: float) -> str:
    return f"{ms * 1e3:,.1f}"


def results_renderable(result: Ceilings) -> Any:
    """Tables of a benchmark result (CLI and TUI)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    parts: list[Any] = [
        Text(
            f"{result.get('device')} · driver {result.get('driver') or 'n/a'} · torch "
            f"{result.get('torch')} · Triton {result.get('triton') or 'n/a'} · {result.get('date')}",
            style="bold",
        )
    ]
    bw = Table(
        title=f"HBM bandwidth, {result.get('buffer_bytes', 0) / 2**30:.1f} GiB buffers, "
        "random data, L2 flushed",
        title_justify="left",
    )
    for col in ("what", "method", "bytes counted", "time µs", "TB/s", "SM MHz"):
        bw.add_column(col)
    for r in result.get("bandwidth", []):
        bw.add_row(r["name"], r["method"], r["counted"], _us(r["ms"]), f"{r['tbs']:.2f}", _clock(r))
    parts.append(bw)
    tbs = {
        "copy": result.get("copy_tbs"),
        "read": result.get("read_tbs"),
        "write": result.get("write_tbs"),
    }
    best = [f"{k} {v:.2f} TB/s" for k, v in tbs.items() if v]
    if best:
        parts.append(
            Text("best: " + ", ".join(best) + " (copy counts read + write)", style="green")
        )
    if result.get("sweep"):
        parts.append(_sweep_table(result))
    mm = Table(title="Matrix multiply (dense), random data, L2 flushed", title_justify="left")
    for col in ("dtype", "method", "M×N×K", "time µs", "TFLOP/s", "SM MHz"):
        mm.add_column(col)
    for r in result.get("matmul", []):
        mm.add_row(
            r["name"], r["method"], r["shape"], _us(r["ms"]), f"{r['tflops']:.1f}", _clock(r)
        )
    for r in result.get("fma", []):
        mm.add_row(r["name"], r["method"], "-", _us(r["ms"]), f"{r['tflops']:.1f}", _clock(r))
    parts.append(mm)
    peaks = [f"{k} {v:.0f}" for k, v in (result.get("tflops") or {}).items() if v]
    if peaks:
        parts.append(Text("peak TFLOP/s (best shape): " + ", ".join(peaks), style="green"))
    for dt, why in (result.get("skipped") or {}).items():
        parts.append(Text(f"{dt}: skipped ({why})", style="yellow"))
    if result.get("throttled"):
        parts.append(
            Text(
                "throttling seen during the runs: "
                + (", ".join(result.get("throttle_reasons") or []) or "low SM clock")
                + ". Numbers may read low; let the GPU cool and re-run.",
                style="bold yellow",
            )
        )
    return Group(*parts)


def _clock(r: Row) -> str:
    c = r.get("clocks") or ClockSummary(logged=False)
    if not c.get("logged"):
        return "n/a"
    s = f"{c['sm_mhz_median']:.0f}"
    return s + (" [yellow]throttled[/]" if c.get("throttled") else "")


def _sweep_table(result: Ceilings) -> Any:
    from rich.table import Table

    t = Table(
        title="Size sweep, no L2 flush (buffers that fit in the L2 are served from it)",
        title_justify="left",
    )
    for col in ("size", "copy TB/s (r+w)", "read TB/s", "in L2?"):
        t.add_column(col)
    by_size: dict[int, dict[str, Row]] = {}
    for r in result["sweep"]:
        by_size.setdefault(r["size_bytes"], {})[r["name"]] = r
    for size, rows in sorted(by_size.items()):
        label = f"{size / 2**30:g} GiB" if size >= 2**30 else f"{size / 2**20:g} MiB"
        fits = any(r.get("fits_l2") for r in rows.values())
        t.add_row(
            label,
            *(f"{rows[k]['tbs']:.2f}" if k in rows else "" for k in ("copy", "read")),
            "yes" if fits else "",
        )
    return t
