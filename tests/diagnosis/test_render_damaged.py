"""A result read back from the workspace may have been edited or damaged:
its Explain section still renders, leaving out what is of the wrong type."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from gpulab.explain.render import explain_renderable

GOOD_KERNEL = {"name": "softmax_kernel", "dram_bytes": 2**20, "seconds": 1e-5,
               "stalls": [{"reason": "long_scoreboard", "share": 0.5}]}  # fmt: skip


def _text(result: dict[str, object]) -> str:
    out = io.StringIO()
    Console(file=out, width=120).print(explain_renderable(result))
    return out.getvalue()


@pytest.mark.parametrize(
    "explain",
    [
        "not an object",
        {"nsight": {"measured": True, "ratio": "2", "kernels": [{"stalls": None}]}},
        {"nsight": {"measured": True, "kernels": [{"name": 3, "stalls": ["x", {"share": "a"}]}]}},
        {"nsight": {"measured": True, "kernels": "k"}, "compile_errors": ["x", 1]},
        {"compile_errors": {"kernel": "k"}, "basis": "one", "nsight": []},
    ],
)
def test_a_damaged_explain_section_renders_without_a_crash(explain: object) -> None:
    text = _text({"diagnosis": ["not a finding", {"kind": "spills"}], "explain": explain})
    assert "Explain: what limits this kernel" in text
    assert "spills" in text


def test_a_whole_nsight_section_still_reads() -> None:
    nsight = {"measured": True, "case": 2, "dram_bytes": 2**21, "ratio": 1.5,
              "minimum_bytes": 2**20, "gpu_seconds": 2e-5, "kernels": [GOOD_KERNEL]}  # fmt: skip
    text = _text({"diagnosis": [], "explain": {"nsight": nsight}})
    assert "Nsight Compute, case 2: 2.0 MiB DRAM (1.50× the minimum 1.0 MiB), 20.0 µs" in text
    assert "softmax_kernel: 1.0 MiB, 10.0 µs; warps stalled on long scoreboard 50%" in text
