"""The judge's half of the replay (gpulab.sandbox.replay says what it is).

On the CPU the op guards and the profiler's audit run in the learner's
process, so their "your Triton kernel did the work" is a claim. Here the
judge checks it: after a case passes, the launches the sandbox recorded
run again in a second sandbox that never imports the learner's file, from
the kernels gpulab.sandbox.replay_source keeps, on the judge's own copy of
the inputs. Their result must match the reference as well.

What the replay may start from is decided here, not in the record: a
buffer the judge handed over is the judge's own copy; a constant fill is
kept (zeros, -inf); recorded bytes are kept only when every value in them
is a value of an input (a copy, a cast, a transpose or padding of an
input) or the buffer holds integers that count up evenly (an arange).
Anything else starts as NaN, so an answer computed by the wrapper and
handed to a kernel to copy out is an answer the replay does not have.
"""

from __future__ import annotations

import base64
import dataclasses
import math
import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from gpulab.judge.replay_again import AGAIN_MISMATCH, scale_data, scale_tensor
from gpulab.judge.replay_params import params_problem
from gpulab.sandbox.replay import DTYPES, MAX_LAUNCHES
from gpulab.sandbox.replay_source import NotReplayable, ReplaySource, extract
from gpulab.wire.kernel_binary import KernelBinary
from gpulab.wire.launch_record import (
    Arg,
    BufferArg,
    DescArg,
    LaunchRecord,
    Option,
    OtherArg,
    RecordedBuffer,
    RecordedLaunch,
    TorchStep,
    TupleArg,
    View,
    flat_args,
)
from gpulab.wire.protocol import text as _text
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
    from gpulab.wire.protocol import TensorRef

# What gpulab.judge.kernel's encode has put in the arena: id(tensor) and
# ("storage", data_ptr) -> its ref (here, so the replay needs nothing of kernel).
Refs = dict[int | tuple[str, int], Any]
# What a replay's launches run: the kept text's kernels (CPU), or the
# compiled kernels the records sent, by ident (GPU).
Kernels = ReplaySource | dict[int, KernelBinary]

MAX_GRID = 1 << 24
MISMATCH = "your Triton kernels, run again alone, gave another result"
MAX_BUFFER_BYTES = 4 << 30

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
        self.counted: list[tuple[Any, dict[str, Any]]] = []
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

    def _kernels(self) -> dict[str, Any]:
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

    expect: Any  # gpulab.judge.kernel.Expect
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


@dataclass(frozen=True, slots=True)
class Plan:
    """What a replay may start from and run (plan_replay): each buffer's
    start, the judge's own copy of each input buffer (by buffer number: it
    goes into the replay's arena, and its place into the buffer, when the
    request is sent), the launches, and the result as a view. `floats`:
    the recorded buffers kept, by number, with the float dtype the second
    run on g(x) scales their values in (gpulab.judge.replay_again)."""

    buffers: tuple[ReplayBuffer, ...]
    inputs: dict[int, torch.Tensor]
    launches: tuple[ReplayLaunch | TorchStep, ...]
    outs: tuple[View, ...]
    floats: dict[int, torch.dtype] = dataclasses.field(default_factory=dict)


