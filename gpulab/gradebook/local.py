"""`--executor local`: the batch's students graded on this machine, N at
a time, each by a worker process (gpulab.gradebook.worker, the same program
a Slurm array task runs).

N is one per visible GPU (each worker sees only its own, through
CUDA_VISIBLE_DEVICES), or `jobs` CPU workers. A standard thread pool hands
out the students; each thread runs one worker process at a time and relays
its JSON lines to `on_event`. `stop` ends the batch: every worker gets
SIGTERM (it stops its judge and sandboxes), no new one starts, and what was
finished stays finished: each finished task is a result file already.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gpulab.lab import child
from gpulab.wire.protocol import JsonObject

# Each JSON line a worker prints (gpulab.gradebook.records.WorkerEvent), as
# it came from the worker's stdout: relayed unread, the sink reads it.
EventSink = Callable[[JsonObject], None]


def visible_gpus() -> list[str]:
    """The CUDA ordinals a worker may be given, as this process sees them (NVML)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None and env.strip() in ("", "-1"):
        return []
    try:
        from gpulab.gpu import nvml

        with nvml.opened() as nv:
            count = int(nv.nvmlDeviceGetCount())
    except Exception:  # noqa: BLE001 - no NVML or no driver: no GPU
        return []
    if env is not None:
        parts = [p.strip() for p in env.split(",") if p.strip()]
        return parts[:count]
    return [str(i) for i in range(count)]


class LocalRun:
    def __init__(
        self, batch: Path, results: Path, students: int, slots: Sequence[str | None]
    ) -> None:
        self.batch, self.results, self.students = batch, results, students
        self.slots: queue.Queue[str | None] = queue.Queue()
        for slot in slots:
            self.slots.put(slot)
        self.width = len(slots)
        self.stop = threading.Event()
        self._live: set[subprocess.Popen[str]] = set()
        self._lock = threading.Lock()
        self.failed_workers: list[str] = []

    def _one(self, index: int, on_event: EventSink) -> None:
        if self.stop.is_set():
            return
        slot = self.slots.get()
        try:
            # The worker's own chatter (warnings, a traceback) goes to a log
            # beside the results: a pipe nobody reads could fill and stall it.
            logs = self.results / "_logs"
            logs.mkdir(parents=True, exist_ok=True)
            with open(logs / f"{index}.log", "ab") as log:
                code = self._worker(index, slot, log, on_event)
            if code not in (0, None) and not self.stop.is_set():
                self.failed_workers.append(
                    f"student #{index}: worker exit {code} (see {logs / f'{index}.log'})"
                )
        finally:
            self.slots.put(slot)

    def _worker(self, index: int, slot: str | None, log: Any, on_event: EventSink) -> int | None:
        """Run student `index`'s worker to its end (or `stop`); its exit code."""
        extra = {"CUDA_VISIBLE_DEVICES": slot} if slot is not None else {}
        proc = child.spawn(
            child.python_module("gpulab.gradebook.worker", str(self.batch), "--index", str(index)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=child.env(PYTHONUNBUFFERED="1", **extra),
        )
        with self._lock:
            self._live.add(proc)
        try:
            assert proc.stdout is not None
            events = child.Events(
                child.json_line_reader(proc.stdout),
                deadline=time.monotonic() + 10**9,
                cancel=self.stop,
            )
            for event in events:
                on_event(event)
            if events.stopped:
                child.kill_tree(proc, term_s=10)
            else:
                proc.wait()
        finally:
            with self._lock:
                self._live.discard(proc)
        return proc.returncode

    def run(self, on_event: EventSink) -> None:
        """Grade every student; returns when all are done or `stop` is set."""
        with ThreadPoolExecutor(max_workers=self.width, thread_name_prefix="gpulab-grade") as pool:
            futures = [pool.submit(self._one, i, on_event) for i in range(self.students)]
            try:
                for f in futures:
                    while not f.done():
                        time.sleep(0.1)  # Ctrl-C reaches this thread between waits
                    f.result()
            except BaseException:
                self.halt()
                pool.shutdown(wait=True, cancel_futures=True)
                raise

    def halt(self) -> None:
        """Stop every worker (SIGTERM, then their whole group)."""
        self.stop.set()
        with self._lock:
            live = list(self._live)
        for proc in live:
            child.kill_tree(proc, term_s=10)


def slots_for(device: str, jobs: int | None) -> list[str | None]:
    """One slot per visible GPU (unless the device is the CPU), else `jobs`."""
    gpus = [] if device == "cpu" else visible_gpus()
    if gpus:
        return list(gpus[: jobs or len(gpus)])
    return [None] * max(1, jobs or 1)
