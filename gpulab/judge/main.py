"""The judge: the trusted side of a check (`python -m gpulab.judge.main`).

Started by gpulab.lab.runner with a CheckRequest on stdin; reports frames
(gpulab.wire.protocol) on the file descriptor named in GPULAB_EVENTS_FD, which
only it holds. It draws the secret seed, starts the sandbox, hands it
tensors, checks what comes back against its own references and times it
(gpulab.judge.kernel, gpulab.judge.batches). It never imports the
learner's file: nothing the learner writes runs in this process.

Every exercise is judged here. Where a check must look inside the
learner's running program, the sandbox reports what it saw as plain data
and the judge applies its rules to it: Dynamo's trace for lesson 06
(gpulab.sandbox.dynamo), the profile's events for lesson 07
(gpulab.sandbox.training). Lesson 08's steps come back as exported JAX
programs, which the judge compiles and runs itself
(gpulab.sandbox.jax_export).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpulab.judge.policy import (
    TRACE,
    cache_dir,
    import_path,
    owner_only,
    policy_for,
    replay_cache,
    trim_cache,
)
from gpulab.wire import crashes, protocol
from gpulab.wire.codec import PROTOCOL
from gpulab.wire.events import CaseDone, Correct, Graded, Stage
from gpulab.wire.protocol import SPARE_GO, CheckRequest, JsonObject, paths_off_env
from gpulab.wire.result import JUDGE_ORDER, CheckResult
from gpulab.wire.sandbox_start import Ok, Prepare, ProfilerPolicy, Warm
from gpulab.wire.status import StageKind, Status

if TYPE_CHECKING:
    from gpulab.judge.remote import Sandbox

# What the sandbox records around an exercise's file is the manifest's
# (`records`): a profiler's trace it writes back (gpulab.judge.policy), and
# what it sets up before the file loads (Dynamo's reports, JAX's exports).


class Channel:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        # Frames are written from the main thread and, once, from the thread
        # that answers the lab's SIGUSR1 (gpulab.judge.stuck): one at a time.
        self._lock = threading.Lock()
        self.marks: list[tuple[StageKind, float]] = [(StageKind.START, time.monotonic())]
        self.texts: list[str] = ["start"]  # each mark's own words
        self.said_version = False  # the first frame says the protocol's version

    def send(self, event: Stage | CaseDone | Correct | Graded) -> None:
        self.write(event.to_json())

    def write(self, frame: JsonObject) -> None:
        with self._lock:
            if not self.said_version:  # the lab refuses a judge of another version
                frame, self.said_version = {**frame, "protocol": PROTOCOL}, True
            protocol.write_frame(self.fd, frame)

    def finish(self, result: CheckResult) -> None:
        """The check's last frame: its result, as JSON (the lab reads it back
        field by field, trusting nothing of it)."""
        self.write({"type": "result", "result": result.to_json()})

    def stage(
        self,
        kind: StageKind,
        text: str,
        done: int | None = None,
        total: int | None = None,
        allow_s: float | None = None,
    ) -> None:
        """A stage: its kind, its words, and where there are steps, how many
        are done of how many (data, so the lab never reads them back out of
        words); `allow_s`, the seconds this stage may take (gpulab.judge.allowance)."""
        self.marks.append((kind, time.monotonic()))
        self.texts.append(text)
        if done is not None and total:
            self.send(Stage(text, int(done), int(total), allow_s, kind))
        else:
            self.send(Stage(text, allow_s=allow_s, kind=kind))

    def waiting(self, text: str) -> None:
        """A wait for the GPU (gpulab.gpu.gpulock's `on_wait`)."""
        self.stage(StageKind.WAITING, text)

    def stages(self) -> dict[str, float]:
        """Seconds in each kind of stage so far, in the order first seen
        (the result's `stages`: a slow check says where its time went)."""
        return protocol.stage_seconds(self.marks, time.monotonic())

    def slowest(self, n: int = 5) -> list[list[Any]]:
        """The n longest single steps, [words, seconds], longest first (the
        result's `slowest`: which case or timed shape the time went to)."""
        now = time.monotonic()
        ends = [t for _, t in self.marks[1:]] + [now]
        steps = sorted(
            (
                (round(end - t, 3), protocol.text(words, 120))
                for words, (_, t), end in zip(self.texts, self.marks, ends, strict=True)
            ),
            reverse=True,
        )
        return [[words, seconds] for seconds, words in steps[:n]]


def graded(channel: Channel, result: CheckResult) -> None:
    """The grade, sent as soon as the timing ends: on a GPU a diagnosis
    (advice, which never changes the grade) follows a timed check, and the
    learner need not wait for it to see the grade. On an H200 it came 0.8-1.4 s
    after the grade in a softmax check through the spare judge (feedback bench,
    torch 2.11, Triton 3.6, 2026-12-03), 3.7 s in a cold one under py-spy."""
    grade = result.timing.grade if result.timing is not None else None
    if not result.passed or not grade:
        return
    channel.send(Graded(protocol.text(grade, 8), protocol.text(result.summary, 300)))


def with_keys(result: CheckResult, **keys: Any) -> CheckResult:
    """`result` with more of the judge's own keys (gpulab.wire.result keeps
    them as they are: `verdict`, `isolation`, the diagnosis's, ...)."""
    return replace(result, rest={**result.rest, **keys})


def choose_device(wanted: str) -> str:
    if wanted == "cpu":
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if wanted == "cuda":
        raise RuntimeError("a CUDA GPU was asked for (--device cuda) but torch sees none")
    return "cpu"


MAX_SOURCE = 8 << 20  # a submission's bytes, sent whole in one frame


def read_submission(file: str) -> tuple[bytes | None, str]:
    """The submission's bytes, read once when the check begins: the sandbox
    imports these, and the replay keeps its kernels from the same text.
    (bytes, "") or (None, why not) in words."""
    from gpulab.fsutil import unreadable_file

    path = Path(file)
    problem = unreadable_file(path)
    if problem:
        return None, problem
    try:
        # Opened without blocking and checked once open: a file swapped for
        # a FIFO after unreadable_file looked would otherwise hold the judge
        # in open() until the check's timeout.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None, f"{path} is not a plain file"
            os.set_blocking(fd, True)
            data = f.read(MAX_SOURCE + 1)
    except OSError as exc:
        return None, f"{path} cannot be read: {exc.strerror or exc}"
    if len(data) > MAX_SOURCE:
        return None, (
            f"{path.name} is over {MAX_SOURCE >> 20} MiB: a submission is Python source, "
            "and gpulab grades files up to that size"
        )
    return data, ""


# Folders this judge made, removed however it ends (SIGTERM included: a
# check cancelled or timed out, a spare no check took).
_FOLDERS: list[Path] = []


def _folder(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    _FOLDERS.append(path)
    return path


# The workspace's compiler caches this judge's sandboxes wrote: trimmed
# (trim_cache) however it ends.
_CACHES: list[Path] = []


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
            _CACHES.append(cache)
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
    ) -> Sandbox:
        """The check's; --explain's own on the CPU; and, with `prefix` (the
        ncu command) and `profiler` (what its policy opens for ncu), the one
        Nsight Compute measures (issue 21, gpulab.explain.judge.nsight_step)."""
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
            policy=replace(self.policy, profiler=profiler),
            triton_cache=str(self.cache),
            sys_path=tuple(import_path(Path(self.request.file).resolve())),
        )

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
        # Without recursion and following no links (gpulab.safetree): the
        # sandboxes wrote these.
        for d in self.replay_dirs:
            remove_tree(d)
        remove_tree(self.private)
        remove_tree(self.outbox.parent)
        if self.cache.parent.parent.name == ".gpulab":  # the workspace's, kept after the check
            self.note(trim_cache(self.cache))
        owner_only(self.cache)