def plan_replay(
    kernels: Kernels,
    record: LaunchRecord | None,
    refs: Refs,
    expects: Sequence[Any],
    file: str,
    sum_size: int | None = None,
) -> tuple[Plan | None, str]:
    """The replay request's buffers, launches and results, from the
    sandbox's record checked field by field; or what makes it unusable.
    `expects`: the returned tensor's, then each gradient's (the record's
    `grads`). `sum_size`: the one size of a torch sum's result the exercise
    allows (None: no sum). `kernels`: the kept text's (each launch must be
    one of its kernels) or the compiled kernels sent (each launch must name
    one, with arguments that fit its parameters)."""
    if record is None:
        return None, "Your function's launches were not recorded."
    if record.overflow is not None:
        return None, f"It could not: {_text(record.overflow, 200)}."
    inputs = [v for k, v in refs.items() if not isinstance(k, tuple)]
    if record.buffers is None or record.launches is None:
        return None, "Your function's launches came back malformed."
    if not any(isinstance(la, RecordedLaunch) for la in record.launches):
        return None, "No Triton kernel launch was recorded."
    if len(record.launches) > MAX_LAUNCHES:
        return None, f"It could not: more than {MAX_LAUNCHES} kernel launches in one call."
    buffers, judge_inputs, floats, problem = _buffers(record.buffers, inputs, _read_as(record))
    if problem:
        return None, problem
    sizes = [b.nbytes for b in buffers]
    checked: list[ReplayLaunch | TorchStep] = []
    for i, launch in enumerate(record.launches):
        if isinstance(launch, TorchStep):
            problem = _step_problem(i, launch, sizes, sum_size)
            if problem:
                return None, problem
            checked.append(launch)
            continue
        one, problem = _launch(i, launch, kernels, sizes, file)
        if one is None:
            return None, problem
        checked.append(one)
    views = [record.out]
    if len(expects) > 1:
        grads = record.grads or ()
        views += [grads[i] if i < len(grads) else None for i in range(len(expects) - 1)]
    outs = []
    for i, (view, expect) in enumerate(zip(views, expects, strict=True)):
        what = (
            "The tensor your function returned"
            if i == 0
            # Two: a function that returns two tensors (lesson 05's backward step).
            else (GRADS[min(i, 2) - 1] if len(expects) > 2 else RETURNED_SECOND)
        )
        if view is None or not _view_ok(view, sizes):
            return None, f"{what} was not handed to any of its kernels."
        if list(view.shape) != list(expect.shape) or DTYPES.get(view.dtype) != expect.like.dtype:
            return None, f"{what} is not the one its kernels wrote."
        outs.append(view)
    return Plan(tuple(buffers), judge_inputs, tuple(checked), tuple(outs), floats), ""


GRADS = ("The gradient your backward returned first (dx)", "A later gradient (dweight)")
RETURNED_SECOND = "The second tensor your function returned"


def _step_problem(i: int, step: TorchStep, sizes: list[int], sum_size: int | None) -> str:
    """What makes a recorded torch step one the replay may not run."""
    where = f"step {i + 1}"
    if step.op is None or step.src is None or step.dst is None:
        return f"{where}, a torch op between your launches, came back malformed."
    if not _view_ok(step.src, sizes) or not _view_ok(step.dst, sizes):
        return f"{where}, a torch op between your launches, came back malformed."
    if step.op == "sum":
        # Only the sum the exercise allows (its guard allows no other): any
        # other would let torch do work the kernels are graded for.
        if sum_size is None or math.prod(step.dst.shape) != sum_size:
            return (
                f"It cannot run {where} again: a torch sum into {list(step.dst.shape)} "
                "elements, which this exercise's kernels must compute themselves."
            )
        rank = len(step.src.shape)
        if step.dims is not None and not all(-rank <= d < rank for d in step.dims):
            return f"{where}, a torch sum, came back malformed."
    return ""


def _launch(
    i: int,
    launch: RecordedLaunch,
    kernels: Kernels,
    sizes: list[int],
    file: str,
) -> tuple[ReplayLaunch | None, str]:
    where = f"launch {i + 1}"
    name = launch.kernel
    if name is None:
        return None, (
            f"It cannot re-run {where}: a {_text(launch.what, 80)} that is not a "
            "@triton.jit function."
        )
    if launch.error is not None:
        return None, f"It could not read {where} of `{name}`: {_text(launch.error, 200)}"
    binary = None
    if isinstance(kernels, dict):
        binary = kernels.get(launch.binary) if launch.binary is not None else None
        if binary is None:
            return None, (
                f"It cannot re-run {where} of `{name}`: "
                + (
                    "it ran no compiled kernel gpulab saw."
                    if launch.binary is None
                    else "its compiled kernel could not be read."
                )
            )
    else:
        here = file.rsplit("/", 1)[-1]
        if name in kernels.problems and launch.file == file:
            return None, f"It cannot run `{name}` apart from your file: {kernels.problems[name]}."
        if (
            name not in kernels.kernels
            or launch.file != file
            or launch.qualname
            not in (
                name,
                None,
            )
        ):
            return None, (
                f"`{name}` ({where}) is not a @triton.jit function defined at the top "
                f"level of {here}: define your kernels there."
            )
    grid = launch.grid
    if (
        not isinstance(grid, tuple)
        or not 1 <= len(grid) <= 3
        or not all(0 <= g <= MAX_GRID for g in grid)
        or math.prod(grid) > MAX_GRID
    ):
        return None, f"{where} of `{name}` has a grid gpulab cannot replay: {_text(grid, 80)}"
    if launch.args is None:
        return None, f"{where} of `{name}` came back malformed."
    for key, v in launch.args.items():
        problem = _arg_problem(v, sizes)
        if problem == "unsupported" and isinstance(v, OtherArg):
            return None, (
                f"`{name}` was passed `{_text(key, 40)}` as a {_text(v.unsupported, 40)}, "
                "which gpulab cannot pass again: pass tensors, numbers, dtypes, tuples "
                "and constexprs."
            )
        if problem == "descriptor":
            return None, (
                f"{where} of `{name}`: the tensor descriptor `{_text(key, 40)}` came back "
                "malformed, or reads outside its tensor."
            )
        if problem:
            return None, f"{where} of `{name}`: argument `{_text(key, 40)}` came back malformed."
    if binary is not None:
        problem = params_problem(binary, launch.args)
        if problem:
            return None, f"{where} of `{name}`: {problem}"
    problem = _options_problem(launch.options)
    if problem:
        return None, f"{where} of `{name}`: {problem}"
    ident = None if binary is None else binary.ident
    return ReplayLaunch(name, grid, launch.args, dict(launch.options or {}), ident), ""


