"""A check asks the GPU only for what it has (issue 19): bf16 needs cc 8.0."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from gpulab.judge import capability


@dataclass
class Ctx:
    device: str = "cuda"
    skipped: list = field(default_factory=list)
    notes: list = field(default_factory=list)


@pytest.fixture
def turing(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (7, 5))


@pytest.fixture
def hopper(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))


def test_a_t4_skips_bf16_cases_once_and_times_fp16(turing):
    ctx = Ctx()
    assert capability.skip_for_device(ctx) == {"bf16"}
    assert capability.skip_for_device(ctx) == {"bf16"}
    assert len(ctx.skipped) == 1 and "7.5" in ctx.skipped[0]
    assert capability.timed_dtype(ctx, "bf16") == "fp16"
    assert capability.timed_dtype(ctx, "fp32") == "fp32"
    assert len(ctx.notes) == 1 and "fp16" in ctx.notes[0]


def test_hopper_and_the_cpu_keep_bf16(hopper):
    for ctx in (Ctx(), Ctx(device="cpu")):
        assert capability.skip_for_device(ctx) == set()
        assert capability.timed_dtype(ctx, "bf16") == "bf16"
        assert not ctx.skipped and not ctx.notes
