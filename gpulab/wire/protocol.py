"""The check protocol, shared by the lab, the judge and the sandbox.

Three or four processes take part in a check (docs/grading.md tells the whole story):

- the **lab** (CLI or TUI, `gpulab.lab.runner`) starts the judge and reads its
  events; it imports neither torch nor triton;
- the **judge** (`python -m gpulab.judge.main`, trusted) draws the inputs from a
  secret seed, computes the reference, compares and times; it never imports
  the learner's file;
- the **sandbox** (`python -m gpulab.sandbox`, untrusted) imports the
  learner's file and calls it on the tensors the judge hands it;
- on the CPU, the **replay's sandbox** (the same program, confined alike)
  never imports the file: it runs the recorded launches of the kernels the
  judge kept of it (gpulab.judge.replay).

Everything that crosses a process boundary is a frame: a 4-byte length and a
JSON object with a `type`. Tensors never travel inside frames: they live in
shared memory the judge owns (a sealed memfd, or a CUDA allocation passed as
a descriptor) and frames carry
`TensorRef`s into it. JSON gives the judge only plain dicts, lists, strings,
numbers and booleans from the sandbox: no object the learner made can reach
the judge, so no `__eq__` or `__sub__` of theirs ever runs there.

This module imports nothing heavy.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from gpulab.wire.status import StageKind

# --- framing -------------------------------------------------------------------

MAX_FRAME = 16 * 1024 * 1024  # JSON only; tensors go through shared memory
# No honest frame nests deeper than a handful of levels (a tensor reference in
# a list in a dict); a deeper one is a hostile peer's, refused before any code
# walks it recursively.
MAX_DEPTH = 32
_LEN = struct.Struct("<I")


class ProtocolError(Exception):
    """A frame that is not a well-formed message (from a broken or hostile peer)."""


# A JSON object as it came in (a frame, an event line, a result's plain
# JSON), before a parser of this package reads it field by field: any value.
JsonObject = dict[str, Any]
# A Python call's keyword arguments (the learner's function's, torch's,
# Triton's): any value, by name. Named here, beside the frames that carry a
# call's arguments, so the judge and the sandbox say it alike.
Kwargs = dict[str, Any]


def write_frame(fd: int, message: Mapping[str, object]) -> None:
    """Send one message: a JSON object (a frame's JSON, or a TypedDict of one)."""
    data = json.dumps(message, allow_nan=True, default=_no_objects).encode()
    if len(data) > MAX_FRAME:
        raise ProtocolError(f"a message of {len(data)} bytes is over the {MAX_FRAME} limit")
    view = memoryview(_LEN.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _no_objects(obj: Any) -> Any:
    raise TypeError(f"{type(obj).__name__} cannot cross the check's process boundary")


def _read_exact(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("the other process closed the channel")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


# A spare judge's stdin (gpulab.lab.runner.Spares): the request it expects,
# then this line when it may start CUDA, then the check's own request.
SPARE_GO = "go"


def read_frame(fd: int) -> JsonObject:
    """One message. Raises EOFError at the end, ProtocolError on garbage."""
    (n,) = _LEN.unpack(_read_exact(fd, _LEN.size))
    if n > MAX_FRAME:
        raise ProtocolError(f"a frame of {n} bytes is over the {MAX_FRAME} limit")
    data = _read_exact(fd, n)
    if _nesting(data) > MAX_DEPTH:
        raise ProtocolError(f"a frame nested deeper than {MAX_DEPTH} levels")
    try:
        message = json.loads(data)
    except (ValueError, RecursionError) as exc:
        # ValueError, not only JSONDecodeError: an integer of more than
        # Python's 4300 digits is well-formed JSON that json.loads refuses
        # with a plain ValueError, which read as gpulab's own failure.
        raise ProtocolError(f"a frame is not JSON: {type(exc).__name__}: {exc}") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ProtocolError("a frame without a type")
    return message


def _nesting(data: bytes) -> int:
    """How deep the JSON text's brackets nest, counted outside strings, before
    anything parses it (json's own parser recurses, and a RecursionError in
    the judge would read as gpulab's fault). In C loops: a 5 MB frame takes
    milliseconds."""
    brackets = _STRINGS.sub(b"", data).translate(None, _NOT_BRACKETS)
    brackets = brackets.translate(_OPEN_CLOSE)
    # Each pass removes every innermost pair: a text n deep empties in n passes.
    for depth in range(MAX_DEPTH + 1):
        if not brackets:
            return depth
        brackets = brackets.replace(b"()", b"")
    return MAX_DEPTH + 1


_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_OPEN_CLOSE = bytes.maketrans(b"[{]}", b"(())")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[{]}")


# --- typed fields of untrusted messages ----------------------------------------


def text(value: Any, limit: int = 20000) -> str:
    """A string from the sandbox, or "" when it sent something else."""
    return value[:limit] if isinstance(value, str) else ""


def number(value: Any) -> float | None:
    """A finite float from the sandbox (bool is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an int past float's range (JSON has no limit): not finite
        return None
    return value if math.isfinite(value) else None


def numbers(value: Any, limit: int = 100000) -> list[float] | None:
    if not isinstance(value, list) or len(value) > limit:
        return None
    out = [n for n in map(number, value) if n is not None]
    return out if len(out) == len(value) else None


# --- shared memory ---------------------------------------------------------------


# A tensor reference's JSON: one key that no argument of the learner's can
# have (`is_tensor_ref`), its seven numbers and names in TensorRef's order.
TensorJson = TypedDict("TensorJson", {"__tensor__": list[int | str | list[int]]})


@dataclass(frozen=True)
class TensorRef:
    """A tensor living in an arena: its own storage of `nbytes` at `offset`
    bytes into the arena, and the view of it (dtype, shape, strides, storage
    offset in elements), so padded and sliced layouts travel as they are."""

    arena: int
    offset: int
    nbytes: int
    dtype: str  # torch dtype name without "torch.", e.g. "float16"
    shape: tuple[int, ...]
    stride: tuple[int, ...]  # in elements
    storage_offset: int = 0  # in elements

    def to_json(self) -> TensorJson:
        return {
            "__tensor__": [
                self.arena,
                self.offset,
                self.nbytes,
                self.dtype,
                list(self.shape),
                list(self.stride),
                self.storage_offset,
            ]
        }

    @staticmethod
    def from_json(obj: Any) -> TensorRef:
        try:
            arena, offset, nbytes, dtype, shape, stride, soff = obj["__tensor__"]
            ref = TensorRef(
                int(arena),
                int(offset),
                int(nbytes),
                str(dtype),
                tuple(int(s) for s in shape),
                tuple(int(s) for s in stride),
                int(soff),
            )
        except (KeyError, TypeError, ValueError, OverflowError) as exc:  # int(inf): OverflowError
            raise ProtocolError(f"a malformed tensor reference: {exc}") from None
        if min((ref.offset, ref.nbytes, ref.storage_offset, *ref.shape, *ref.stride)) < 0:
            raise ProtocolError("a tensor reference with a negative offset, size or stride")
        return ref


def is_tensor_ref(obj: Any) -> bool:
    return isinstance(obj, dict) and set(obj) == {"__tensor__"}


@dataclass
class ArenaSpec:
    """How the sandbox opens an arena. Its memory comes as a file descriptor
    passed on the check's socket right after this frame (SCM_RIGHTS), never
    as a path: a sealed memfd on the CPU ("memfd"), a CUDA allocation's
    descriptor on a GPU ("cuda", gpulab.measure.vmm)."""

    id: int
    nbytes: int
    kind: str  # "memfd" or "cuda"
    device: int = 0


# --- judge -> sandbox -------------------------------------------------------------
# Each request and reply is typed in its conversation's module (gpulab.wire.calls,
# timed_batch, sandbox_start, ...: gpulab.wire.requests lists the requests).


# --- the lab <-> judge -------------------------------------------------------------


@dataclass(frozen=True)
class ExplainOptions:
    """`--explain`: advice after the verdict (gpulab.explain)."""

    gpu: str | None = None  # --gpu: the GPU whose roofline to explain against
    gpu_setting: str | None = None  # the workspace's chosen GPU
    budget_s: float | None = None
    # Run the Nsight Compute step without a GPU, against whatever `ncu` is on
    # PATH: for tests of its plumbing with a stand-in ncu (tests/diagnosis/test_nsight.py).
    # No command-line flag sets it.
    nsight_without_gpu: bool = False


# The reference kernels' Hopper-only paths (kernels/flash_attention.py,
# kernels/softmax.py, kernels/matmul.py), each turned off by its variable set
# to "0", to time the path every other GPU takes. A check turns them off only
# when asked (`CheckRequest.paths_off`, `gpulab check --off NAME`): the
# sandbox's environment is otherwise the judge's fixed allow-list.
KERNEL_PATHS = {
    "fa3": "GPULAB_FA3",
    "softmax_smem": "GPULAB_SOFTMAX_SMEM",
    "matmul_tma": "GPULAB_MATMUL_TMA",
}


def paths_off_env(names: list[str]) -> dict[str, str]:
    """The sandbox's variables for the kernel paths `names` turns off."""
    return {KERNEL_PATHS[n]: "0" for n in names}


# The check's request (CheckRequest) is declared with the codec in
# gpulab.wire.check_request.


# --- stages: where a check's time went ---------------------------------------


def stage_seconds(marks: list[tuple[StageKind, float]], now: float) -> dict[str, float]:
    """(kind, monotonic start) marks -> seconds a kind (by its value), in the
    order first seen."""
    out: dict[str, float] = {}
    for (kind, t), (_, end) in zip(marks, [*marks[1:], (StageKind.OTHER, now)], strict=True):
        out[str(kind)] = out.get(str(kind), 0.0) + (end - t)
    return {k: round(v, 3) for k, v in out.items()}
