"""The replay's second run on g(x) = c·x (gpulab.judge.replay_again): the
bytes a wrapper filled from the inputs, scaled value by value, are the same
bytes the wrapper would have filled from g(x)."""

from __future__ import annotations

import math

import pytest
import torch

from gpulab.judge.replay_again import scale_bytes, scale_case, scale_tensor
from gpulab.judge.replay_bytes import trusted_bytes


def _bytes(t: torch.Tensor) -> bytes:
    return t.contiguous().view(torch.uint8).numpy().tobytes()


def _padded(x: torch.Tensor, fill: float) -> torch.Tensor:
    out = torch.full((x.shape[0] + 1, 16), fill, dtype=x.dtype)
    out[: x.shape[0], : x.shape[1]] = x
    return out


PREPARED = {
    "a copy": lambda x: x.clone(),
    "a cast fp32 -> bf16": lambda x: x.to(torch.bfloat16),
    "a transpose": lambda x: x.t().contiguous(),
    "padding with 0": lambda x: _padded(x, 0.0),
    "padding with -inf": lambda x: _padded(x, -math.inf),
}


@pytest.mark.parametrize("c", [0.5, 2.0, 0.25, 2.0**-16])
@pytest.mark.parametrize("how", sorted(PREPARED))
def test_scaled_bytes_are_what_the_wrapper_makes_of_g_x(how, c):
    x = torch.randn(5, 13, generator=torch.Generator().manual_seed(3))
    make = PREPARED[how]
    prepared = make(x)
    data = _bytes(prepared)
    assert trusted_bytes(data, prepared.dtype, [x])
    assert scale_bytes(data, prepared.dtype, c) == _bytes(make(scale_tensor(x, c)))


def test_integers_bools_and_constants_stay():
    idx = torch.arange(7, dtype=torch.int32)
    assert scale_bytes(_bytes(idx), torch.int32, 2.0) == _bytes(idx)
    mask = torch.tensor([True, False, True])
    assert scale_bytes(_bytes(mask), torch.bool, 2.0) == _bytes(mask)
    specials = torch.tensor([0.0, -0.0, math.inf, -math.inf])
    assert scale_bytes(_bytes(specials), torch.float32, 0.5) == _bytes(specials)


def test_a_view_keeps_its_place_in_the_scaled_storage():
    base = torch.randn(4, 1024)
    x = base[1:, :1000]  # rows with a stride, not at the storage's start
    g = scale_tensor(x, 2.0)
    assert g.stride() == x.stride() and g.storage_offset() == x.storage_offset()
    assert g.untyped_storage().nbytes() == x.untyped_storage().nbytes()
    assert torch.equal(g, x * 2)
    assert torch.equal(scale_tensor(torch.arange(3), 2.0), torch.arange(3))


def test_the_case_on_g_x_scales_float_tensors_only():
    from gpulab.judge.kernel_spec import Case

    x, pos = torch.randn(3, 4), torch.arange(3)
    case = Case("c", (x, pos, 1e-6), torch.float32, kwargs={"w": x})
    g = scale_case(case, 0.5)
    assert torch.equal(g.args[0], x * 0.5) and g.args[1] is pos and g.args[2] == 1e-6
    assert g.kwargs["w"] is g.args[0]  # one tensor stays one tensor
    assert torch.equal(case.args[0], x)  # the judge's x as it was
