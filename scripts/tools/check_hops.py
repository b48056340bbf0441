"""The lab process's side of one check, measured (issue 45): which gpulab
modules it passes through, how many calls cross from one module into
another, and how often a result is turned into a dict and back.

    python scripts/tools/check_hops.py cli|tui [--json OUT]

`cli`: `gpulab check softmax --device cpu` in this process; `tui`: the lab
opened on softmax and `c` pressed (Textual's Pilot). A check runs once
untraced first (the TUI: its lazy imports only: its check runs in a pooled
thread, traced by each work item), so lazy imports are done, then once traced, from the command (or the key) to the verdict on
screen. Reported:

- modules: the gpulab modules whose functions ran, in the order first entered;
- hops: distinct (caller module -> callee module) pairs among them, the
  caller being the nearest gpulab frame up the stack;
- round trips: calls of CheckResult.to_json / from_json, Timing.from_json and
  textsafe.visible_tree on the check's result (each to_json -> from_json is
  typed -> dict -> typed).

The judge and sandbox run in child processes and are not traced. Each mode
costs two real CPU checks (about 15 s of CPU). From a checkout:
PYTHONPATH=$PWD.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any

WATCHED = {
    ("gpulab.wire.result", "to_json"),
    ("gpulab.wire.result", "from_json"),
    ("gpulab.textsafe", "visible_tree"),
}


PRELOAD = (
    "gpulab.lab.runner",
    "gpulab.lab.child",
    "gpulab.lab.report",
    "gpulab.wire.events",
    "gpulab.explain.render",
    "gpulab.gpu.costmodel",
    "gpulab.gpu.loadmap",
    "gpulab.tui.plot",
)


class Tracer:
    def __init__(self) -> None:
        self.order: list[str] = []
        self.edges: Counter[tuple[str, str]] = Counter()
        self.watched: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.on = False

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        if not callee.startswith("gpulab") or frame.f_code.co_name == "<module>":
            return
        up = frame.f_back
        while up is not None and not up.f_globals.get("__name__", "").startswith("gpulab"):
            up = up.f_back
        caller = up.f_globals.get("__name__", "") if up is not None else ""
        name = frame.f_code.co_name
        qual = getattr(frame.f_code, "co_qualname", name)
        with self._lock:
            if callee not in self.order:
                self.order.append(callee)
            if caller and caller != callee:
                self.edges[(caller, callee)] += 1
            if (callee, name) in WATCHED:
                if name == "visible_tree" and caller == "gpulab.textsafe":
                    return  # its own recursion
                if name == "to_json" and not qual.startswith("CheckResult"):
                    return
                self.watched[f"{callee}.{qual}"] += 1

    def start(self) -> None:
        self.on = True
        threading.setprofile(self)
        sys.setprofile(self)

    def stop(self) -> None:
        self.on = False
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]

    def pooled(self) -> None:
        """Trace work run by thread pools whose threads started earlier
        (Textual's thread workers): Python 3.11 cannot set a running
        thread's profile from outside, so each work item sets its own."""
        import concurrent.futures.thread as pool

        run = pool._WorkItem.run
        tracer = self

        def traced(item: Any) -> None:
            if tracer.on:
                sys.setprofile(tracer)
            try:
                run(item)
            finally:
                sys.setprofile(None)

        pool._WorkItem.run = traced  # type: ignore[method-assign]

    def report(self) -> dict[str, Any]:
        return {
            "modules": self.order,
            "module_count": len(self.order),
            "hops": len(self.edges),
            "edges": [f"{a} -> {b}" for a, b in self.edges],
            "round_trip_calls": dict(self.watched),
        }


def cli(tracer: Tracer) -> None:
    from gpulab.cli import main

    for traced in (False, True):
        if traced:
            tracer.start()
        try:
            main(["check", "softmax", "--device", "cpu"])
        except SystemExit:
            pass
        finally:
            if traced:
                tracer.stop()


def tui(tracer: Tracer) -> None:
    import importlib

    from gpulab.gpu.devinfo import GpuInfo
    from gpulab.lab.workspace import Workspace
    from gpulab.tui.app import build_app

    # Once, untraced: what a check imports lazily. No check runs untraced
    # here: the worker's thread must start after the tracer (Python 3.11
    # cannot trace a thread already running).
    for name in PRELOAD:
        importlib.import_module(name)
    tracer.pooled()

    async def run() -> None:
        ws = Workspace.open(os.environ["GPULAB_HOME"])
        app = build_app(ws, device="cpu", welcome=False, gpu_info=GpuInfo())
        async with app.run_test(size=(100, 30)) as pilot:
            app.action_open_lesson("softmax")
            await pilot.pause(0.5)
            tracer.start()
            await pilot.press("c")
            await pilot.pause(0.2)
            for _ in range(1200):
                if not app.checking:
                    break
                await pilot.pause(0.1)
            await pilot.pause(0.5)
            tracer.stop()

    asyncio.run(run())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("cli", "tui"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["GPULAB_HOME"] = home
        tracer = Tracer()
        cli(tracer) if args.mode == "cli" else tui(tracer)
    out = tracer.report()
    print(
        json.dumps({k: out[k] for k in ("module_count", "hops", "round_trip_calls")}, indent=2),
        file=sys.stderr,
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
