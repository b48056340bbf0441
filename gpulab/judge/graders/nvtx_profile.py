"""Grader for lesson 07: named ranges around a training step, checked in a profile.

Contract: `train_step(model, batch, optimizer)` runs one training step of the
given model on batch = (x, y) (zero the grads, forward, cross-entropy loss,
backward, optimizer step) and returns the loss as a tensor. It must mark
its phases with `torch.profiler.record_function` ranges named exactly

    train_step            around the whole step, holding the four below:
      forward             the model's forward pass
      loss                the loss computation
      backward            loss.backward()
      optimizer_step      optimizer.step()

The judge seeds the model and sends its weights and the batch to the
sandbox, which runs four steps through the learner's step and profiles the
second with torch.profiler (CPU activity, plus CUDA on a GPU:
gpulab.sandbox.training). The judge trains a pristine copy of the step on
the same weights (the losses and the final weights must agree) and checks
(gpulab.judge.nvtx_ranges), on the profile's events as the sandbox reports
them, that each range exists once, that they nest and come in order without
overlapping, and that each holds the operations it should (matmuls in
forward, the loss op in loss, autograd's ...Backward nodes in backward, the
optimizer's update in optimizer_step) and none that belong to another.

The profile's trace goes to <workspace>/traces/nvtx_profile.json (open it in
ui.perfetto.dev or chrome://tracing); its path, the top operations and the
ranges' times are in the result's `timing["profile"]`.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Required, TypedDict

import torch
import torch.nn.functional as F
from torch import nn

from gpulab.fsutil import own_temp_folder
from gpulab.gpu.traces import KernelTime, OpTime, RangeTime
from gpulab.gpu.units import value_text
from gpulab.judge.case_row import case_row
from gpulab.judge.compare import worst
from gpulab.judge.context import GradeFailed
from gpulab.judge.nvtx_ranges import Event, check_ranges, range_times
from gpulab.sandbox.training import RANGES, build_model
from gpulab.wire.replies import Raised
from gpulab.wire.status import StageKind, Status
from gpulab.wire.training import KernelRow, Trained, TrainRequest
from gpulab.wire.training import OpRow as SandboxOpRow

if TYPE_CHECKING:
    from gpulab.judge.context import GradeContext
    from gpulab.judge.timed_rows import Json

STEPS = 4
PROFILED = 1  # index of the step that is profiled (the first one warms up)

# --- the pristine step and its inputs ------------------------------------------


def make_model(seed: int, device: str) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    return build_model(device)


def make_batch(seed: int, device: str, n: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(n, 32, generator=g)
    # Learnable labels (a fixed random linear rule) so the loss really falls.
    w = torch.randn(32, 10, generator=torch.Generator().manual_seed(1234))
    return x.to(device), (x @ w).argmax(-1).to(device)


def original_train_step(
    model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor], optimizer: torch.optim.Optimizer
) -> torch.Tensor:
    x, y = batch
    optimizer.zero_grad(set_to_none=True)
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    backward: Callable[[], None] = loss.backward  # unannotated in torch
    backward()
    optimizer.step()
    return loss.detach()


# --- grading ------------------------------------------------------------------


def _params(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def trace_file(ctx: GradeContext, name: str = "nvtx_profile.json") -> Path:
    """Where a check's trace goes: <workspace>/traces/<name>, or a folder
    of this user's own in the temp folder without a workspace."""
    ws = ctx.request.workspace
    if ws:
        folder = Path(ws) / "traces"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            folder.chmod(0o700)  # as an older gpulab left it: 0755 with umask 022
    else:
        folder = own_temp_folder("gpulab-traces")
    return folder / name


class OpRow(OpTime):
    """A profile's operator row, as the app draws it (gpulab.lab.report): a
    trace's, with the time on the device."""

    self_device_ms: float


class Profile(TypedDict, total=False):
    """A profile as the result's `timing["profile"]` holds it (lesson 07's
    two exercises): the trace's path, its top rows, and how they are sorted."""

    trace: Required[str]
    device: Required[str]
    top_ops: Required[list[OpRow]]
    ranges: list[RangeTime]
    sort: Required[str]
    top_kernels: list[KernelTime]
    nvtx: list[str]


