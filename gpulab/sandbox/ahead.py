"""A check's Triton kernels compiled ahead, side by side (issue 32; GPU only).

After an edit every kernel of a check compiles again, one after the other,
in the graded calls that first launch it: on an H200 that was 6 s of a
softmax check's 12 s of cases and about 14 s of flash_attention's 19
(torch 2.11, Triton 3.6, 2026-12-03). Threads do not help (Triton's
compiler holds the GIL: 8 kernels took 1.10 s one after another, 1.16 s in
two threads on a 2-core box), so this uses processes.

Each check records the specialisations its kernels compiled with (Triton's
own `specialization_data`, from its post-compile hook) in the file's
compiler cache. The next check of the file, before its first case, gives
the recorded ones of each kernel the file still defines (by name) to forked
workers, which compile the edited source into that cache, and then loads
them (`JITFunction.preload`, a cache hit), so the graded calls find them
compiled. An edit that keeps a kernel's arguments and block sizes keeps
its specialisations; one that changes them compiles what is new in its
graded call, as before.

No learner code runs here that would not run anyway: the workers only
compile, and die. The record lives in the learner's own cache, so a
tampered one can only waste the learner's own time (bounded by MAX_SPECS
and DEADLINE_S); the judge never reads it, and nothing here decides
anything.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpulab.wire.sandbox_start import CompileAhead, CompiledAhead

if TYPE_CHECKING:
    from triton.runtime.jit import JITFunction

RECORD = "gpulab-compiled.json"
MAX_SPECS = 256
MAX_RECORD_BYTES = 4 << 20
# How long the workers may take in all before the rest is left to the
# graded calls; and at most this many of them.
DEADLINE_S = 60.0
MAX_WORKERS = 12


def ahead_request(server: Any, msg: CompileAhead) -> CompiledAhead:
    started = time.monotonic()
    if server.device != "cuda":
        return CompiledAhead()  # the interpreter compiles nothing
    cache = _cache_dir()
    if cache is None:
        return CompiledAhead()
    record = Record(cache / RECORD)
    record.start()
    specs = matched(kernels_of(server.module), record.previous)
    done, workers = compile_apart(specs)
    return CompiledAhead(
        kernels=len(specs),
        compiled=load(specs, done),
        workers=workers,
        seconds=round(time.monotonic() - started, 3),
    )


def _cache_dir() -> Path | None:
    with contextlib.suppress(Exception):
        from triton import knobs

        d = knobs.cache.dir or os.environ.get("TRITON_CACHE_DIR")
        if d:
            return Path(d)
    return None


class Record:
    """The specialisations this check compiles, kept for the next check:
    (kernel's qualified name, Triton's specialisation data), in the file's
    cache, written as they come (a check may end at any case)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.previous = read_record(path)
        self.seen: dict[str, list[str]] = {}

    def start(self) -> None:
        from triton import knobs

        before = knobs.runtime.jit_post_compile_hook
        record = self

        def hook(**kw: Any) -> Any:
            with contextlib.suppress(Exception):
                record.add(kw["fn"].jit_function, kw["compile"]["specialization_data"])
            return before(**kw) if before is not None else None

        knobs.runtime.jit_post_compile_hook = hook

    def add(self, jit: Any, data: str) -> None:
        name = _qualname(jit)
        got = self.seen.setdefault(name, [])
        if data in got or sum(map(len, self.seen.values())) >= MAX_SPECS:
            return
        got.append(data)
        tmp = self.path.with_name(f".{RECORD}.{os.getpid()}")
        with contextlib.suppress(OSError):
            tmp.write_text(json.dumps({"version": _version(), "kernels": self.seen}))
            os.replace(tmp, self.path)


def _version() -> str:
    import triton

    return f"triton {triton.__version__}"


def read_record(path: Path) -> dict[str, list[str]]:
    """The last check's record, or nothing (missing, another Triton's, too
    big, or not what this writes)."""
    try:
        if path.stat().st_size > MAX_RECORD_BYTES:
            return {}
        obj = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(obj, dict) or obj.get("version") != _version():
        return {}
    kernels = obj.get("kernels")
    if not isinstance(kernels, dict):
        return {}
    return {
        str(k): [d for d in v if isinstance(d, str)][:MAX_SPECS]
        for k, v in kernels.items()
        if isinstance(v, list)
    }


def _qualname(jit: Any) -> str:
    return str(getattr(getattr(jit, "fn", None), "__qualname__", "?"))


def kernels_of(module: Any) -> dict[str, JITFunction]:
    """The module's Triton kernels by qualified name (under any autotune or
    heuristics wrappers)."""
    from triton.runtime.jit import JITFunction

    out: dict[str, JITFunction] = {}
    for value in list(vars(module).values()) if module is not None else []:
        for _ in range(8):
            if isinstance(value, JITFunction) or not hasattr(value, "fn"):
                break
            value = value.fn
        if isinstance(value, JITFunction):
            out.setdefault(_qualname(value), value)
    return out