def _arg_problem(v: Arg, sizes: list[int]) -> str:
    """ "" for an argument the replay can pass again, else what is wrong:
    "unsupported" (the recorder could not write it), "descriptor", "malformed"."""
    if isinstance(v, OtherArg):
        return "unsupported" if v.unsupported is not None else "malformed"
    if isinstance(v, BufferArg) and not _view_ok(v.view, sizes):
        return "malformed"
    if isinstance(v, DescArg) and not _desc_ok(v, sizes):
        return "descriptor"
    if isinstance(v, TupleArg):
        for item in v.items:
            problem = _arg_problem(item, sizes)
            if problem:
                return problem
    return ""


# What each launch option may be (Triton's CUDA backend accepts no other
# values): anything else is a forged record, or a launch that did not run.
_POWERS = frozenset({1, 2, 4, 8, 16, 32})
OPTION_OK: dict[str, Callable[[Option], bool]] = {
    "num_warps": lambda v: v in _POWERS and not isinstance(v, bool),
    "num_stages": lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 16,
    "num_ctas": lambda v: v in _POWERS and v <= 16 and not isinstance(v, bool),
    "maxnreg": lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 255,
    "enable_fp_fusion": lambda v: isinstance(v, bool),
    "launch_cooperative_grid": lambda v: isinstance(v, bool),
    "launch_pdl": lambda v: isinstance(v, bool),
}


def _options_problem(options: dict[str, Option] | None) -> str:
    """What makes a launch's options ones the replay cannot pass again."""
    if options is None:
        return "its launch options came back malformed."
    for k, v in options.items():
        check = OPTION_OK.get(k)
        if check is None or not check(v):
            return f"the launch option {_text(k, 40)}={_text(v, 40)} is not one Triton takes."
    return ""


MAX_BLOCK_ELEMENTS = 1 << 20  # a descriptor's block, as the interpreter holds one


def _desc_ok(desc: DescArg, sizes: list[int]) -> bool:
    """A TMA descriptor the replay can build: its tensor a view inside its
    buffer, and every element its shape and strides reach inside it too (a
    descriptor reads by its own shape and strides, not its tensor's)."""
    rank = len(desc.shape)
    if not 1 <= rank <= 5 or len(desc.strides) != rank or len(desc.block_shape) != rank:
        return False
    if not all(0 < b <= MAX_BLOCK_ELEMENTS for b in desc.block_shape):
        return False
    if math.prod(desc.block_shape) > MAX_BLOCK_ELEMENTS or desc.padding not in ("zero", "nan"):
        return False
    view = desc.view
    reach = View(view.buffer, view.offset, desc.shape, desc.strides, view.dtype)
    return _view_ok(view, sizes) and _view_ok(reach, sizes)


def _view_ok(view: View, sizes: list[int]) -> bool:
    """The view inside its buffer."""
    index, offset, shape, stride = view.buffer, view.offset, view.shape, view.stride
    if not 0 <= index < len(sizes) or view.dtype not in DTYPES:
        return False
    if len(shape) != len(stride) or len(shape) > 8 or not all(s >= 0 for s in shape + stride):
        return False
    if offset < 0:
        return False
    itemsize = DTYPES[view.dtype].itemsize
    if sizes[index] % itemsize:
        return False
    if any(s == 0 for s in shape):
        return offset * itemsize <= sizes[index]
    last: int = offset + sum((n - 1) * s for n, s in zip(shape, stride, strict=True))
    return (last + 1) * itemsize <= sizes[index]


