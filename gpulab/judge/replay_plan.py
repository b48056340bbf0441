"""The replay's plan (gpulab.judge.replay): the sandbox's record of a call's
launches, checked field by field, and what the replay may start from.

What the replay may start from is decided here, not in the record: a
buffer the judge handed over is the judge's own copy; a constant fill is
kept (zeros, -inf); recorded bytes are kept only when every value in them
is a value of an input, or integers that count up evenly
(gpulab.judge.replay_bytes). Anything else starts as NaN.
"""

from __future__ import annotations

import base64
import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from gpulab.judge.replay_bytes import trusted_bytes
from gpulab.judge.replay_params import params_problem
from gpulab.sandbox.replay import DTYPES, MAX_LAUNCHES
from gpulab.sandbox.replay_source import ReplaySource
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
from gpulab.wire.replay import ReplayBuffer, ReplayLaunch

if TYPE_CHECKING:
    from gpulab.wire.protocol import TensorRef


# What gpulab.judge.kernel's encode has put in the arena: id(tensor) and
# ("storage", data_ptr) -> its ref (here, so the replay needs nothing of kernel).
Refs = dict[int | tuple[str, int], Any]
# What a replay's launches run: the kept text's kernels (CPU), or the
# compiled kernels the records sent, by ident (GPU).
Kernels = ReplaySource | dict[int, KernelBinary]

MAX_GRID = 1 << 24
MAX_BUFFER_BYTES = 4 << 30


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