def judge(
    request: CheckRequest | JsonObject, channel: Channel, prepared: Prepared | None = None
) -> CheckResult:
    """Grade `request`, with `prepared` where a spare judge made it ahead
    (used only if it was made for this very request)."""
    from gpulab.judge.remote import SandboxDied

    if not isinstance(request, CheckRequest):  # the boundary: checked field by field
        request = CheckRequest.from_json(request)
    channel.stage(StageKind.START, "starting")
    if prepared is not None and (prepared.request != request or not prepared.cache.is_dir()):
        prepared.close()
        prepared = None
    if prepared is None:
        prepared = Prepared(request)
    device, policy = prepared.device, prepared.policy
    # The secret seed is drawn here and never leaves the judge.
    secret_seed = secrets.randbelow(2**31)
    data, unreadable = prepared.data, prepared.problem = read_submission(request.file)
    from gpulab.judge import stuck

    stuck.watch(request.file, data)
    sandbox = early = replayer = None
    result: CheckResult
    held = contextlib.ExitStack()
    try:
        if device == "cuda":
            # No gpulab timing runs while this check's kernels do (the
            # timing phase hands this hold back and times exclusive).
            import torch

            from gpulab.gpu.gpulock import gpu_in_use

            gpu = torch.cuda.current_device()
            held.enter_context(gpu_in_use(gpu=gpu, on_wait=channel.waiting))
        sandbox = prepared.take_sandbox()
        from gpulab.judge import loader

        sandbox.preload(
            request.function,
            [r for r in loader.records(request.exercise, request.content_root) if r != TRACE],
            source=data,
            problem=unreadable,
        )
        from gpulab.explain.judge.plugin import attach, start
        from gpulab.judge.harness import grade_request

        early = start(
            request, device, prepared.fresh
        )  # beside the check; None unless CPU --explain
        from gpulab.judge.replay import Replayer, gpu_replay

        if device == "cpu" or gpu_replay():
            replayer = Replayer(prepared.take_replay, request.file, data, device)
        result = grade_request(
            request,
            device,
            channel,
            sandbox=sandbox,
            replayer=replayer,
            secret_seed=secret_seed,
            outbox=str(prepared.outbox),
        )
        result = with_keys(result, verdict="judge")
        from gpulab.judge.print_note import note as print_note

        if said := print_note(data):  # print() in a kernel: the interpreter and a GPU differ
            result = replace(result, notes=[*(result.notes or []), said])
        if replayer is None and device == "cuda" and request.timing:
            from gpulab.judge.replay import REPLAY_OFF_NOTE

            result = replace(result, notes=[*(result.notes or []), REPLAY_OFF_NOTE])
        graded(channel, result)
        # Advice only, after the verdict (issue 21): never changes it. The
        # diagnosis reads the result's JSON and adds its own two keys to it.
        view = result.to_json()
        attach(request, view, device, sandbox, fresh=prepared.fresh, early=early)
        result = with_keys(result, **{k: view[k] for k in ("explain", "diagnosis") if k in view})
    except (SandboxDied, protocol.ProtocolError) as exc:
        code = None
        if sandbox is not None and isinstance(exc, protocol.ProtocolError):
            sandbox.killed_by_judge = (
                "your code wrote to the sandbox's private channel to the grader (stopped by gpulab)"
            )
        elif sandbox is not None:
            try:
                code = sandbox.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                sandbox.killed_by_judge = "your code stopped answering (stopped by gpulab)"
        summary, hint = crashes.crash_summary(
            code,
            sandbox.killed_by_judge if sandbox else "",
            policy,
            sandbox.output.text() if sandbox else "",
        )
        result = CheckResult(
            Status.CRASHED if code is not None else Status.FAILED,
            summary,
            message=hint or str(exc),
            order=JUDGE_ORDER,
        )
    finally:
        if early is not None:  # the check crashed before attach could close it
            early.close()
        if sandbox is not None:
            sandbox.close()
        if replayer is not None:
            replayer.close()
        held.close()
        prepared.close()
    if sandbox is not None:
        result = replace(result, output=sandbox.output.text())
        result = with_keys(result, isolation=sandbox.isolation)
    if prepared.notes:  # what the trims of this file's compiler cache found
        result = replace(result, notes=[*(result.notes or []), *prepared.notes])
    return result


