"""The judge's half of the replay (gpulab.sandbox.replay says what it is).

On the CPU the op guards and the profiler's audit run in the learner's
process, so their "your Triton kernel did the work" is a claim. Here the
judge checks it: after a case passes, the launches the sandbox recorded
run again in a second sandbox that never imports the learner's file, from
the kernels gpulab.sandbox.replay_source keeps, on the judge's own copy of
the inputs. Their result must match the reference as well.

What the replay may start from is decided by the judge, not in the
record (gpulab.judge.replay_plan): a buffer the judge handed over is the
judge's own copy; a constant fill is kept (zeros, -inf); recorded bytes are
kept only when every value in them is a value of an input (a copy, a cast,
a transpose or padding of an input) or the buffer holds integers that count
up evenly (an arange: gpulab.judge.replay_bytes). Anything else starts as
NaN, so an answer computed by the wrapper and handed to a kernel to copy
out is an answer the replay does not have. This module runs the plan
(Replayer) and compares what comes back.
"""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

import torch

from gpulab.judge.replay_again import AGAIN_MISMATCH, scale_data, scale_tensor
from gpulab.judge.replay_plan import Plan, Refs, plan_replay
from gpulab.sandbox.replay_source import NotReplayable, ReplaySource, extract
from gpulab.wire.kernel_binary import KernelBinary
from gpulab.wire.launch_record import LaunchRecord
from gpulab.wire.replay import (
    ReplayBuffer,
    Replayed,
    ReplayLaunch,
    ReplayRep,
    ReplayRequest,
    ReplayTimed,
    ReplayTimeRequest,
)
from gpulab.wire.sandbox_start import Prepare

if TYPE_CHECKING:
    from gpulab.wire.protocol import JsonObject, TensorRef


MISMATCH = "your Triton kernels, run again alone, gave another result"

WHY = (
    "gpulab runs the Triton kernels your function launched a second time, on its own "
    "copy of the inputs, in a process where nothing else of your file runs. "
)


# The start of a replay's verdict when its process was killed by a signal
# (gpulab.judge.kernel.replay_verdict: an error of the check's, not a case).
REPLAY_KILLED = "killed: "


def gpu_replay() -> bool:
    """Whether a check on a GPU replays its cases too, and takes its times
    from the replay: on unless GPULAB_GPU_REPLAY=0 (to compare; a result
    graded without it says so in its notes)."""
    import os

    return os.environ.get("GPULAB_GPU_REPLAY", "1") != "0"


REPLAY_OFF_NOTE = (
    "Graded without the replay (GPULAB_GPU_REPLAY=0): the times are the sandbox's own, "
    "checked against the judge's clocks but not measured again apart from your code."
)


class KeptText(TypedDict):
    """A replay request's kept text: the kernels' source, the modules it
    imports, and the kernels' names."""

    source: str
    modules: dict[str, str]
    kernels: tuple[str, ...]