def matched(
    kernels: dict[str, JITFunction], previous: dict[str, list[str]]
) -> list[tuple[JITFunction, str]]:
    """(kernel, specialisation) for each recorded one of a kernel the file
    still has, renamed to the kernel's current full name (preload checks it)."""
    out: list[tuple[JITFunction, str]] = []
    for name, datas in previous.items():
        jit = kernels.get(name)
        if jit is None:
            continue
        for data in datas:
            with contextlib.suppress(ValueError, TypeError):
                obj = json.loads(data)
                obj["name"] = getattr(jit, "_fn_name", obj.get("name"))
                out.append((jit, json.dumps(obj)))
    return out[:MAX_SPECS]


def workers_for(n: int) -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(0, min(n, cpus - 1, MAX_WORKERS))


def compile_apart(specs: list[tuple[Any, str]], workers: int | None = None) -> tuple[set[int], int]:
    """Compile the specialisations in forked workers, into the compiler
    cache this process reads. Returns (the indices compiled, workers)."""
    n = workers_for(len(specs)) if workers is None else min(workers, len(specs))
    if n < 2:
        return set(), 0  # one at a time is what the graded calls do anyway
    from triton.runtime import driver

    device = driver.active.get_current_device()
    _prepare({id(j): j for j, _ in specs}.values(), device)
    read, write = os.pipe()
    pids = []
    for w in range(n):
        try:
            pid = os.fork()
        except OSError:  # no more processes allowed: the started ones do what they can
            break
        if pid == 0:  # the worker: no CUDA here, and no way back but _exit
            code = 1
            try:
                os.close(read)
                _worker(specs, range(w, len(specs), n), device, write)
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
    os.close(write)
    return _collect(read, pids), len(pids)


def _prepare(jits: Any, device: int) -> None:
    """What every compile needs first, done once here for all the workers.
    A kernel's per-device caches (its target, backend and binder) are made
    on first use, which asks CUDA: a worker must not be the one. And each
    compile's cache key needs Triton's own hash (of its sources and the
    hundreds of MB of libtriton), ptxas's version, and the kernel's source
    hash: each cached once computed, so computed before the fork."""
    for jit in jits:
        with contextlib.suppress(Exception):
            backend = jit.device_caches[device][3]
            backend.hash()
        with contextlib.suppress(Exception):
            jit.cache_key  # noqa: B018 - a property that caches itself
    with contextlib.suppress(Exception):
        from triton.runtime.cache import triton_key

        triton_key()


def _worker(specs: list[tuple[Any, str]], mine: range, device: int, out: int) -> None:
    from triton import knobs
    from triton.runtime import driver

    # preload() asks the driver for the current device, which is torch's,
    # and CUDA must not be touched in a forked child; the parent's device
    # caches (target, backend) came with the fork.
    driver.active.get_current_device = lambda: device
    knobs.runtime.jit_post_compile_hook = None  # the record is the parent's
    for i in mine:
        jit, data = specs[i]
        try:
            kernel = jit.preload(data)
            _launcher(kernel)
        except Exception:  # noqa: BLE001 - its graded call compiles it, and says why
            continue
        os.write(out, f"{i}\n".encode())


def _launcher(kernel: Any) -> None:
    """Build the kernel's launcher too (a small C module gcc compiles, cached
    by its source: 0.2 s a kernel on the H200), where this Triton builds one
    per kernel; loading the binary needs CUDA and is left to the parent."""
    from triton.runtime import driver

    make = getattr(driver.active, "launcher_cls", None)
    if make is not None and kernel is not None:
        with contextlib.suppress(Exception):
            make(kernel.src, kernel.metadata)


def _collect(read: int, pids: list[int]) -> set[int]:
    done: set[int] = set()
    os.set_blocking(read, False)
    buf = b""
    end = time.monotonic() + DEADLINE_S
    live = set(pids)
    while live and time.monotonic() < end:
        with contextlib.suppress(BlockingIOError):
            buf += os.read(read, 65536)
        for pid in list(live):
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0]:
                    live.discard(pid)
        time.sleep(0.01)
    for pid in live:  # past the deadline: the graded calls compile the rest
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    with contextlib.suppress(BlockingIOError, OSError):
        buf += os.read(read, 1 << 20)
    os.close(read)
    for line in buf.decode(errors="replace").split():
        if line.isdigit():
            done.add(int(line))
    return done


def load(specs: list[tuple[Any, str]], done: set[int]) -> int:
    """Load what the workers compiled (from the cache) into each kernel's
    own in-memory cache, as its first launch would have."""
    n = 0
    for i in sorted(done):
        jit, data = specs[i]
        with contextlib.suppress(Exception):
            if jit.preload(data) is not None:
                n += 1
    return n


__all__ = ["Record", "ahead_request", "compile_apart", "kernels_of", "load", "matched"]
