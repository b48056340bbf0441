"""Run a check and collect its result (the lab's side).

The learner's code never runs in the lab's own process, nor in the process
that grades it. A check is a fresh judge (`python -m gpulab.judge.main`, in its
own session) which starts a confined sandbox for the learner's code; see
gpulab.judge.main and docs/grading.md. The judge's frames come back over a
private pipe that only the judge holds; the learner's printed output comes
back inside the result, as text.

Every string the judge sends can carry the learner's text (its output, an
exception, a case's name), so each frame is made visible (gpulab.textsafe)
as it is read here, before it is typed: the result and events that leave
this module are safe to show, and nothing after sanitises them again.

A crash, hang, CUDA fault or out-of-memory becomes a failed check with a
clear message; the caller (CLI or TUI) carries on. Each check gets a fresh
judge and sandbox, so a dead CUDA context never leaks into the next run.

This module imports neither torch nor triton.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpulab.course.content import Lesson
from gpulab.lab import child
from gpulab.textsafe import visible, visible_tree
from gpulab.wire import crashes
from gpulab.wire.check_request import CheckRequest
from gpulab.wire.codec import check_version
from gpulab.wire.events import Event, Finished, Stage, Stuck
from gpulab.wire.events import parse as parse_event
from gpulab.wire.protocol import (
    SPARE_GO,
    ExplainOptions,
    JsonObject,
    ProtocolError,
    stage_seconds,
)
from gpulab.wire.result import CheckResult
from gpulab.wire.status import StageKind, Status

DEFAULT_TIMEOUT = 300.0
OUTPUT_LIMIT = 4000

__all__ = ["run_check"]

EventCallback = Callable[[Event], object]  # what it returns is ignored


def _tail(path: Path, limit: int = OUTPUT_LIMIT) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    text = data[-limit:].decode("utf-8", "replace")
    return ("…\n" if len(data) > limit else "") + visible(text)


# Every judge this process started and has not seen end: what stop_all stops.
_LIVE: weakref.WeakSet[_Judge] = weakref.WeakSet()


def stop_all() -> None:
    """Stop every judge this process started, with all under them: the lab's
    last act when its terminal goes away (gpulab.tui.hangup), so no check or
    spare outlives it. Safe to call from a signal handler: it only signals
    and waits."""
    judges = [j for j in list(_LIVE) if j.proc.poll() is None]
    for judge in judges:
        with contextlib.suppress(OSError):
            judge.proc.terminate()  # all at once: each then stops its sandboxes
    for judge in list(_LIVE):
        # Its folder first (the lab's, which the judge does not remove): a
        # lab killed while it waited below left gpulab-judge-* behind.
        with contextlib.suppress(Exception):
            judge.tmp.cleanup()
    for judge in judges:
        with contextlib.suppress(Exception):
            _stop(judge.proc)


def _stop(proc: subprocess.Popen[Any]) -> None:
    """Ask the judge to stop (it kills the sandbox and everything under it),
    then make sure."""
    child.kill_tree(proc, term_s=3)


def check_request(
    lesson: Lesson,
    file: Path,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    timing: bool = True,
    device: str = "auto",
    workspace: str | None = None,
    explain: ExplainOptions | None = None,
    paths_off: Sequence[str] = (),
    timeout_cap: float | None = None,
) -> CheckRequest:
    """The request a check of `file` for `lesson` sends the judge: built here
    only, so a spare judge made for it (Spare) fits the check exactly."""
    return CheckRequest(
        exercise=lesson.exercise,
        function=lesson.function,
        file=str(Path(file).resolve()),
        timing=timing,
        device=device,
        flops=lesson.flops,
        bytes=lesson.bytes,
        kind=lesson.kind,
        content_root=str(lesson.root),
        workspace=workspace,
        timeout=timeout,
        timeout_cap=timeout_cap if timeout_cap and timeout_cap > timeout else None,
        explain=explain is not None,
        explain_gpu=explain.gpu if explain else None,
        gpu_setting=explain.gpu_setting if explain else None,
        explain_budget_s=explain.budget_s if explain else None,
        explain_nsight_without_gpu=bool(explain and explain.nsight_without_gpu),
        paths_off=list(paths_off),
    )


def run_check(
    lesson: Lesson,
    file: Path,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    timing: bool = True,
    device: str = "auto",
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
    workspace: str | None = None,
    explain: ExplainOptions | None = None,
    spares: Spares | None = None,
    paths_off: Sequence[str] = (),
    timeout_cap: float | None = None,
) -> CheckResult:
    """Grade `file` for `lesson` and return its result.

    `device` is "auto" (CUDA when available, else the Triton interpreter on the
    CPU), "cpu" or "cuda". `timing=False` checks correctness only. `on_event`
    receives the judge's progress (gpulab.wire.events: Stage, CaseDone, Correct,
    Graded) from the reader loop. Setting `cancel` stops the check (its
    processes are killed). `spares`: the lab's spare judges; the check takes
    the one started for this very request if there is one, and a spare for
    the next check of the same file starts as this one ends. `paths_off`:
    names of gpulab.wire.protocol.KERNEL_PATHS the reference kernels run without.
    `timeout_cap`: how long in all the judge may let the check run, giving
    each case its own time past `timeout` (gpulab.judge.allowance; the CPU's
    default limit, gpulab.lab.plan); None: `timeout` is the limit.
    """
    started = time.monotonic()
    file = Path(file).resolve()
    # What the lab knows of every check; the rest comes from how it ended.
    where = CheckResult(
        Status.ERROR, exercise=lesson.exercise, lesson=lesson.id, file=visible(file)
    )
    request = check_request(
        lesson,
        file,
        timeout=timeout,
        timing=timing,
        device=device,
        workspace=workspace,
        explain=explain,
        paths_off=paths_off,
        timeout_cap=timeout_cap,
    )
    judge = spares.take(request) if spares is not None else None
    warm = judge is not None
    if spares is not None and spares.early:
        spares.prepare(request, hold=True)  # the next check's, its imports beside this one
    # The stages as they arrived, for a check that ends without the judge's
    # own (a timeout, a crash): it still says where its time went.
    marks: list[tuple[StageKind, float]] = [(StageKind.JUDGE_START, started)]
    last: list[Stage] = []  # the last stage the judge began (a timeout names it)

    def seen(event: Event) -> None:
        if isinstance(event, Stage):
            marks.append((event.kind, time.monotonic()))
            last[:] = [event]
        if on_event is not None:
            on_event(event)

    try:
        if judge is None:
            judge = _Judge.start(None)
        cap = started + request.timeout_cap if request.timeout_cap else None
        run = judge.run(request, started + timeout, seen, cancel, cap)
    except _NotStarted as failed:
        exc = visible(failed.__cause__)
        return replace(
            where,
            status=Status.ERROR,
            summary=f"could not start the check: {exc}",
            message=exc,
            duration_s=0.0,
        )
    finally:
        if judge is not None:
            judge.close()
        if spares is not None and not (cancel is not None and cancel.is_set()):
            spares.prepare(request)  # the next check's judge, warming while this one reports
    duration = round(time.monotonic() - started, 2)
    stages = stage_seconds(marks, time.monotonic())
    if run.stopped == Status.TIMEOUT:
        at = f"When the time ran out, your code was at {run.where}. " if run.where else ""
        return replace(
            where,
            status=Status.TIMEOUT,
            summary=f"timed out after {_after(timeout, duration, request, last)} s"
            f"{_stopped_in(marks, stages, last)} "
            "(an infinite loop in Python or in a kernel?)",
            message=f"{at}The check was stopped and its processes were killed. "
            "Look for a loop whose bound never changes, or a kernel grid that "
            "never finishes. Raise the limit with --timeout if it is just slow."
            + _allowed(last, timeout),
            duration_s=duration,
            stages=stages,
        )
    if run.stopped == Status.CANCELLED:
        return replace(
            where,
            status=Status.CANCELLED,
            summary=str(Status.CANCELLED),
            message="",
            duration_s=duration,
            stages=stages,
        )
    if run.result is None:
        killed = crashes.killed_words("gpulab's grader (the judge process)", run.returncode)
        summary, advice = killed or (
            f"the grader stopped without a result (exit {run.returncode})",
            "",
        )
        return replace(
            where,
            status=Status.ERROR,
            summary=summary,
            message="\n".join(p for p in (advice, run.log) if p),
            duration_s=duration,
            stages=stages,
        )
    judged = run.result.stages  # the judge's own, from its clock
    if judged is not None:
        # Before the judge's first stage: its process starting and importing.
        rest = round(max(0.0, duration - sum(judged.values())), 3)
        stages = {StageKind.JUDGE_START.value: rest, **judged}
    return replace(
        run.result,
        exercise=where.exercise,
        lesson=where.lesson,
        file=where.file,
        duration_s=duration,
        warm=warm,
        stages=stages,
    )


# A stage's kind as the words of a timeout's summary.
_DOING = {
    StageKind.JUDGE_START: "starting the grader",
    StageKind.START: "starting",
    StageKind.IMPORT: "importing your file",
    StageKind.CORRECTNESS: "running the cases",
    StageKind.TIMING: "timing your kernel",
    StageKind.COMPILE: "compiling",
    StageKind.WAITING: "waiting for the GPU",
    StageKind.REPLAY: "re-running your kernels",
    StageKind.RUNNING: "running your code",
    StageKind.TRACING: "tracing your step",
    StageKind.EXPORTING: "exporting your steps",
    StageKind.PROFILING: "profiling your code",
}


def _stopped_in(
    marks: list[tuple[StageKind, float]], stages: dict[str, float], last: list[Stage] | None = None
) -> str:
    """' in case 7 of 14 (4×1000 fp16)', or ', 6.1 s of it importing your
    file': where a stopped check was. A correctness stage with its progress
    is the case the judge had sent the sandbox, named after its words'
    colon ("case 7 of 14: 4×1000 fp16")."""
    kind = marks[-1][0]
    stage = last[0] if last else None
    if kind == StageKind.CORRECTNESS and stage and stage.done is not None and stage.total:
        name = stage.text.partition(": ")[2]
        return f" in case {stage.done + 1} of {stage.total}" + (f" ({name})" if name else "")
    doing = _DOING.get(kind)
    return f", {stages.get(kind, 0.0):.1f} s of it {doing}" if doing else ""


def _after(timeout: float, duration: float, request: CheckRequest, last: list[Stage] | None) -> str:
    """The limit a stopped check ran to: `timeout`, or where the judge moved
    it (a CPU check's case, its stage given `allow_s`), the seconds it ran.
    A file stuck before any case (its import) ran to the first limit."""
    moved = request.timeout_cap and last and last[0].allow_s is not None
    return f"{duration:.0f}" if moved else f"{timeout:g}"


def _allowed(last: list[Stage], timeout: float) -> str:
    """What the stage running was given, where the judge gave it more time
    than the first limit (a CPU check's case: gpulab.judge.allowance)."""
    if not last or last[0].allow_s is None:
        return ""
    return (
        f" On the CPU each case may take longer than the first {timeout:g} s, in "
        "proportion to its size and to how long your earlier cases took; this one "
        f"was given {last[0].allow_s:g} s."
    )


EARLY_CPUS = 8  # Spares.early by default from this many CPUs


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Spares:
    """The lab's spare judge: one judge process started ahead of the check
    it expects, which starts its sandboxes and does their imports (torch,
    Triton, CUDA) before the learner presses check. It has run no learner
    code, and it grades one check only; the file is read when the check
    begins, so an edit made after it started is what gets graded. A check
    that asks for anything else (another file, device, timeout, --explain)
    gets a fresh judge, and the spare is stopped.

    Thread-safe: the TUI prepares from its UI thread and takes from the
    check's worker."""

    MAX_AGE_S = 1800.0  # an older spare is replaced (its workspace may have moved on)

    def __init__(self, early: bool | None = None) -> None:
        self._lock = threading.Lock()
        self._spare: _Judge | None = None
        self.closed = False
        # Start the next check's spare as a check begins, not as it ends: its
        # imports (12-16 s on the H200 machine, with CUDA's start and the
        # audit's) then run beside the check, and only its CUDA start after.
        # Not on a small machine, where they would slow the check itself.
        self.early = early if early is not None else _cpus() >= EARLY_CPUS

    def prepare(self, request: CheckRequest, hold: bool = False) -> None:
        """Have a spare for `request` (started now unless one is already
        there for it); any other spare is stopped. `hold`: it starts CUDA
        only when `prepare` is called again without `hold`, or when its check
        comes: a spare started while a check runs does no GPU work beside it."""
        with self._lock:
            if self.closed:
                return
            old = self._spare
            if old is not None and old.fits(request, self.MAX_AGE_S):
                if not hold:
                    old.release()
                return
            self._spare = None
        if old is not None:
            old.close()
        try:
            judge = _Judge.start(request, hold=hold)
        except _NotStarted:
            return  # the check itself will start a judge and say why it cannot
        with self._lock:
            if self.closed:  # closed while it started
                stale = judge
            else:
                stale, self._spare = self._spare, judge
        if stale is not None:
            stale.close()

    def take(self, request: CheckRequest) -> _Judge | None:
        """The spare, if it was started for exactly `request`; else None
        (and the spare is stopped)."""
        with self._lock:
            judge, self._spare = self._spare, None
        if judge is None:
            return None
        if judge.fits(request, self.MAX_AGE_S):
            return judge
        judge.close()
        return None

    def close(self) -> None:
        """Stop the spare, without waiting for it to end; no more are started."""
        with self._lock:
            self.closed = True
            judge, self._spare = self._spare, None
        if judge is not None:
            judge.close(wait=False)


class _NotStarted(Exception):
    """The judge could not be started (its OSError is the cause)."""


@dataclass
class _JudgeRun:
    result: CheckResult | None  # the judge's result frame, None without one
    stopped: Status | None  # TIMEOUT or CANCELLED when the lab stopped it
    returncode: int | None
    log: str  # the tail of the judge's own stdout and stderr
    where: str = ""  # at a timeout: the line the learner's code was on (gpulab.judge.stuck)


class _Judge:
    """One judge process (`python -m gpulab.judge.main`), its log in a folder
    of its own, with the private pipe its frames come back on. Started for a check at
    once, or (`prospect`) as a spare that prepares for that request and
    waits for it."""

    def __init__(self, proc: subprocess.Popen[Any], read_fd: int, tmp: Any, prospect: Any) -> None:
        self.proc, self.read_fd, self.tmp, self.prospect = proc, read_fd, tmp, prospect
        self.born = time.monotonic()
        self.closed = False
        self.held = False
        _LIVE.add(self)

    @staticmethod
    def start(prospect: CheckRequest | None, hold: bool = False) -> _Judge:
        """Raises _NotStarted if the judge cannot start. A spare (`prospect`)
        that is `hold`-ing does its imports but starts CUDA only once
        `release`d (or when its check comes)."""
        tmp = tempfile.TemporaryDirectory(prefix="gpulab-judge-")
        read_fd, write_fd = os.pipe()
        try:
            with open(Path(tmp.name) / "judge.log", "wb") as log:
                proc = child.spawn(
                    child.python_module("gpulab.judge.main", *(["--spare"] if prospect else [])),
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(write_fd,),
                    # Not its own folder, which the lab removes at once when it
                    # closes a spare: a judge then half-way through importing
                    # torch lost its working folder, and oneMKL ended it (exit
                    # 2) before it removed its sandboxes' folders. `/` is never
                    # removed, and only root writes there; PYTHONSAFEPATH
                    # (3.11+) keeps it off the judge's import path as well.
                    cwd="/",
                    env=child.env(
                        PYTHONUNBUFFERED="1", PYTHONSAFEPATH="1", GPULAB_EVENTS_FD=str(write_fd)
                    ),
                )
        except OSError as exc:
            os.close(read_fd)
            os.close(write_fd)
            tmp.cleanup()
            raise _NotStarted from exc
        os.close(write_fd)
        judge = _Judge(proc, read_fd, tmp, prospect)
        if prospect is not None:
            judge._write(json.dumps(prospect.to_json()) + "\n", close=False)
            judge.held = True
            if not hold:
                judge.release()
        return judge

    def release(self) -> None:
        """Let a held spare start CUDA: no check of this lab is running."""
        if self.held and not self.closed:
            self.held = False
            self._write(SPARE_GO + "\n", close=False)

    def fits(self, request: CheckRequest, max_age_s: float) -> bool:
        return (
            not self.closed
            and self.prospect == request
            and self.proc.poll() is None
            and time.monotonic() - self.born < max_age_s
        )

    def _write(self, text: str, close: bool) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(text.encode())
            self.proc.stdin.flush()
            if close:
                self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    def run(
        self,
        request: CheckRequest,
        deadline: float,
        on_event: EventCallback | None,
        cancel: threading.Event | None,
        cap: float | None = None,
    ) -> _JudgeRun:
        """Hand the judge `request`, relay its events until a result, its
        end, the deadline or `cancel`. With `cap` (a monotonic time), a
        stage's `allow_s` moves the deadline later, never past `cap`."""
        result: CheckResult | None = None
        where = ""
        events = child.Events(child.frame_reader(self.read_fd), deadline=deadline, cancel=cancel)
        try:
            self._write(json.dumps(request.to_json()) + "\n", close=True)
            try:
                result = _relay(events, on_event, cap)
            except _OtherVersion as refused:
                _stop(self.proc)  # nothing more it says can be read
                result = refused.result
            if events.stopped == Status.TIMEOUT:
                where = _ask_where(self.proc, self.read_fd)
            if events.stopped:
                _stop(self.proc)
        except BaseException:
            _stop(self.proc)  # Ctrl-C or any error here: no orphan processes
            raise
        finally:
            if self.proc.poll() is None:
                try:
                    self.proc.wait(timeout=5 if result is not None else 0.1)
                except subprocess.TimeoutExpired:
                    _stop(self.proc)
        log = _tail(Path(self.tmp.name) / "judge.log")
        return _JudgeRun(result, events.stopped, self.proc.returncode, log, where)

    def close(self, wait: bool = True) -> None:
        """Stop the judge if it still runs (a spare no check took: closing
        its stdin is its signal to stop) and remove its folder. `wait`
        False: signal it and return, a thread making sure it ends (the lab
        quitting: `gpulab serve` gives a tab's lab 3 s, and a spare still
        importing took longer to stop, after which the lab was killed and
        its folder left behind)."""
        if self.closed:
            return
        self.closed = True
        if self.proc.poll() is None:
            # SIGTERM at once (it may be importing, not reading its stdin):
            # the judge kills its sandboxes and removes its folders.
            if wait:
                _stop(self.proc)
            else:
                # One SIGTERM (a second one, arriving inside the judge's
                # handler, ended it half-way through removing its folders),
                # then a thread waits for it as long as its clean-up may take
                # on a loaded machine, and makes sure.
                with contextlib.suppress(OSError):
                    self.proc.terminate()
                threading.Thread(
                    target=child.kill_tree, args=(self.proc,), kwargs={"exit_s": 10}, daemon=True
                ).start()
        with contextlib.suppress(OSError):
            os.close(self.read_fd)
        self.tmp.cleanup()


WHERE_WAIT_S = 3.0  # for the judge's answer to "where is it?" at a timeout


def _ask_where(proc: subprocess.Popen[Any], read_fd: int) -> str:
    """At the deadline, before the judge is stopped: SIGUSR1 asks it where
    the learner's code is (gpulab.judge.stuck), and its `stuck` frame says,
    within WHERE_WAIT_S; "" when it does not (a judge that cannot tell)."""
    try:
        os.kill(proc.pid, signal.SIGUSR1)
    except OSError:
        return ""
    read = child.frame_reader(read_fd)
    end = time.monotonic() + WHERE_WAIT_S
    while (left := end - time.monotonic()) > 0:
        try:
            frame = read(left)
        except child.End:
            return ""
        if frame is None or frame.get("type") != "stuck":
            continue
        try:
            event = parse_event(visible_tree(frame))
        except ProtocolError:
            return ""
        return event.text if isinstance(event, Stuck) else ""
    return ""


class _OtherVersion(Exception):
    """The judge's first frame says another version of the check protocol
    (or none): its frames are not read, and `result` says why."""

    def __init__(self, result: CheckResult) -> None:
        super().__init__(result.summary)
        self.result = result


def _same_version(frame: JsonObject) -> None:
    """Raise _OtherVersion unless the judge's first frame says this gpulab's
    protocol version (gpulab.wire.codec.PROTOCOL): a judge of another
    install would send frames whose fields mean something else."""
    try:
        check_version(frame.get("protocol"), "gpulab's grader (the judge process)")
    except ProtocolError as exc:
        raise _OtherVersion(
            CheckResult(
                Status.ERROR,
                summary=f"could not run the check: {exc}",
                message="The lab starts the grader with the gpulab found first on Python's "
                f"import path, led by this one's folder ({visible(child.PACKAGE_PARENT)}); "
                "the grader that started came from another install. Reinstall gpulab so "
                "that only one is found, then check again.",
            )
        ) from None


def _relay(
    events: child.Events, on_event: EventCallback | None, cap: float | None = None
) -> CheckResult | None:
    """The judge's result; every other frame goes to `on_event`, parsed.
    A first frame of another protocol version raises _OtherVersion. A frame
    the lab cannot use (gpulab.wire.events says why) or does not know is
    left out: the check goes on, and ends with the judge's result or without.
    A stage's `allow_s` moves the deadline to its end where that is later,
    never past `cap` (no cap: never)."""
    first = True
    for frame in events:
        if first:
            first = False
            _same_version(frame)
        try:
            event = parse_event(visible_tree(frame))  # learner text made visible, once
        except ProtocolError:
            continue
        if isinstance(event, Finished):
            return event.result
        if isinstance(event, Stuck):
            continue  # only asked for at a timeout (_ask_where)
        if cap is not None and isinstance(event, Stage) and event.allow_s is not None:
            events.deadline = max(events.deadline, min(cap, time.monotonic() + event.allow_s))
        if event is not None and on_event is not None:
            on_event(event)
    return None
