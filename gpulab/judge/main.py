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

This module is the process: it reads the request, sets the check up
(gpulab.judge.prepared), runs the grader (gpulab.judge.harness) and writes
the result (gpulab.judge.channel).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import sys
import time
import traceback
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from gpulab.judge.channel import Channel, graded
from gpulab.judge.crash import crash_result
from gpulab.judge.policy import TRACE, trim_cache
from gpulab.judge.prepared import CACHES, Prepared, prepare_ahead, remove_folders
from gpulab.judge.submission import read_submission
from gpulab.wire import protocol
from gpulab.wire.check_request import CheckRequest
from gpulab.wire.protocol import SPARE_GO, JsonObject
from gpulab.wire.result import JUDGE_ORDER, CheckResult
from gpulab.wire.status import StageKind, Status

if TYPE_CHECKING:
    from gpulab.explain.judge.plugin import ResultView

# What the sandbox records around an exercise's file is the manifest's
# (`records`): a profiler's trace it writes back (gpulab.judge.policy), and
# what it sets up before the file loads (Dynamo's reports, JAX's exports).


def with_keys(result: CheckResult, **keys: Any) -> CheckResult:
    """`result` with more of the judge's own keys (gpulab.wire.result keeps
    them as they are: `verdict`, `isolation`, the diagnosis's, ...)."""
    return replace(result, rest={**result.rest, **keys})


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
        from gpulab.judge import plugin_host
        from gpulab.judge.harness import grade_request

        # Beside the check; None unless CPU --explain. The plug-in gets what
        # it needs of the graders from plugin_host, and imports no judge.
        early = start(request, device, prepared.fresh_apart, graders=plugin_host)
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
        attach(
            request,
            cast("ResultView", view),  # the keys --explain reads and adds
            device,
            sandbox,
            fresh=prepared.fresh_apart,
            early=early,
            graders=plugin_host,
        )
        result = with_keys(result, **{k: view[k] for k in ("explain", "diagnosis") if k in view})
    except (SandboxDied, protocol.ProtocolError) as exc:
        result = crash_result(exc, sandbox, policy)
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


def answer(raw: str, channel: Channel, prepared: Prepared | None = None) -> None:
    """Grade the request on `raw` (its JSON) and send the result on
    `channel`, with the time each kind of stage took and the slowest steps.
    A judge's whole check, but for its clean-up (main's, at its exit)."""
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
    channel.finish(result)


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
        for cache in CACHES:  # a check stopped at its timeout closes nothing
            trim_cache(cache)
        remove_folders()
        os._exit(1)

    # Imported now: the handler's clean-up imports nothing while the judge may
    # be half-way through an import of its own.
    import gpulab.safetree  # noqa: F401

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
        answer(raw, channel, prepared)
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
