"""The two-draw rule: a shape drawn twice, on other values, must launch the
same kernels with the same numbers (gpulab.judge.kernel.check_cases). The
replay runs a case's launches again on the same inputs, so an answer the
wrapper worked out in Python and handed to a kernel as numbers would
replay to itself; two draws of one shape tell."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

from gpulab.judge.kernel_spec import Case
from gpulab.judge.replay_bytes import CopyMap, copy_map, same_copy, trusted_bytes
from gpulab.sandbox.replay import DTYPES
from gpulab.wire.launch_record import (
    BufferArg,
    DescArg,
    LaunchRecord,
    RecordedBuffer,
    RecordedLaunch,
    TorchStep,
    arg_json,
    flat_args,
)

# A shape's first draw, by its arguments' key (_arg_key): the case's name,
# its launches (_launch_key) and its filled buffers' dtypes and copy maps.
Draws = dict[
    tuple[Any, ...],
    tuple[str, tuple[tuple[str, ...], ...], list[tuple[torch.dtype, CopyMap | bytes | None]]],
]


def first_of_pair(draws: Draws, paired: Counter[Any], case: Case) -> bool:
    """Whether `case` is the first draw of a shape drawn twice."""
    key = draw_key(case)
    return paired[key] > 1 and key not in draws


def same_launches(draws: Draws, case: Case, record: LaunchRecord | None) -> str:
    """The replay runs a case's launches again on the same inputs, so numbers
    the wrapper worked out from the input (in pure Python, out of the
    profiler's sight) and passed as scalar arguments would replay to the
    same answer. Two draws of one shape tell: an honest launch's numbers
    are sizes, strides and settings, the same for both. Returns the earlier
    draw's name when their launches differ. Equal, not one a subset of the
    other: a call that also repeats the last call's launches (answers and
    all) before its own would otherwise pass, its own writing last.
    Buffers the wrapper filled from the inputs (copies, casts, padding: the
    replay keeps those bytes) must hold the second draw's values where they
    held the first's (replay_bytes.same_copy)."""
    if record is None or record.launches is None:
        return ""
    key = draw_key(case)
    buffers = record.buffers or ()
    # In order and counted: which of a set of launches comes last, and how
    # often one repeats, are numbers too (an honest wrapper's follow the shapes).
    sig = tuple(_launch_key(la, buffers) for la in record.launches)
    if record.out is not None:  # which buffer, and where in it, the result is read from
        sig += (("out", str(record.out.to_json())),)
    copies = _copies(buffers)
    if key not in draws:
        inputs = [t for t in (*case.args, *case.kwargs.values()) if isinstance(t, torch.Tensor)]
        # Only bytes the replay keeps (every value an input's): a buffer it
        # poisons anyway may be torch.empty's leftovers, which honestly
        # differ from one draw to the next.
        maps = [
            (
                dtype,
                _first_copy(data, dtype, inputs) if trusted_bytes(data, dtype, inputs) else None,
            )
            for dtype, data in copies
        ]
        draws[key] = (case.name, sig, maps)
        return ""
    name, seen, maps = draws[key]
    if sig != seen or len(copies) != len(maps):
        return name
    inputs = [t for t in (*case.args, *case.kwargs.values()) if isinstance(t, torch.Tensor)]
    for (dtype, first), (dtype2, data) in zip(maps, copies, strict=True):
        if dtype2 != dtype:
            return name
        if isinstance(first, bytes):
            if data != first:
                return name
        elif first is not None and not same_copy(first, data, dtype, inputs):
            return name
    return ""


def _first_copy(data: bytes, dtype: torch.dtype, inputs: list[torch.Tensor]) -> CopyMap | bytes:
    """What a second draw's buffer must match: a float buffer's copy map
    (replay_bytes.same_copy); an integer or bool buffer's very bytes. The replay
    keeps any two integers (they count up evenly, as an arange does) and a
    mask, and those carry whatever numbers the wrapper put there; an
    honest one (indices, offsets) comes from the shapes, the same in every
    draw. No exercise hands over integer inputs, whose copies would differ."""
    if dtype.is_floating_point:
        found = copy_map(data, dtype, inputs)
        if found is not None:
            return found
    return data


def draw_key(case: Case) -> tuple[Any, ...]:
    """Two cases of one key are two draws of one shape (same_launches)."""
    return tuple(_arg_key(a) for a in (*case.args, *sorted(case.kwargs.items())))


def _copies(buffers: tuple[RecordedBuffer, ...]) -> list[tuple[torch.dtype, bytes]]:
    """The recorded bytes of the buffers the wrapper filled (in the order
    the launches were handed them), with their dtype; what cannot be read
    is left out (the replay refuses it anyway)."""
    import base64

    out = []
    for b in buffers:
        if b.data is None:
            continue
        dtype = DTYPES.get(b.dtype) if b.dtype is not None else None
        try:
            data = base64.b64decode(b.data, validate=True)
        except ValueError:
            continue
        if dtype is not None and len(data) % dtype.itemsize == 0:
            out.append((dtype, data))
    return out


def _arg_key(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        return ("tensor", tuple(a.shape), a.stride(), a.storage_offset(), str(a.dtype))
    if isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], str):  # a kwarg
        return (a[0], _arg_key(a[1]))
    return ("value", repr(a))


def _launch_key(
    launch: RecordedLaunch | TorchStep, buffers: tuple[RecordedBuffer, ...]
) -> tuple[str, ...]:
    """A launch as two draws of one shape must repeat it: kernel, grid,
    scalar arguments, the views it is handed (buffer, offset, shape,
    stride, dtype) and the constant each filled buffer it is handed
    holds (the replay keeps fills, so a value the wrapper worked out and
    handed over as a one-value buffer would replay to itself; an honest
    fill, zeros or -inf, is the same for both draws)."""
    import json

    if isinstance(launch, TorchStep):  # a torch op: its views are all it has
        return ("step", json.dumps(launch.to_json(), sort_keys=True))
    args = dict(flat_args(launch.args or {}))  # a tuple's tensors each in its place
    numbers = {k: arg_json(v) for k, v in args.items() if not isinstance(v, BufferArg)}
    fills = {}
    for k, v in args.items():
        # A TMA descriptor's tensor too: a one-value buffer handed over
        # inside a descriptor is the same number in hiding.
        if isinstance(v, (BufferArg, DescArg)) and 0 <= v.view.buffer < len(buffers):
            fill = buffers[v.view.buffer].fill
            if fill is not None:
                fills[k] = fill[:64]
    # Which buffer each pointer argument points into, where, and as what:
    # the same for two draws of an honest launch (shapes and strides), but
    # a view's offset is a number the wrapper picks, and a kernel can read
    # it back (a pointer cast to an integer, less the buffer's start). An
    # answer spelt out as offsets into a zeroed buffer replays to itself.
    views = {k: arg_json(v) for k, v in args.items() if isinstance(v, BufferArg)}
    grid = list(launch.grid) if isinstance(launch.grid, tuple) else launch.grid
    return (
        str(launch.kernel),
        json.dumps(grid, default=str),
        json.dumps(numbers, sort_keys=True, default=str),
        json.dumps(fills, sort_keys=True),
        json.dumps(views, sort_keys=True, default=str),
        json.dumps(launch.options, sort_keys=True, default=str),
        str(launch.binary),  # a GPU's compiled kernel: the same for both draws
    )
