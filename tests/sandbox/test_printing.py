"""`print(x)` in a learner's wrapper (issue 48): the sandbox's own tensor
formatting runs no torch maths, so the profiler's audit passes it, while
maths hidden in a learner's own `__repr__` is still seen."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
import torch

from gpulab.sandbox import audit, printing


@pytest.fixture
def gpulab_print(monkeypatch):
    """Tensors print as the sandbox prints them, for this test only."""
    monkeypatch.setattr(torch.Tensor, "__repr__", printing._repr)


TENSORS = [
    torch.randn(3, 7),
    torch.randn(40, 50),  # summarised: edges and "..."
    torch.arange(10),
    torch.tensor(1.5),
    torch.tensor([1.0, 2.0, float("-inf")]),
    torch.randn(2, 3, 4).to(torch.bfloat16),
    torch.randn(3000),
    torch.zeros(0, 3),
    torch.tensor([True, False]),
    torch.randn(4, 5).t(),  # not contiguous
    torch.tensor([1e-8, 1.0]),
    torch.randn(2, 2, requires_grad=True),
]


def _spaces(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_print_in_a_wrapper_runs_no_torch_maths(gpulab_print, capsys):
    x, one = torch.randn(4, 100), torch.randn(1, 1)
    with audit.Audit("cpu") as watched:
        print(x)
        print(f"{x} {x[0]}", *TENSORS)
        str(one)
    assert watched.findings(set()) == []
    assert "tensor([[" in capsys.readouterr().out
    # torch's own formatting, as before the fix: the audit's "cheat" (aten::abs...).
    with audit.Audit("cpu") as watched:
        printing._ORIGINAL_REPR(x)
    assert watched.findings(set()), "torch's formatter runs maths: the control must fail"


def test_it_prints_what_torch_prints():
    for t in TENSORS:
        ours, torchs = printing.tensor_text(t), printing._ORIGINAL_REPR(t)
        assert _spaces(ours) == _spaces(torchs), (ours, torchs)


def test_maths_in_a_learners_own_repr_is_still_caught(gpulab_print):
    x = torch.randn(2, 3)

    class Mine:
        def __repr__(self) -> str:
            return repr(torch.softmax(x, dim=-1))  # the answer, computed while "printing"

    class Sub(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            torch.exp(x)  # maths inside a subclass's hook: printed by torch's formatter
            return super().__torch_function__(func, types, args, kwargs or {})

    with audit.Audit("cpu") as watched:
        print(Mine())
    assert "torch's aten::_softmax" in watched.findings(set())
    with audit.Audit("cpu") as watched:
        print(x.as_subclass(Sub))
    assert watched.findings(set())


def _event(name, at, device=torch.autograd.DeviceType.CPU):
    span = SimpleNamespace(start=at[0], end=at[1])
    return SimpleNamespace(
        name=name, device_type=device, cpu_parent=None, input_shapes=[], time_range=span
    )


def test_on_a_gpu_a_prints_copies_to_the_host_pass_the_audit():
    dtoh = "Memcpy DtoH (Device -> Pageable)"
    cuda = torch.autograd.DeviceType.CUDA
    a = audit.Audit("cuda")
    a._printed_before = audit._printed - 1  # gpulab opened one print range
    inside = [_event(audit._PRINT, (0, 10)), _event(dtoh, (2, 3), cuda)]
    assert a.findings_in(inside, set()) == []
    a.events = inside
    assert a.findings(set()) == []
    outside = [_event(audit._PRINT, (0, 10)), _event(dtoh, (12, 13), cuda)]
    assert a.findings_in(outside, set()) == ["a device-to-host copy (maths on the CPU?)"]
    # A range of the print's name that gpulab did not open is a learner's.
    a.events = [_event(audit._PRINT, (0, 10)), *inside]
    assert a.findings(set()) == [audit.IMITATED]


def test_a_print_from_the_gpu_has_a_budget(monkeypatch):
    monkeypatch.setattr(printing, "_copied", printing.PRINT_VALUES - 5)

    class Cuda:  # only the device is read before the budget refuses
        shape = (100,)
        device = torch.device("cuda", 0)

    assert printing._read(Cuda(), (100,), False, 3) is None
    assert "at most" in printing._why_not()