def _read_as(record: LaunchRecord) -> dict[int, set[str]]:
    """Buffer number -> the dtypes the launches' views (and the result's)
    read it as. A kernel is handed a view, not the buffer: recorded bytes
    that are input values as the buffer's first tensor's dtype (bool: any
    byte) are other numbers read as another dtype, so they are kept only
    when they are input values in every dtype they are read as."""
    seen: dict[int, set[str]] = {}
    views = [record.out] if record.out is not None else []
    views += [g for g in record.grads or () if g is not None]
    for launch in record.launches or ():
        if isinstance(launch, TorchStep):
            views += [v for v in (launch.src, launch.dst) if v is not None]
            continue
        views += [
            v.view for _, v in flat_args(launch.args or {}) if isinstance(v, (BufferArg, DescArg))
        ]
    for view in views:
        seen.setdefault(view.buffer, set()).add(view.dtype)
    return seen


def _buffers(
    raw: tuple[RecordedBuffer, ...],
    inputs: list[tuple[torch.Tensor, TensorRef]],
    read_as: dict[int, set[str]],
) -> tuple[list[ReplayBuffer], dict[int, torch.Tensor], dict[int, torch.dtype], str]:
    out: list[ReplayBuffer] = []
    judge_inputs: dict[int, torch.Tensor] = {}
    floats: dict[int, torch.dtype] = {}
    total = 0
    for b in raw:
        if b.nbytes is None:
            return [], {}, {}, "A recorded buffer came back malformed."
        nbytes = b.nbytes
        total += nbytes
        if nbytes > MAX_BUFFER_BYTES or total > MAX_BUFFER_BYTES:
            return [], {}, {}, "Its kernels were handed more memory than a replay may use."
        entry = ReplayBuffer(nbytes, poison=True)  # unless kept below
        dtype = DTYPES.get(b.dtype) if b.dtype is not None else None
        if b.arena is not None:
            t = _input_at(b.arena, nbytes, inputs)
            if t is not None:
                judge_inputs[len(out)] = t  # its place is known when the request is sent
                entry = ReplayBuffer(nbytes)
        elif b.fill is not None and (
            # One element's bytes in hex, or no bytes for an empty buffer.
            (0 < len(b.fill) <= 32 and _hex(b.fill)) or (b.fill == "" and nbytes == 0)
        ):
            entry = ReplayBuffer(nbytes, fill=b.fill)
        elif b.data is not None and dtype is not None:
            try:
                data = base64.b64decode(b.data, validate=True)
            except ValueError:
                return [], {}, {}, "A recorded buffer came back malformed."
            dtypes = [dtype, *(DTYPES.get(d) for d in read_as.get(len(out), ()))]
            values = [t for t, _ in inputs]
            if len(data) == nbytes and all(
                d is not None and trusted_bytes(data, d, values) for d in dtypes
            ):
                entry = ReplayBuffer(nbytes, data=b.data)
                # Scaled as the buffer's own dtype, else as the float view it is
                # read through (a float copy of an input handed over as bytes).
                as_float = [d for d in dtypes if d is not None and d.is_floating_point]
                if as_float:
                    floats[len(out)] = as_float[0]
        out.append(entry)
    return out, judge_inputs, floats, ""


def _hex(s: str) -> bool:
    try:
        bytes.fromhex(s)
    except ValueError:
        return False
    return True


def _input_at(
    place: tuple[int, int], nbytes: int, inputs: list[tuple[torch.Tensor, TensorRef]]
) -> torch.Tensor | None:
    ident, offset = place
    for t, ref in inputs:
        if ref.arena == ident and ref.offset == offset and ref.nbytes == nbytes:
            return t
    return None