class Replayer:
    """The replay's sandbox, started beside the check's and used once a case.

    On the CPU it runs the kernels gpulab.sandbox.replay_source keeps of the
    file in Triton's interpreter. On a GPU it runs no Python of the file at
    all: it launches the compiled kernels the record sent
    (gpulab.wire.kernel_binary), so no rule over the file's text stands
    between an honest kernel and its grade there."""

    def __init__(
        self,
        start: Callable[[], Any],
        file: str,
        data: bytes | None = None,
        device: str = "cpu",
    ) -> None:
        """`data`: the file's bytes as the judge read them for the check's
        sandbox (read from `file` where not given). `device`: "cuda" replays
        compiled kernels, anything else the kept text."""
        self.compiled = device == "cuda"
        self.source: ReplaySource | None = None
        self.error = ""
        if not self.compiled:
            try:
                from importlib.util import decode_source

                if data is None:
                    with open(file, "rb") as f:
                        data = f.read()
                # As Python reads it: a BOM, a coding line (latin-1), any suffix.
                self.source = extract(decode_source(data))
            except (OSError, UnicodeDecodeError, SyntaxError, NotReplayable) as exc:
                self.source, self.error = None, str(exc)
        self.file = file
        # A GPU's compiled kernels as the sandbox first sent each (by its
        # ident), and those the replay's sandbox has been sent.
        self.binaries: dict[int, KernelBinary] = {}
        self.sent: set[int] = set()
        self.sandbox: Any = None
        self.failed = ""
        self._arena: Any = None
        self._start = start
        # The case whose replay is in flight: its name, and its runs' result
        # slots with their references (x's, then g(x)'s).
        self.pending: tuple[str, list[Run]] | None = None
        # Advice (gpulab.judge.cost): on the CPU each passing case's replay
        # also counts what its kernels moved and computed; (case, counts).
        # GPULAB_COST_MODEL=0 turns the counting off (to measure what it costs).
        self.count = "" if os.environ.get("GPULAB_COST_MODEL") == "0" else "count"
        # Each passing case and its counts, plain JSON as the replay's sandbox
        # sent them (gpulab.judge.cost reads them field by field).
        self.counted: list[tuple[Any, JsonObject]] = []
        self._pending_case: Any = None

    def plan(
        self,
        record: LaunchRecord | None,
        refs: Refs,
        expects: Sequence[Any],
        sum_size: int | None = None,
    ) -> tuple[Plan | None, str]:
        """plan_replay for this check's kernels: the kept text's, or the
        compiled kernels the records sent (each ident's first binary: a
        record that sends another under the same ident is refused)."""
        if self.compiled:
            problem = self._learn(record)
            if problem:
                return None, problem
            return plan_replay(self.binaries, record, refs, expects, self.file, sum_size)
        if self.source is None:
            return None, f"It could not read your kernels: {self.error}"
        return plan_replay(self.source, record, refs, expects, self.file, sum_size)

    def _learn(self, record: LaunchRecord | None) -> str:
        for binary in record.binaries if record is not None else ():
            if binary is None:
                return "A compiled kernel in your launches' record came back malformed."
            known = self.binaries.get(binary.ident)
            if known is None:
                self.binaries[binary.ident] = binary
            elif known != binary:
                return (
                    f"The compiled kernel {binary.ident} ({binary.name}) came back different "
                    "from the first time it was sent."
                )
        return ""

    def new_binaries(self, plan: Plan) -> tuple[KernelBinary, ...]:
        """The plan's compiled kernels the replay's sandbox has not been sent."""
        idents = {
            la.binary
            for la in plan.launches
            if isinstance(la, ReplayLaunch) and la.binary is not None
        }
        return tuple(self.binaries[i] for i in sorted(idents) if i not in self.sent)

    def ensure_started(self) -> None:
        """Start the replay's sandbox (once: with the first passing case's
        replay, so a file that passes none never starts it; a spare judge
        has started it ahead). It confines itself at once and imports torch
        and Triton. Started from the judge's main thread: the keeper's
        PDEATHSIG follows the thread that started it."""
        if self.sandbox is not None or self.failed:
            return
        try:
            self.sandbox = self._start()
            self.sandbox.send(Prepare())
            self.sandbox.pending = True
        except Exception as exc:  # noqa: BLE001 - reported when a case needs it
            self.failed = f"{type(exc).__name__}: {exc}"

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()

    def submit(
        self,
        case: Any,
        record: LaunchRecord | None,
        refs: Refs,
        results: Sequence[Result],
        again: tuple[float, Sequence[Result]] | None = None,
        sum_size: int | None = None,
        count: bool = True,
    ) -> str | None:
        """Send one passing case's launches to the replay and go on: the
        replay runs while the check's sandbox works on the next case, and
        `collect` reads the answer. `results`: what the call returned, then
        (after a backward) each gradient, with its reference and tolerance.
        `again`: c and the same results of g(x) (their references and
        tolerances), for a second run of the launches on inputs only the
        judge has (gpulab.judge.replay_again).
        `sum_size`: the size of a torch sum the exercise allows (lesson 05's
        dweight). `count`: count what the kernels move for the cost model
        (gpulab.judge.cost; a forward's launches, which the lesson's formulas
        are about). Returns at once what makes the record unusable, for the
        learner, or None."""
        expects = [r.expect for r in results]
        plan, problem = self.plan(record, refs, expects, sum_size)
        if plan is None:
            return WHY + problem
        self.ensure_started()
        if self.sandbox is None:
            return f"{WHY}Its sandbox could not start: {self.failed}"
        runs = 1 if again is None else 2
        need = sum(plan.buffers[i].nbytes + 512 for i in plan.inputs)
        need += sum(math.prod(e.shape) * e.like.dtype.itemsize + 512 for e in expects)
        arena = self.arena(need * runs)
        buffers = _placed(arena, plan, list(plan.buffers), 1.0)
        pending = [
            Run(arena.slot(tuple(r.expect.shape), r.expect.like.dtype), r, MISMATCH)
            for r in results
        ]
        again_buffers: list[ReplayBuffer] = []
        again_runs: list[Run] = []
        if again is not None:
            c, others = again
            again_buffers = _placed(arena, plan, _scaled(plan, c), c)
            again_runs = [
                Run(arena.slot(tuple(r.expect.shape), r.expect.like.dtype), r, AGAIN_MISMATCH)
                for r in others
            ]
        from gpulab.judge.remote import SandboxDied

        binaries = self.new_binaries(plan)
        message = ReplayRequest(
            **self._kernels(),
            buffers=tuple(buffers),
            launches=plan.launches,
            outs=plan.outs,
            slots=tuple(run.slot for run in pending),
            again=tuple(again_buffers),
            again_slots=tuple(run.slot for run in again_runs),
            binaries=binaries,
            count="" if self.compiled or not count else self.count,
        )
        try:
            self.sandbox.send(message)
        except SandboxDied as exc:
            return self._died(exc)
        self.sent.update(b.ident for b in binaries)
        self.pending = (case.name, pending + again_runs)
        self._pending_case = case
        return None

    def collect(self) -> tuple[str, str] | None:
        """(case name, what is wrong) for the case in flight, or None when
        there is none or its replay gave the answer."""
        from gpulab.judge.compare import compare, describe_mismatch
        from gpulab.judge.remote import SandboxDied

        if self.pending is None:
            return None
        name, runs = self.pending
        self.pending = None
        try:
            replayed = self.sandbox.reply(Replayed)
        except SandboxDied as exc:
            return name, self._died(exc)
        if not isinstance(replayed, Replayed):
            return name, WHY + f"The replay stopped: {replayed.summary[:400]}"
        if replayed.problem:
            return name, WHY + f"The replay stopped: {replayed.problem}"
        if replayed.counts is not None:
            self.counted.append((self._pending_case, replayed.counts))
        for run in runs:
            atol, rtol = run.result.tolerance
            rep = compare(self._arena.view(run.slot).clone(), run.result.reference, atol, rtol)
            if rep.mismatches:
                what = f"{run.result.label}: " if run.result.label else ""
                return name, f"{run.mismatch} ({what}{describe_mismatch(rep)}). {WHY}{run.why}"
        return None

    def time(
        self,
        plan: Plan,
        scales: Sequence[float],
        expects: Sequence[Any],
        warmup_s: float,
    ) -> tuple[ReplayTimed | None, list[list[torch.Tensor]], str]:
        """Time `plan`'s launches in the replay's sandbox (gpulab.judge
        .replay_timing), a repetition a scale c: its inputs the judge's
        times c, and the recorded bytes kept scaled with them (as the run on
        g(x) starts). Returns the reply, each repetition's results as views
        of the judge's memory, and what stopped it ("" when it ran)."""
        from gpulab.judge.remote import SandboxDied

        self.ensure_started()
        if self.sandbox is None:
            return None, [], f"{WHY}Its sandbox could not start: {self.failed}"
        per_rep = sum(plan.buffers[i].nbytes + 512 for i in plan.inputs)
        per_rep += sum(math.prod(e.shape) * e.like.dtype.itemsize + 512 for e in expects)
        arena = self.arena(per_rep * len(scales))
        timed_reps = []
        slots = []
        for c in scales:
            start = list(plan.buffers) if c == 1.0 else _scaled(plan, c)
            buffers = _placed(arena, plan, start, c)
            row = tuple(arena.slot(tuple(e.shape), e.like.dtype) for e in expects)
            timed_reps.append(ReplayRep(tuple(buffers), row))
            slots.append(row)
        binaries = self.new_binaries(plan)
        message = ReplayTimeRequest(
            **self._kernels(),
            launches=plan.launches,
            outs=plan.outs,
            reps=tuple(timed_reps),
            warmup_s=warmup_s,
            binaries=binaries,
        )
        try:
            self.sent.update(b.ident for b in binaries)
            reply = self.sandbox.ask(message, ReplayTimed)
        except SandboxDied as exc:
            return None, [], self._died(exc)
        if not isinstance(reply, ReplayTimed):
            return None, [], WHY + f"The replay stopped: {reply.summary[:400]}"
        if reply.problem:
            return reply, [], WHY + f"The replay stopped: {reply.problem}"
        return reply, [[self._arena.view(s) for s in row] for row in slots], ""

    def _kernels(self) -> KeptText:
        """A request's kept text (the CPU's; none on a GPU, which launches
        the compiled kernels the request sends)."""
        if self.source is None:
            return {"source": "", "modules": {}, "kernels": ()}
        return {
            "source": self.source.text,
            "modules": self.source.modules,
            "kernels": tuple(self.source.kernels),
        }

    def _died(self, exc: Exception) -> str:
        from gpulab.wire.crashes import killed_words

        try:
            code = self.sandbox.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        killed = killed_words("gpulab's replay process", code)
        if killed is not None:  # a signal from outside: not the kernels' doing
            return REPLAY_KILLED + f"{killed[0]}. {killed[1]}"
        output = self.sandbox.output.text()[-1500:]
        return WHY + f"The replay's process stopped ({exc}).\n{output}".rstrip()

    def arena(self, nbytes: int) -> Any:
        """Shared memory for the next replay (none is in flight by then)."""
        if self._arena is None or self._arena.nbytes < nbytes:
            self._arena = self.sandbox.arena(max(nbytes, 1 << 20))
        self._arena.reset()
        return self._arena


