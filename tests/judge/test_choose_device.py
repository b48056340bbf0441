"""Which device a check runs on, asked without torch where NVML already knows.

On a machine with no NVIDIA driver the judge answers "cpu" from NVML, so the
sandbox starts before the judge spends 2-3 s importing torch."""

from __future__ import annotations

import os
import sys

import pynvml
import pytest

from gpulab.judge.prepared import choose_device


def _nvml_raises(monkeypatch: pytest.MonkeyPatch, error: type[Exception]) -> None:
    def refuse() -> None:
        raise error()

    monkeypatch.setattr(pynvml, "nvmlInit", refuse)
    _driver_folder(monkeypatch, False)


def _driver_folder(monkeypatch: pytest.MonkeyPatch, present: bool) -> None:
    real = os.path.isdir
    monkeypatch.setattr(
        os.path, "isdir", lambda p: present if p == "/proc/driver/nvidia" else real(p)
    )


@pytest.mark.parametrize("name", ["NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded"])
def test_no_driver_is_the_cpu_without_importing_torch(monkeypatch, name):
    _nvml_raises(monkeypatch, getattr(pynvml, name))
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` would raise
    assert choose_device("auto") == "cpu"


def test_any_other_nvml_answer_leaves_the_choice_to_torch(monkeypatch):
    _nvml_raises(monkeypatch, pynvml.NVMLError_NoPermission)
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError):
        choose_device("auto")


def test_a_gpu_asked_for_is_always_asked_of_torch(monkeypatch):
    _nvml_raises(monkeypatch, pynvml.NVMLError_LibraryNotFound)
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError):
        choose_device("cuda")
    assert choose_device("cpu") == "cpu"


def test_a_loaded_driver_is_asked_of_torch_without_starting_nvml(monkeypatch):
    def never() -> None:
        raise AssertionError("NVML started")

    monkeypatch.setattr(pynvml, "nvmlInit", never)
    _driver_folder(monkeypatch, True)
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError):  # torch asked
        choose_device("auto")
