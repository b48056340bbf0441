"""Which recorded bytes the replay keeps (gpulab.judge.replay_plan): those
whose every value is a value of an input (a copy, a cast, a transpose or
padding of one) or integers that count up evenly (an arange); and, for two
draws of one shape, whether the second's bytes moved its inputs' values as
the first's did (gpulab.judge.two_draws)."""

from __future__ import annotations

import math

import torch


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
