"""A check's set-up before its file is read (Prepared): the device, the
folders, the sandbox's policy and the sandboxes themselves, made ahead by a
spare judge or when the check begins; and the clean-up of what this judge
made, however it ends."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpulab.judge.policy import (
    cache_dir,
    import_path,
    owner_only,
    policy_for,
    replay_cache,
    trim_cache,
)
from gpulab.wire.check_request import CheckRequest
from gpulab.wire.protocol import paths_off_env
from gpulab.wire.sandbox_start import Ok, Prepare, ProfilerPolicy, Warm

if TYPE_CHECKING:
    from gpulab.judge.forks import ForkServer
    from gpulab.judge.remote import Sandbox


def choose_device(wanted: str) -> str:
    if wanted == "cpu":
        return "cpu"
    if wanted == "auto" and not _nvidia_driver():
        # No driver: torch would see no GPU either, after an import of 2-3 s
        # on a 2-core laptop that would delay the sandbox's start (the judge
        # imports torch later, while its sandboxes start).
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if wanted == "cuda":
        raise RuntimeError("a CUDA GPU was asked for (--device cuda) but torch sees none")
    return "cpu"


def _nvidia_driver() -> bool:
    """False only where NVML says there is no NVIDIA driver (no library, or
    the driver not loaded); anything else, torch decides."""
    if os.path.isdir("/proc/driver/nvidia"):
        # Loaded (Linux): torch decides, with no NVML start first (a few
        # hundred ms on a busy box, gpulab.gpu.devinfo) on a GPU's check.
        return True
    from gpulab.gpu import nvml

    try:
        nv = nvml.init()
    except ImportError:
        return True
    except Exception as exc:  # noqa: BLE001 - pynvml's errors, by name below
        return type(exc).__name__ not in ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded")
    nvml.shutdown(nv)
    return True


# Folders this judge made, removed however it ends (SIGTERM included: a
# check cancelled or timed out, a spare no check took).
_FOLDERS: list[Path] = []


def _folder(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    _FOLDERS.append(path)
    return path


# The workspace's compiler caches this judge's sandboxes wrote: trimmed
# (trim_cache) however it ends.
CACHES: list[Path] = []


def remove_folders() -> None:
    from gpulab.safetree import remove_tree

    while _FOLDERS:
        # Without recursion: a sandbox may nest its private folder 1500 deep
        # (shutil.rmtree recurses on Python 3.11), and follows no links.
        remove_tree(_FOLDERS.pop())


# Below this much memory a spare keeps one sandbox warm, not two: the
# replay's starts when its check begins. An idle lab held 1000 MB RSS (733
# MB PSS) with torch 2.13's CPU build, the replay's sandbox 295 MB (209 MB)
# of it, and about 1.9 GB with torch's CUDA build, 600-670 MB a sandbox
# (issue 48; docs/grading.md, "The spare judge").
SMALL_MEMORY_BYTES = 8 << 30


def small_memory() -> bool:
    """A machine where a spare keeps one sandbox warm (MemTotal below
    SMALL_MEMORY_BYTES); GPULAB_SPARE_SANDBOXES=1 or 2 says so instead."""
    said = os.environ.get("GPULAB_SPARE_SANDBOXES", "")
    if said in ("1", "2"):
        return said == "1"
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024 < SMALL_MEMORY_BYTES
    except (OSError, ValueError, IndexError):
        pass
    return False


# Read by torch's OpenMP and NumPy's OpenBLAS when they start: the
# sandboxes get them (gpulab.judge.remote.ENV_ALLOWED).
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def one_thread() -> None:
    """One thread for torch's and NumPy's maths in a CPU check, in the judge
    and in the sandboxes it starts (a learner's own setting kept). The
    interpreter's tensors are small: a second thread only spins between
    them. The correctness stage of a softmax check took 15-19 s with one
    thread against 24-27 s with the default two, on a 2-core box under a
    load of 4-5 (BENCHMARKS.md, "One thread for a CPU check's maths")."""
    for name in THREAD_VARS:
        os.environ.setdefault(name, "1")
    torch = sys.modules.get("torch")
    if torch is not None and os.environ["OMP_NUM_THREADS"] == "1":
        torch.set_num_threads(1)  # imported already: the variable was read


class Prepared:
    """What a check needs before its file is read: the device, its folders,
    the sandbox's policy and the sandboxes themselves. A spare judge
    (`--spare`, gpulab.lab.runner.Spare) makes one ahead of the check, for the
    request it expects, with both sandboxes started and their imports done;
    a check that asks for anything else gets a fresh one. No learner code
    has run in any of it: the file is read and sent when the check begins."""

    def __init__(self, request: CheckRequest, ahead: bool = False) -> None:
        from gpulab.judge.remote import Sandbox

        self.request = request
        self.device = choose_device(request.device)
        if self.device == "cpu":
            # The judge runs gpulab's own probe kernels (which dtypes the
            # interpreter computes faithfully) before triton is imported.
            os.environ["TRITON_INTERPRET"] = "1"
            one_thread()
            import warnings

            warnings.filterwarnings(
                "ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter"
            )
        self.forks: ForkServer | None = None
        if self.device == "cpu":
            self.forks = start_forks()
        self.private = _folder("gpulab-sandbox-")
        # The outbox is bound into a traced exercise's sandbox, which owns
        # it as the user and may chmod it: it lies inside a folder of the
        # judge's that the sandbox never sees, so nothing left in it while
        # the check runs (a setuid copy of id, run by another user as the
        # one who checked) can be reached by anyone else.
        self.outbox = _folder("gpulab-outbox-") / "box"
        self.outbox.mkdir(mode=0o700)
        self.replay_dirs: list[Path] = []
        cache = cache_dir(request, self.private)
        # Notes for the check's result: what the trims of its cache found.
        self.notes: list[str] = []
        try:
            cache.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            owner_only(cache)
            # What a check this judge never closed left (one stopped at its
            # timeout: SIGTERM, then SIGKILL 3 s later).
            self.note(trim_cache(cache))
            cache.mkdir(parents=True, exist_ok=True)
            CACHES.append(cache)
        except OSError:  # a read-only workspace: this check compiles afresh
            cache = self.private / "cache"
            cache.mkdir(parents=True, exist_ok=True)
        self.cache = cache
        self.policy = policy_for(request, self.device, self.private, cache, self.outbox)
        self._sandbox: Sandbox | None = None
        self._replay: Sandbox | None = None
        # The file's bytes once the check began (read_submission): sandboxes
        # started from then on get them at once.
        self.data: bytes | None = None
        self.problem = ""
        self._Sandbox = Sandbox
        # "held": started ahead without its GPU start; "done": started ahead.
        self.ahead = ""
        if ahead:
            try:
                self._start_ahead()
            except Exception:  # noqa: BLE001 - the check starts its sandboxes itself
                self._drop_ahead()

    def _start_ahead(self) -> None:
        """The part of a spare's start that does no GPU work, so it may run
        while another check times: the sandboxes start and do their imports
        (held before CUDA, `hold`), and the judge imports the grader.
        `finish_ahead` does the rest."""
        # Each process does its own start-up at once; each waits for the
        # others only at the end.
        self._sandbox = self.fresh(wait=False, hold=True)
        from gpulab.judge.replay import gpu_replay

        if (self.device == "cpu" or gpu_replay()) and not small_memory():
            self._replay = self.fresh_replay(wait=False)
        # What the check's grader imports (torch, triton, its cases).
        from gpulab.judge import harness, loader  # noqa: F401

        with contextlib.suppress(ImportError, loader.UnknownExercise):
            loader.load(self.request.exercise, self.request.content_root)
        if self._replay is not None:  # imports only: nothing of it is GPU work
            self._replay.wait_ready()
            self._replay.send(Prepare())
        self._sandbox.wait_held()
        self.ahead = "held"

    def finish_ahead(self) -> None:
        """A spare's GPU start: its own CUDA context and the sandbox's, and
        the sandboxes' warm-ups (the audit's profiler starts CUPTI). Holds
        the GPU shared, so it waits while someone times. Once; a spare whose
        start failed leaves the check to start its sandboxes itself."""
        if self.ahead != "held":
            return
        self.ahead = "done"
        try:
            self._finish_ahead()
        except Exception:  # noqa: BLE001 - the check starts its sandboxes itself
            self._drop_ahead()

    def _drop_ahead(self) -> None:
        """A start ahead that failed: its sandboxes stopped, the check's own
        started afresh."""
        for box in (self._sandbox, self._replay):
            if box is not None:
                box.close()
        self._sandbox = self._replay = None

    def _finish_ahead(self) -> None:
        from gpulab.judge.remote import SandboxDied

        assert self._sandbox is not None
        held = contextlib.ExitStack()
        with held:
            if self.device == "cuda":
                # Starting CUDA is GPU work: not while someone times.
                import torch

                from gpulab.gpu.gpulock import gpu_in_use

                held.enter_context(gpu_in_use(gpu=torch.cuda.current_device()))
            self._sandbox.go()
            if self.device == "cuda":
                # The judge's own CUDA context and cuBLAS handle (its
                # references and baselines use both).
                one = torch.ones(8, 8, device="cuda")
                (one @ one).sum().item()
            self._sandbox.wait_ready()
            self._sandbox.send(Warm())
            for box in (self._sandbox, self._replay):
                if box is not None and not isinstance(box.reply(Ok), Ok):
                    raise SandboxDied("a sandbox started ahead did not warm up")

    def take_sandbox(self) -> Sandbox:
        self.finish_ahead()
        sandbox, self._sandbox = self._sandbox, None
        return sandbox if sandbox is not None else self.fresh()

    def take_replay(self) -> Sandbox:
        self.finish_ahead()
        sandbox, self._replay = self._replay, None
        return sandbox if sandbox is not None else self.fresh_replay()

    def fresh(
        self,
        prefix: list[str] | None = None,
        profiler: ProfilerPolicy | None = None,
        wait: bool = True,
        hold: bool = False,
        forked: bool = True,
    ) -> Sandbox:
        """The check's; --explain's own on the CPU; and, with `prefix` (the
        ncu command) and `profiler` (what its policy opens for ncu), the one
        Nsight Compute measures (issue 21, gpulab.explain.judge.nsight_step).
        `forked` False: exec'd, never forked from the fork server (whose
        Triton was imported interpreted)."""
        return self._Sandbox(
            file=self.request.file,
            device=self.device,
            private=self.private,
            prefix=prefix,
            source=self.data,
            problem=self.problem,
            switches=paths_off_env(self.request.paths_off),
            wait=wait,
            hold=hold,
            forks=self.forks if forked else None,
            policy=replace(self.policy, profiler=profiler),
            triton_cache=str(self.cache),
            sys_path=tuple(import_path(Path(self.request.file).resolve())),
        )

    def fresh_apart(self, **options: Any) -> Sandbox:
        """`fresh`, exec'd: --explain's sandboxes, whose process must import
        Triton itself (Triton decides at its import whether its own @jit
        library is interpreted, and --explain compiles as a GPU would)."""
        return self.fresh(**options, forked=False)

    def fresh_replay(self, wait: bool = True) -> Sandbox:
        """The replay's sandbox (gpulab.judge.replay): a folder and a
        compiler cache of its own, and never the learner's file loaded."""
        # Beside the check's folder, not in it: where namespaces are refused,
        # the check's sandbox may write its own folder, and the replay's
        # interpreter reads its kernels' source back from this one.
        own = _folder("gpulab-replay-")
        self.replay_dirs.append(own)
        cache = replay_cache(self.request, own) if self.device == "cuda" else own / "triton"
        # The check's sandbox's write list but its own folders: the GPU's
        # device nodes stay (CUDA opens more of them as it goes).
        mine = {str(self.private), str(self.cache), str(self.outbox), str(self.outbox.parent)}
        apart = [] if cache.is_relative_to(own) else [str(cache)]
        write = [str(own), *apart, *(w for w in self.policy.write if w not in mine)]
        return self._Sandbox(
            file=self.request.file,
            device=self.device,
            private=own,
            wait=wait,
            forks=self.forks,
            policy=replace(self.policy, write=list(dict.fromkeys(write))),
            triton_cache=str(cache),
            sys_path=tuple(import_path(Path(self.request.file).resolve())),
        )

    def note(self, text: str) -> None:
        if text and text not in self.notes:
            self.notes.append(text)

    def close(self) -> None:
        from gpulab.safetree import remove_tree

        for box in (self._sandbox, self._replay):
            if box is not None:
                box.close()
        self._sandbox = self._replay = None
        if self.forks is not None and self.forks not in _KEPT:  # kept: the next check's
            close_forks(self.forks)
        self.forks = None
        # Without recursion and following no links (gpulab.safetree): the
        # sandboxes wrote these.
        for d in self.replay_dirs:
            remove_tree(d)
        remove_tree(self.private)
        remove_tree(self.outbox.parent)
        if self.cache.parent.parent.name == ".gpulab":  # the workspace's, kept after the check
            self.note(trim_cache(self.cache))
        owner_only(self.cache)