def trusted_bytes(data: bytes, dtype: torch.dtype, inputs: list[torch.Tensor]) -> bool:
    """Whether a buffer's starting bytes could only have come from the
    inputs: each value one of theirs in this dtype (or 0, +-inf, padding),
    or, for integers, an even count (an arange)."""
    if len(data) % dtype.itemsize:
        return False
    values = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype)
    if values.numel() == 0:
        return True
    if dtype == torch.bool:
        # torch's bools are the bytes 0 and 1; any other byte is a number
        # written through another view of the storage (a kernel handed a
        # float view of it reads the answer the wrapper put there).
        return bool((values.view(torch.uint8) <= 1).all())
    if not dtype.is_floating_point:
        v = values.to(torch.int64)
        if v.numel() == 1:
            return True
        steps = v[1:] - v[:-1]
        if bool((steps == steps[0]).all()):
            return True
        pool = [
            t.detach().reshape(-1).cpu().to(torch.int64)
            for t in inputs
            if not t.dtype.is_floating_point
        ]
        if not pool:
            return False
        # torch.unique, as Tensor.unique calls it: the method is untyped.
        ints: torch.Tensor = torch.unique(torch.cat(pool))
        return bool(torch.isin(v, ints).all())
    pool = [
        t.detach().reshape(-1).cpu().to(dtype).to(torch.float64)
        for t in inputs
        if t.dtype.is_floating_point
    ]
    pool.append(torch.tensor([0.0, -0.0, math.inf, -math.inf], dtype=torch.float64))
    floats: torch.Tensor = torch.unique(torch.cat(pool))
    found = torch.isin(values.to(torch.float64), floats)
    return bool(found.all())


# Bits a constant keeps in any draw: +-0 and +-inf (padding, masked lanes).
_INT_VIEW = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(_INT_VIEW[t.element_size()]).to(torch.int64)


def _pool(inputs: list[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    # On the CPU, beside the recorded bytes: a GPU's inputs come over once.
    floats = [t.detach().reshape(-1).cpu().to(dtype) for t in inputs if t.dtype.is_floating_point]
    return _bits(torch.cat(floats)) if floats else torch.empty(0, dtype=torch.int64)


# copy_map's answer: the buffer's values as integer bits; for each, the
# group of equal input values it is one of (-2: a constant); and each input
# value's group.
CopyMap = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def copy_map(data: bytes, dtype: torch.dtype, inputs: list[torch.Tensor]) -> CopyMap | None:
    """Where each value of a recorded float buffer may have come from: the
    inputs' values (cast to the buffer's dtype) grouped by value, each
    element's group (-2 for a constant: 0, -0, +-inf; -1 for a value no
    input has), and each input element's group. None for a buffer that is
    not floating point. trusted_bytes has already kept only buffers whose
    every value is one of these."""
    if not dtype.is_floating_point or dtype.itemsize not in _INT_VIEW:
        return None
    values = _bits(torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype))
    pool = _pool(inputs, dtype)
    constants = _bits(torch.tensor([0.0, -0.0, math.inf, -math.inf], dtype=dtype))
    group = torch.full_like(values, -1)
    inverse = torch.empty(0, dtype=torch.int64)
    if pool.numel():
        uniq, inverse = torch.unique(pool, return_inverse=True)
        at = torch.searchsorted(uniq, values).clamp(max=uniq.numel() - 1)
        found = uniq[at] == values
        group[found] = at[found]
    group[torch.isin(values, constants)] = -2
    return values, group, inverse


def same_copy(first: CopyMap, data: bytes, dtype: torch.dtype, inputs: list[torch.Tensor]) -> bool:
    """Whether a second draw's recorded buffer holds its own inputs' values
    where the first draw's held the first inputs' (copy_map): an honest
    copy, cast, transpose or padding moves values by position, the same for
    any draw, so where the first held a value found at input places P, the
    second holds the second inputs' value at one of P. A wrapper that picks
    input values to spell out an answer picks others for other inputs; a
    value that occurs often (a cast to bf16 repeats most) leaves it the
    choice only among the second draw's values at those places."""
    values1, group, inverse = first
    values = _bits(torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype))
    if values.numel() != values1.numel() or bool((group == -1).any()):
        return False
    fixed = group == -2
    if not bool((values[fixed] == values1[fixed]).all()):
        return False
    moved = group >= 0
    if not bool(moved.any()):
        return True
    pool = _pool(inputs, dtype)
    if pool.numel() != inverse.numel():
        return False
    # (group, value) pairs as one integer each: a value's rank among the
    # values seen, beside its group, and the pairs the inputs make allowed.
    _, rank = torch.unique(torch.cat([pool, values[moved]]), return_inverse=True)
    allowed = inverse * (1 << 32) + rank[: pool.numel()]
    held = group[moved] * (1 << 32) + rank[pool.numel() :]
    return bool(torch.isin(held, allowed).all())