def prepare_ahead(line: str) -> Prepared | None:
    """A spare's preparation for the request on `line`; None where it fails
    (the check then starts afresh, and says why if it cannot)."""
    try:
        return Prepared(CheckRequest.from_json(json.loads(line)), ahead=True)
    except Exception:  # noqa: BLE001 - reported by the check's own start
        return None


def main() -> int:
    from gpulab.judge.remote import harden_judge, kill_descendants

    spare = "--spare" in sys.argv[1:]
    channel = Channel(int(os.environ.pop("GPULAB_EVENTS_FD")))
    harden_judge()
    from gpulab.judge import stuck

    stuck.install(channel.write)  # where the code was, when the lab's time runs out

    def stop(signum: int, frame: Any) -> None:
        # Once: a second SIGTERM inside this handler ended it half-way
        # through removing its folders (they were left in the temp folder).
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        kill_descendants()
        for cache in _CACHES:  # a check stopped at its timeout closes nothing
            trim_cache(cache)
        remove_folders()
        os._exit(1)

    signal.signal(signal.SIGTERM, stop)
    prepared = None
    if spare:
        # A spare (gpulab.lab.runner.Spares): the request it expects, one line;
        # then `go` when it may start CUDA (no check of the lab's is running),
        # then the check's own request, or the end of stdin when no check
        # needs it. A request before `go` starts CUDA first.
        prepared = prepare_ahead(sys.stdin.readline())
        raw = sys.stdin.readline()
        if raw.strip() == SPARE_GO:
            if prepared is not None:
                prepared.finish_ahead()
            raw = sys.stdin.readline()
        if not raw.strip():
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # ending anyway: clean up whole
            if prepared is not None:
                prepared.close()
            kill_descendants()
            remove_folders()
            os._exit(0)
        channel.marks = [(StageKind.START, time.monotonic())]  # the check starts now
        channel.texts = ["start"]
    else:
        raw = sys.stdin.read()
    try:
        result = judge(CheckRequest.from_json(json.loads(raw)), channel, prepared)
    except Exception as exc:  # a gpulab bug or an environment problem
        result = CheckResult(
            Status.ERROR,
            f"gpulab could not run this check: {type(exc).__name__}: {exc}",
            message=traceback.format_exc(),
            order=JUDGE_ORDER,
        )
    result = replace(result, stages=channel.stages())
    result = with_keys(result, slowest=channel.slowest())
    try:
        channel.finish(result)
    finally:
        # The lab stops a judge that has sent its result and not ended yet;
        # its SIGTERM, arriving here, ended the clean-up half-way (folders
        # left in the temp folder on a loaded machine).
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        kill_descendants()
        remove_folders()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