# A judge that grades one file and exits (gpulab's own, always) starts a
# fork server for its check. One that grades several files in turn (a batch
# of variants in the tests) may keep it for the next (`KEEP_FORKS`): the
# server never runs learner code, and each sandbox it forks takes its
# environment, folder and namespaces from its own spawn request. What that
# saves is the server's imports, about 3.4 s of CPU a check on a 2-core box.
KEEP_FORKS = False
_KEPT: list[ForkServer] = []


def start_forks() -> ForkServer | None:
    """The check's fork server (gpulab.judge.forks), started now so that its
    imports run beside the judge's; None where it is turned off or cannot
    start (the sandboxes are then exec'd, as on a GPU). With KEEP_FORKS, the
    one kept from an earlier check while it lives."""
    from gpulab.judge import forks, remote

    if not forks.wanted():
        return None
    if KEEP_FORKS and _KEPT and _KEPT[0].alive():
        return _KEPT[0]
    close_kept_forks()
    try:
        own = _folder("gpulab-forks-")
        server = forks.ForkServer(remote.sandbox_env("cpu", own), own)
    except OSError:
        return None
    remote.SPARED.add(server.pid())
    if KEEP_FORKS:
        _FOLDERS.remove(own)  # the server's, removed with it (close_kept_forks)
        _KEPT.append(server)
    return server


def close_forks(server: ForkServer) -> None:
    """Stop a fork server and remove its folder."""
    from gpulab.judge import remote
    from gpulab.safetree import remove_tree

    remote.SPARED.discard(server.pid())  # its pid may be reused
    server.close()
    remove_tree(server.folder)


def close_kept_forks() -> None:
    """Stop the kept fork server, if any (a batch's end)."""
    while _KEPT:
        close_forks(_KEPT.pop())


def prepare_ahead(line: str) -> Prepared | None:
    """A spare's preparation for the request on `line`; None where it fails
    (the check then starts afresh, and says why if it cannot)."""
    try:
        return Prepared(CheckRequest.from_json(json.loads(line)), ahead=True)
    except Exception:  # noqa: BLE001 - reported by the check's own start
        return None