@dataclass
class ProfileTiming:
    """A profiled exercise's timing: the profile the app shows, nothing graded."""

    profile: Profile
    summary: str
    implausible: str | None = None  # a profile is never refused

    def to_json(self) -> Json:
        return {"profile": self.profile, "cases": [], "summary": self.summary}


def _op_rows(rows: tuple[SandboxOpRow, ...]) -> list[OpRow]:
    return [
        OpRow(
            name=r.name,
            calls=r.calls,
            self_cpu_ms=r.self_cpu_ms,
            cpu_total_ms=r.cpu_total_ms,
            self_device_ms=r.self_device_ms,
        )
        for r in rows
    ]


def _kernel_rows(rows: tuple[KernelRow, ...]) -> list[KernelTime]:
    return [KernelTime(name=r.name, calls=r.calls, device_ms=r.device_ms) for r in rows]


def _train_remote(
    ctx: GradeContext,
    seed: int,
    batch: tuple[torch.Tensor, torch.Tensor],
    meanwhile: Callable[[], None],
) -> tuple[Trained, list[torch.Tensor], Path, Path]:
    """The learner's steps in the sandbox, from the judge's weights and batch;
    `meanwhile()` runs here while they run there. Returns (the reply, the
    final weights, where the sandbox wrote the trace, where it belongs)."""
    device = ctx.device
    start = _params(make_model(seed, device)[0])
    arena = ctx.arena(sum(t.numel() * t.element_size() * 2 for t in [*start, *batch]) + 8192)
    params = [arena.put(t) for t in start]
    final = [arena.slot(tuple(t.shape), t.dtype) for t in start]
    wanted = trace_file(ctx)
    # The sandbox writes a folder of the judge's (its outbox), never the
    # workspace's traces folder, and the judge copies the trace out.
    written = Path(ctx.outbox) / wanted.name if ctx.outbox else wanted
    ctx.stage(
        StageKind.RUNNING, f"training {STEPS} steps in your code (step {PROFILED + 1} profiled)"
    )
    ctx.sandbox.send(
        TrainRequest(
            function="train_step",
            params=tuple(params),
            batch=tuple(arena.put(t) for t in batch),
            final=tuple(final),
            steps=STEPS,
            profiled=PROFILED,
            trace=str(written),
        )
    )
    meanwhile()
    got = ctx.sandbox.reply(Trained)
    if isinstance(got, Raised):
        ctx.fail(got.summary, got.message)
    if not isinstance(got, Trained):
        raise GradeFailed(
            f"the sandbox could not run your steps: {got.summary}", status=Status.ERROR
        )
    if got.returned is not None:
        ctx.fail(
            f"train_step returned {got.returned}, expected the loss as a one-element tensor",
            "End the step with `return loss.detach()`.",
        )
    return got, [arena.view(f).clone() for f in final], written, wanted


def grade(ctx: GradeContext) -> None:
    device = ctx.device
    if device == "cpu":
        torch.set_num_threads(1)  # as in the sandbox: the reference is timed by nobody
    ctx.function("train_step")
    seed = ctx.seed(7)
    batch = make_batch(ctx.seed(100), device)
    # The judge's own training, a pristine step on the same weights and batch,
    # runs while the sandbox runs the learner's.
    ref, ref_opt = make_model(seed, device)
    ref_losses: list[float] = []

    def train_reference() -> None:
        ref_losses.extend(float(original_train_step(ref, batch, ref_opt)) for _ in range(STEPS))

    reply, weights, written, trace_path = _train_remote(ctx, seed, batch, train_reference)
    losses = [v if v is not None else math.nan for v in reply.losses[:STEPS]]

    # 1. It still trains, exactly as the unannotated step does.
    same = len(losses) == STEPS and all(
        math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-7)
        for a, b in zip(losses, ref_losses, strict=True)
    )
    ctx.add_case(
        case_row(
            name=f"losses match the original over {STEPS} steps",
            passed=same,
            detail=""
            if same
            else "losses "
            + ", ".join(f"{v:.5f}" for v in losses)
            + " vs the original's "
            + ", ".join(f"{v:.5f}" for v in ref_losses),
        )
    )
    diff = 0.0
    for a, b in zip(weights, _params(ref), strict=True):
        diff = worst(diff, float((a - b).abs().max()))
    ok = diff <= 1e-6  # NaN (a slot never written) fails too
    ctx.add_case(
        case_row(
            name="weights match the original after training",
            passed=ok,
            max_abs=diff,
            detail=""
            if ok
            else f"weights differ by up to {value_text(diff)}: does the step still zero the grads, "
            "step the optimizer once, and train on the batch it is given?",
        )
    )
    falls = same and losses[-1] < losses[0]
    ctx.add_case(
        case_row(
            name="loss decreases",
            passed=falls,
            detail=f"{losses[0]:.4f} → {losses[-1]:.4f}" if losses else "no loss",
        )
    )

    # 2. The ranges, read off the profile's events (the sandbox's report).
    events = list(reply.events)
    for row in check_ranges(events):
        ctx.add_case(row)
    _report_profile(ctx, reply, events, written, trace_path)


