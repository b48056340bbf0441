"""`gpulab probe [--json] [--watch] [--bench] [--quick] [--gpu NAME]`.

A quick table of the machine's GPUs (NVML plus torch's device properties),
a live view with --watch, measured ceilings with --bench, and --gpu to choose
the datasheet GPU that rooflines use on a machine without one.
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import TYPE_CHECKING, Any

from gpulab.cli.commands.common import UsageError, console, guarded, open_workspace

if TYPE_CHECKING:
    from gpulab.wire.microbench import ShownEvent


@guarded
def run(args: Any) -> int:
    # nan passes `<= 0` and then breaks time.sleep; inf would never refresh.
    if args.watch and not (math.isfinite(args.interval) and 0 < args.interval <= 3600):
        raise UsageError(
            f"--interval must be more than 0 and at most 3600 seconds, got {args.interval:g}"
        )
    gpu = _known_gpu(args.gpu) if args.gpu else None  # before the workspace is made
    ws = open_workspace(args)
    if gpu is not None:
        _set_gpu(ws, gpu, quiet=args.json)
    if args.bench:
        return _bench(ws, args)
    if args.watch:
        return _watch(ws, args)
    from gpulab.lab.probe import snapshot, snapshot_renderable

    snap = snapshot(ws)
    if args.json:
        print(json.dumps(snap, indent=2, default=str))
    else:
        console().print(snapshot_renderable(snap))
    return 0


def _known_gpu(name: str) -> Any:
    from gpulab.gpu import hardware

    gpu = hardware.match_gpu(name)
    if gpu is None:
        known = ", ".join(f"{g.key} ({g.name})" for g in hardware.GPUS.values())
        raise UsageError(f"unknown GPU '{name}'. Known: {known}")
    return gpu


def _set_gpu(ws: Any, gpu: Any, quiet: bool) -> None:
    from gpulab.lab.probe import SETTING

    ws.set_setting(SETTING, gpu.key)
    if not quiet:
        print(
            f"rooflines will use the {gpu.name} datasheet when no known GPU is detected "
            "(remembered in your workspace)",
            file=sys.stderr,
        )


def _watch(ws: Any, args: Any) -> int:
    """Refresh like nvitop until Ctrl-C: NVML every interval, torch asked once."""
    from gpulab.lab.probe import ask_torch, snapshot, snapshot_renderable

    interval = args.interval
    try:
        torch_info = ask_torch()  # once: SMs and L2 don't change
        if args.json:  # one JSON object a line: a log another tool can read
            while True:
                print(json.dumps(snapshot(ws, torch_info=torch_info), default=str), flush=True)
                time.sleep(interval)
        from rich.console import Group
        from rich.live import Live
        from rich.text import Text

        def frame() -> Any:
            return Group(
                snapshot_renderable(snapshot(ws, torch_info=torch_info)),
                Text(f"refreshing every {interval:g} s — Ctrl-C to stop", style="dim"),
            )

        with Live(frame(), console=console(), auto_refresh=False, screen=False) as live:
            while True:
                time.sleep(interval)
                live.update(frame(), refresh=True)
    except KeyboardInterrupt:
        return 0


def _bench(ws: Any, args: Any) -> int:
    from gpulab.lab.microbench_runner import results_renderable, run_microbench

    err = console(stderr=True)
    if args.json:
        out = run_microbench(ws.root, quick=args.quick)
    else:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal,
        ) as progress:
            task = progress.add_task("starting the benchmarks", total=None)

            def on_event(ev: ShownEvent) -> None:
                if ev["type"] == "progress":
                    progress.update(
                        task,
                        completed=ev.get("done", 0),
                        total=ev.get("total"),
                        description=str(ev.get("label", "")),
                    )
                elif ev["type"] == "note":
                    progress.console.print(
                        f"[yellow]note:[/] {ev.get('text')}", markup=True, highlight=False
                    )

            out = run_microbench(ws.root, quick=args.quick, on_event=on_event)
    if not out["ok"]:
        raise UsageError(f"microbenchmarks: {out['error']}")
    if args.json:
        print(json.dumps({**out["result"], "cache": out.get("cache")}, indent=2, default=str))
        return 0
    console().print(results_renderable(out["result"]))
    if out.get("cache"):
        err.print(
            f"[dim]saved to {out['cache']}: checks and rooflines on this GPU now use "
            "these measured ceilings[/]"
        )
    return 0