@dataclass(frozen=True, slots=True)
class Result:
    """One thing a replayed call gives back: what it must look like, its
    float64 reference, the tolerance, and its name in a message ("" for the
    returned tensor of a forward-only call)."""

    expect: Any  # gpulab.judge.kernel_spec.Expect
    reference: torch.Tensor
    tolerance: tuple[float, float]
    label: str = ""


@dataclass(frozen=True, slots=True)
class Run:
    """One result of one run of a case's launches in the replay: where it
    goes, what it must be, and what a mismatch says."""

    slot: TensorRef
    result: Result
    mismatch: str = MISMATCH

    @property
    def why(self) -> str:
        if self.mismatch == MISMATCH:
            return (
                "Does a kernel read past the end of a buffer (a missing mask: the memory "
                "next to it differs there), or is part of the answer computed outside a "
                "Triton kernel (torch or numpy in the wrapper, or a buffer filled before "
                "the launch that a kernel only copies)?"
            )
        return (
            "It ran them a second time on inputs of its own, yours times a power of two, "
            "from the same launches (the same numbers, the same zero and -inf fills, the "
            "buffers your code filled from the inputs scaled with them). Are a kernel's "
            "numbers or prepared buffers worked out from the input's values outside a "
            "Triton kernel? They must come from the shapes and settings, or be copies of "
            "the inputs."
        )


def _placed(arena: Any, plan: Plan, buffers: list[ReplayBuffer], c: float) -> list[ReplayBuffer]:
    """The judge's inputs (times c) put into the replay's arena, and their
    places into their buffers."""
    for i, t in plan.inputs.items():
        ref = arena.put(t if c == 1.0 else scale_tensor(t, c))
        buffers[i] = dataclasses.replace(buffers[i], input=(ref.arena, ref.offset, ref.nbytes))
    return buffers


def _scaled(plan: Plan, c: float) -> list[ReplayBuffer]:
    """The plan's buffers for the run on g(x): the recorded bytes kept,
    times c; fills (zeros, -inf, ones) and integers as the wrapper set them."""
    buffers = list(plan.buffers)
    for i, dtype in plan.floats.items():
        data = buffers[i].data
        if data is not None:
            buffers[i] = dataclasses.replace(buffers[i], data=scale_data(data, dtype, c))
    return buffers
