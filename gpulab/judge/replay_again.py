"""The replay's second run: the same launches on inputs only the judge has.

A replay on the judge's copy of the inputs x still starts from the
record's launch numbers and from the bytes the wrapper filled, so an answer
the wrapper worked out in Python from x can ride on them: as scalar
arguments a kernel only stores (on a shape drawn once nothing compares a
case's launches with another draw's), or spelt in input values that occur
more than once (a cast to bf16 repeats most of them), which the replay
keeps as "a copy of the input". So each passing case runs a second time on
g(x) = c·x, every floating-point input times c, a power of two the judge
draws from its secret seed. A power of two commutes exactly with copies,
casts between float formats, transposes and padding, and keeps 0, ±inf,
sign and order; so an honest wrapper's launches (numbers from the shapes),
its constant fills, and the input values it filled buffers with, each
times c, compute the reference of g(x). Numbers worked out from x give x's
answer there, which is not g(x)'s.
"""

from __future__ import annotations

import base64
import dataclasses
import random
from typing import Any

import torch

# Inputs shrunk, never grown: one or two exponent steps down keep fp16 and
# bf16 inputs far from subnormals, and an honest kernel's rounding error
# shrinks with them. Grown, they broke honest kernels: attention's scores
# grow as c squared, and an honest fp32 FlashAttention on a "large scores"
# case missed the tolerance at c = 2 (max rel err 0.0019).
SCALES = (0.5, 0.25)
# Tried in turn where the drawn c leaves a case's answer as it was (within
# the tolerance): an answer that saturates (softmax of values 1e4 apart is
# one-hot at 0.5 and 0.25) changes once its inputs shrink enough. The
# reference is computed on g(x) as the judge stores it, the bytes the
# kernels read, so a c that rounds small fp16 values costs an honest
# kernel nothing.
OTHER_SCALES = (*SCALES, 2.0**-4, 2.0**-8, 2.0**-12, 2.0**-16)

AGAIN_MISMATCH = (
    "your Triton kernels, run again alone on other inputs of gpulab's, did not give "
    "those inputs' answer"
)
INVARIANT_NOTE = (
    "The replay on other inputs of gpulab's (the inputs times a power of two) has the "
    "same answer as on yours for {cases}, so it tells nothing there: only the replay "
    "on your inputs judged those cases."
)


def draw_scale(seed: int, name: str) -> float:
    """The case's c, from the judge's secret seed (never sent anywhere)."""
    return random.Random(f"gpulab-replay/{seed}/{name}").choice(SCALES)


def scale_tensor(t: torch.Tensor, c: float) -> torch.Tensor:
    """`t` times c, its whole storage scaled so views, strides and padding
    stay where they were (the replay hands kernels the whole storage).
    Integers and bools stay as they are: indices and masks come from shapes."""
    if not t.dtype.is_floating_point:
        return t
    raw = torch.empty(0, dtype=torch.uint8, device=t.device)
    raw = raw.set_(t.detach().untyped_storage()).clone()
    whole = raw[: raw.numel() - raw.numel() % t.element_size()].view(t.dtype).mul_(c)
    return torch.as_strided(whole, tuple(t.shape), tuple(t.stride()), t.storage_offset())


def scale_args(obj: Any, c: float, seen: dict[int, torch.Tensor]) -> Any:
    """A case's arguments with every float tensor times c (`seen`: views of
    one storage stay views of one storage)."""
    if isinstance(obj, torch.Tensor):
        key = id(obj)
        if key not in seen:
            seen[key] = scale_tensor(obj, c)
        return seen[key]
    if isinstance(obj, tuple):
        return tuple(scale_args(v, c, seen) for v in obj)
    if isinstance(obj, list):
        return [scale_args(v, c, seen) for v in obj]
    if isinstance(obj, dict):
        return {k: scale_args(v, c, seen) for k, v in obj.items()}
    return obj  # numbers (eps, alpha, a softmax scale) are the exercise's settings


def scale_case(case: Any, c: float) -> Any:
    """The case on g(x): its reference is what the second run must give."""
    seen: dict[int, torch.Tensor] = {}
    return dataclasses.replace(
        case, args=scale_args(case.args, c, seen), kwargs=scale_args(case.kwargs, c, seen)
    )


def scale_bytes(data: bytes, dtype: torch.dtype, c: float) -> bytes:
    """Recorded bytes the replay trusts (every value an input's, or 0 or
    ±inf) as they are for g(x): each value times c in `dtype` (0, ±inf and
    NaN stay). Exact for a power of two, so a copy, a cast, a transpose or
    padding of x becomes the same of g(x)."""
    if not dtype.is_floating_point or len(data) % dtype.itemsize:
        return data
    values = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype)
    return bytes(values.mul(c).view(torch.uint8).numpy().tobytes())


def scale_data(data: str, dtype: torch.dtype, c: float) -> str:
    """scale_bytes on a ReplayBuffer's base64 bytes."""
    raw = base64.b64decode(data)
    return base64.b64encode(scale_bytes(raw, dtype, c)).decode("ascii")
