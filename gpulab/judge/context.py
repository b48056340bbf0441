"""What a grader is given: the GradeContext of one check (or, to draw cases
without a sandbox, a CaseContext), and GradeFailed to fail it with.

A grader (gpulab.judge.graders.<exercise>, gpulab.judge.interface.Grader)
records cases with `ctx.add_case`, fails with `ctx.fail` (or by letting a
LearnerError escape), and sets `ctx.timing` on a GPU; gpulab.judge.harness
makes the result of it. Kept apart from the harness, which also loads the
grader: the graders and the machinery import this, and nothing here leads
back to the loader (no import cycle).

It runs in the judge: `ctx.function(name)` is a `Remote`, the learner's
function living in the sandbox, called through gpulab.judge.kernel or a
request of the exercise's own (`ctx.sandbox.request`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Protocol

from gpulab.judge.advice import Advice, JudgeKeys, NothingAhead
from gpulab.sandbox.learner import LearnerError
from gpulab.wire.check_request import CheckRequest
from gpulab.wire.events import CaseDone, Correct, Graded, Stage
from gpulab.wire.replies import Broken, Raised
from gpulab.wire.result import CaseRow
from gpulab.wire.sandbox_start import Loaded, LoadRequest
from gpulab.wire.status import StageKind, Status

if TYPE_CHECKING:
    from gpulab.judge.remote import Arena, Remote, Sandbox
    from gpulab.judge.replay import Replayer
    from gpulab.judge.timed_rows import TimingResult
    from gpulab.wire.sandbox_start import AheadRecord


class Channel(Protocol):
    """Where a check's frames go (gpulab.judge.channel.Channel, the judge's
    events, typed as the lab reads them: gpulab.wire.events)."""

    def send(self, event: Stage | CaseDone | Correct | Graded) -> None: ...

    def stage(
        self,
        kind: StageKind,
        text: str,
        done: int | None = None,
        total: int | None = None,
        allow_s: float | None = None,
    ) -> None: ...


class CaseContext(Protocol):
    """What drawing an exercise's cases needs: where they run and the seeds
    (a GradeContext; gpulab.targets.bench's and gpulab.explain.judge.cases' own)."""

    @property
    def device(self) -> str: ...

    @property
    def interpreter(self) -> bool: ...

    def seed(self, public: int) -> int: ...


class GradeFailed(Exception):
    """The check ends now, as `status` says (one of a check's ENDS: FAILED,
    or ERROR where gpulab could not judge)."""

    def __init__(self, summary: str, message: str = "", status: Status = Status.FAILED) -> None:
        super().__init__(summary)
        self.summary, self.message = summary, message
        self.status = Status.ended(status) or Status.ERROR


@dataclass
class GradeContext:
    request: CheckRequest
    device: str  # "cuda" or "cpu"
    channel: Channel
    # The judge's handle on the sandbox.
    sandbox: Sandbox
    cases: list[CaseRow] = field(default_factory=list)  # each as the grader wrote it
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timing: TimingResult | None = None
    # What the compile-ahead did before each run of cases (a GPU's; speed only).
    warmed: list[AheadRecord | NothingAhead] = field(default_factory=list)
    # Set by the kernel grader when kernels ran (in the interpreter on a CPU);
    # lessons without Triton (JAX, torch.compile, arithmetic) leave it False.
    uses_triton: bool = False
    # A grader may name where it ran ("8 simulated CPU devices (JAX)").
    device_label: str | None = None
    # The replay's sandbox on the CPU (gpulab.judge.replay), or None.
    replayer: Replayer | None = None
    # The last call's kernel lines where the interpreter made a NaN from
    # numbers (the sandbox's word, gpulab.sandbox.nan_watch): advice in the
    # message of a case whose result holds NaN.
    nan_at: tuple[str, ...] = ()
    # Keys of the result's JSON (`--json`) that the report does not show:
    # the grader's own bookkeeping, in words the lessons never introduce.
    json_only: JudgeKeys = field(default_factory=JudgeKeys)
    # The judge's own: the seed mixed into every case's (never sent anywhere),
    # and a folder of its own a sandbox may write into (lesson 07's trace).
    secret_seed: int = 0
    outbox: str = ""
    # What the check gathers for advice after the verdict (gpulab.judge.cost).
    advice: Advice = field(default_factory=Advice)
    _loaded: set[str] | None = None
    _arena: Arena | None = None

    @property
    def file(self) -> str:
        return self.request.file

    @property
    def interpreter(self) -> bool:
        """True when kernels run in the Triton interpreter on the CPU."""
        return self.device == "cpu"

    @property
    def want_timing(self) -> bool:
        return self.request.timing and self.device == "cuda"

    def seed(self, public: int) -> int:
        """A public seed mixed with this run's secret one."""
        return (public * 1_000_003 + self.secret_seed) % (2**31 - 1)

    def stage(
        self,
        kind: StageKind,
        text: str,
        done: int | None = None,
        total: int | None = None,
        allow_s: float | None = None,
    ) -> None:
        """A stage begins: what it spends its time on (`kind`, the result's
        `stages`), the learner's words for it, and where it has steps, how
        many are done of how many."""
        if allow_s is not None:
            self.channel.stage(kind, text, done, total, allow_s)
        elif done is None:
            self.channel.stage(kind, text)
        else:
            self.channel.stage(kind, text, done, total)

    def waiting(self, text: str) -> None:
        """A wait for the GPU (gpulab.gpu.gpulock's `on_wait`)."""
        self.stage(StageKind.WAITING, text)

    def correct(self) -> None:
        """Every correctness case passed and the timing begins: the lab shows
        that verdict now, and the grade when the timing ends (a timed check
        on a GPU takes several times as long as its correctness cases)."""
        self.channel.send(Correct(len(self.cases)))

    def function(self, name: str | None = None) -> Remote:
        name = name or self.request.function
        from gpulab.judge.remote import Remote

        if self._loaded is None:
            self.stage(StageKind.IMPORT, "importing your file")
            if self.sandbox.pending:  # preloaded: its reply is this one
                self.sandbox.pending = False
                loaded = self.sandbox.reply(Loaded)
            else:
                loaded = self.sandbox.ask(LoadRequest((name,)), Loaded)
            if isinstance(loaded, Raised):
                raise LearnerError(loaded.summary, loaded.message)
            if isinstance(loaded, Broken):
                if self.sandbox.learner_ran:
                    # After the file began to run, a broken reply may be its
                    # own (a forged one read as gpulab's error, not recorded).
                    raise LearnerError(
                        "the sandbox broke while your file was loading",
                        f"What it said: {loaded.summary or loaded.kind}",
                    )
                raise GradeFailed(
                    f"the sandbox could not load your file: {loaded.summary}",
                    status=Status.ERROR,
                )
            self._loaded = set(loaded.functions)
        if name not in self._loaded:
            more = self.sandbox.ask(LoadRequest((name,)), Loaded)
            if isinstance(more, Loaded):
                self._loaded |= set(more.functions)
        if name not in self._loaded:
            raise LearnerError(
                f"{Path(self.file).name} does not define `{name}`",
                f"The exercise asks for a function named `{name}`.",
            )
        return Remote(name)

    def arena(self, nbytes: int) -> Arena:
        """Shared memory of at least `nbytes`, reused while it is big enough
        (the sandbox keeps every arena it was given mapped)."""
        if self._arena is None or self._arena.nbytes < nbytes:
            self._arena = self.sandbox.arena(
                max(nbytes, int(1.5 * (self._arena.nbytes if self._arena else 0)))
            )
        self._arena.reset()
        return self._arena

    def add_case(self, row: CaseRow, total: int | None = None) -> None:
        """A case's row, as the grader made it (gpulab.judge.case_row; the
        result's JSON keeps it whole)."""
        self.cases.append(row)
        self.channel.send(CaseDone(len(self.cases), total, row))

    def fail(self, summary: str, message: str = "") -> NoReturn:
        raise GradeFailed(summary, message)
