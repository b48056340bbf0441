"""One check, as every front end asks for it: `Lab.check`.

The TUI's c and X, `gpulab check`, `gpulab watch` and the gradebook's worker
all grade a file the same way: plan the check (its limit and why, --explain;
gpulab.lab.plan), run it in a fresh judge or a spare (gpulab.lab.runner),
say which limit a timed-out check ran into, and record the attempt in the
workspace. That sequence lives here once; each caller keeps only what it
shows (gpulab.lab.report for the CLI, the panes for the TUI, a JSON file for
the gradebook).

The result a check returns is the one the screen shows: the runner made
every string in it visible (gpulab.textsafe) as it read the judge's frames,
so nothing after it sanitises it again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from gpulab.course.content import Lesson
from gpulab.lab.plan import CheckPlan, explain_timeout, nvidia_gpu_visible, plan_check, recorded
from gpulab.lab.runner import EventCallback, Spares, check_request, run_check
from gpulab.lab.workspace import Workspace
from gpulab.wire.result import CheckResult

# How a timed-out check's message names the option that changes the limit.
CHECK_TIMEOUT_OPTION = "`gpulab check --timeout SECONDS`"


@dataclass(frozen=True)
class CheckOptions:
    """What the learner (or the instructor) asked of one check."""

    limit: float | None = None  # their own time limit; None: the device's default
    limit_why: str = ""  # where they set it, for a timed-out check's message
    explain: bool = False  # --explain (the TUI's X)
    explain_gpu: str | None = None  # --explain's --gpu
    timing: bool = True
    paths_off: tuple[str, ...] = ()
    # Record the attempt in the workspace (only the workspace's own copy of
    # the exercise is; the TUI records on its UI thread itself: Lab.record).
    record: bool = True
    timeout_option: str = CHECK_TIMEOUT_OPTION


@dataclass(frozen=True)
class Planned:
    """A check's plan and where it may write: `workspace` is the folder the
    judge keeps its compiler cache in (None: a temporary one), `blocked`
    why the workspace cannot be written (None when it can)."""

    plan: CheckPlan
    workspace: str | None = None
    blocked: str | None = None


class Lab:
    """The lab's side of checks: its workspace (None: nothing recorded, no
    compiler cache kept, as for the gradebook), the device checks run on,
    and the spare judge ahead of the next check (gpulab.lab.runner.Spares).
    `gpu`: whether a GPU is visible, where the caller knows (found once
    otherwise, when a plan needs it)."""

    def __init__(
        self,
        workspace: Workspace | None,
        *,
        device: str = "auto",
        spares: Spares | None = None,
        gpu: bool | None = None,
    ) -> None:
        self.workspace, self.device, self.spares, self.gpu = workspace, device, spares, gpu
        self._gpu_lock = threading.Lock()

    def _gpu_visible(self) -> bool | None:
        if self.device != "auto":
            return self.gpu
        with self._gpu_lock:
            if self.gpu is None:
                self.gpu = nvidia_gpu_visible()
            return self.gpu

    def plan(
        self, lesson: Lesson, options: CheckOptions = CheckOptions(), *, gpu: bool | None = None
    ) -> Planned:
        """The check of `lesson` as `options` ask: its limit and why, the
        explain options, and the workspace's part in it. `gpu`: whether a
        GPU is visible, if the caller knows now."""
        ws = self.workspace
        blocked = ws.unwritable() if ws is not None else None
        explain = options.explain
        plan = plan_check(
            lesson,
            device=self.device,
            limit=options.limit or None,
            limit_why=options.limit_why,
            explain=explain,
            explain_gpu=options.explain_gpu,
            gpu_setting=ws.get_setting("gpu") if explain and ws is not None else None,
            gpu=gpu if gpu is not None or options.limit else self._gpu_visible(),
        )
        cache = None if ws is None or blocked else str(ws.root)
        return Planned(plan, cache, blocked)

    def check(
        self,
        lesson: Lesson,
        file: Path,
        *,
        options: CheckOptions = CheckOptions(),
        planned: Planned | None = None,
        on_event: EventCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> CheckResult:
        """Grade `file` for `lesson`: plan (unless the caller planned it
        already, to show its limit first), run, explain a timeout, record.
        `on_event` gets the judge's progress; setting `cancel` stops it."""
        if planned is None:
            planned = self.plan(lesson, options)
        plan = planned.plan
        result = run_check(
            lesson,
            file,
            timeout=plan.timeout,
            timing=options.timing,
            device=self.device,
            on_event=on_event,
            cancel=cancel,
            workspace=planned.workspace,
            explain=plan.explain,
            spares=self.spares,
            paths_off=options.paths_off,
            timeout_cap=plan.cap,
        )
        result = explain_timeout(result, plan.timeout, plan.why, option=options.timeout_option)
        if options.record and planned.blocked is None:
            self.record(lesson, result)
        return result

    def record(self, lesson: Lesson, result: CheckResult) -> bool:
        """Keep `result` as an attempt, if it is one (gpulab.lab.plan.recorded)
        and the lab has a workspace; whether it was kept. Raises OSError
        when the workspace cannot be written."""
        if self.workspace is None or not recorded(result):
            return False
        self.workspace.record_result(lesson.exercise, result)
        return True

    def prepare_spare(
        self,
        lesson: Lesson,
        file: Path,
        options: CheckOptions = CheckOptions(),
        *,
        gpu: bool | None = None,
    ) -> None:
        """Start the judge for the next check of `file` with `options` now
        (it blocks while the process starts: the TUI calls it from a thread).
        The request is built as `check` builds it, so the spare fits it."""
        spares = self.spares
        if spares is None or spares.closed:
            return
        planned = self.plan(lesson, options, gpu=gpu)
        request = check_request(
            lesson,
            file,
            timeout=planned.plan.timeout,
            timing=options.timing,
            device=self.device,
            workspace=planned.workspace,
            explain=planned.plan.explain,
            paths_off=options.paths_off,
            timeout_cap=planned.plan.cap,
        )
        spares.prepare(request)

    def close(self) -> None:
        """Stop the spare judge, if any; no more are started."""
        if self.spares is not None:
            self.spares.close()
