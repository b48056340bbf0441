"""What the lab asks the judge to grade: the one request of a check, typed
from the lab's `run_check` (gpulab.lab.runner.check_request) to the graders
(`ctx.request`), declared with gpulab.wire.codec.

A request is gpulab's own, read strictly (`Frame`): a field of the wrong
type, an unknown key, a missing exercise, function or file, or a kernel
path this gpulab does not know is a ProtocolError naming it. Its JSON is
the fields by name, in order, with no `type`, as it always was.

This module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from gpulab.wire.codec import Frame, decode, wire
from gpulab.wire.protocol import KERNEL_PATHS, JsonObject, ProtocolError


def _named(key: str) -> Any:
    """A reader of a field that names something: a string, never empty."""

    def read(value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise ProtocolError(f"a check request without `{key}`")
        return value

    return read


def _paths_off(value: Any) -> list[str]:
    """Names of KERNEL_PATHS, each one this gpulab knows."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ProtocolError(f"a check request's `paths_off` is {type(value).__name__}")
    unknown = [str(n)[:100] for n in value if not isinstance(n, str) or n not in KERNEL_PATHS]
    if unknown:
        raise ProtocolError(f"a check request turns off unknown kernel paths: {unknown}")
    return list(value)


@dataclass
class CheckRequest(Frame):
    """What the lab asks the judge to grade (the module's docstring)."""

    EXTRA: ClassVar[bool] = False  # an unknown key is refused

    exercise: str = wire(read=_named("exercise"))
    function: str = wire(read=_named("function"))
    file: str = wire(read=_named("file"))
    timing: bool = True
    device: str = "auto"  # "auto", "cpu" or "cuda"
    flops: str | None = None
    bytes: str | None = None
    kind: str | None = None
    content_root: str = ""
    workspace: str | None = None  # where per-file caches and measured ceilings live
    timeout: float = 300.0
    # How far the judge may move the lab's deadline, in seconds from the
    # check's start (None: not at all, `timeout` is the limit). On the CPU,
    # when the learner set no limit, the judge gives each case time in
    # proportion to what the interpreter needs for it (gpulab.judge.allowance).
    timeout_cap: float | None = None
    # --explain (gpulab.explain): advice after the verdict, never part of it.
    explain: bool = False
    explain_gpu: str | None = None  # --gpu: the GPU whose roofline to explain against
    gpu_setting: str | None = None  # the workspace's chosen GPU
    explain_budget_s: float | None = None
    explain_nsight_without_gpu: bool = False  # ExplainOptions.nsight_without_gpu
    # Names of KERNEL_PATHS to turn off in the sandbox (a maintainer's switch:
    # the reference kernels' portable paths timed on a Hopper GPU).
    paths_off: list[str] = wire(factory=list, read=_paths_off)

    @staticmethod
    def from_json(obj: JsonObject) -> CheckRequest:
        """Checked field by field: a wrong type is a ProtocolError naming it."""
        return decode(CheckRequest, obj)