def copy_untrusted(written: Path, wanted: Path, limit: int = 256 << 20) -> None:
    """Copy a file the sandbox wrote, never following a link it planted: the
    last component is opened with O_NOFOLLOW (the folder is the judge's), and
    only a plain file with one link is read, from the descriptor."""
    try:
        fd = os.open(written, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        raise OSError("the sandbox wrote no trace file") from None
    with os.fdopen(fd, "rb") as src:
        st = os.fstat(src.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size > limit:
            raise OSError("the sandbox's trace is not a plain file")
        # A new file renamed over `wanted`: a link found there (planted by
        # an older gpulab's sandbox) is replaced, never followed.
        fd, tmp = tempfile.mkstemp(dir=wanted.parent, prefix=f".{wanted.name}.")
        try:
            # The learner's alone: the ranges and operators of their
            # solution (0644 let other users of a shared box read it).
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.replace(tmp, wanted)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def _report_profile(
    ctx: GradeContext, reply: Trained, events: list[Event], written: Path, wanted: Path
) -> None:
    """What the app shows: top operations, the trace, the ranges' times."""
    device = ctx.device
    trace = ""
    problem = reply.trace_error
    if not problem and written != wanted:
        try:
            copy_untrusted(written, wanted)
        except OSError as exc:
            problem = str(exc)
    if problem:
        ctx.notes.append(f"could not write the trace to {wanted}: {problem}")
    elif wanted.is_file():
        trace = str(wanted)
    ranges = range_times(events)
    profile_info: Profile = {
        "trace": trace,
        "device": device,
        "top_ops": _op_rows(reply.top_ops),
        "ranges": ranges,
        "sort": "self_device_ms" if device == "cuda" else "self_cpu_ms",
    }
    if device == "cuda":
        profile_info["top_kernels"] = _kernel_rows(reply.top_kernels)
        profile_info["nvtx"] = sorted(set(reply.nvtx))
        seen = set(profile_info["nvtx"])
        if not set(RANGES) <= seen:
            ctx.notes.append(
                "Nsight Systems will not show your ranges: no torch.cuda.nvtx "
                "range was pushed for "
                + ", ".join(n for n in RANGES if n not in seen)
                + ". Push one beside each record_function (or profile under "
                "torch.autograd.profiler.emit_nvtx())."
            )
    if trace:
        ctx.notes.append(
            f"Trace written to {trace}: open it in https://ui.perfetto.dev "
            "(or chrome://tracing). `gpulab profile nvtx_profile` shows the top "
            "operations."
        )
    parts = ", ".join(f"{r['name']} {r['ms']:.2f} ms" for r in ranges)
    ctx.timing = ProfileTiming(
        profile_info, f"profiled on the {'GPU' if device == 'cuda' else 'CPU'}: {parts}"
    )


# --- `gpulab profile` (the manifest's tools: "profile") ---------------------------


def profile_step(module: Any, device: str) -> Callable[[], object]:
    """One training step of the learner's, on the check's model and batch."""
    model, opt = make_model(0, device)
    batch = make_batch(0, device)
    return lambda: module.train_step(model, batch, opt)
