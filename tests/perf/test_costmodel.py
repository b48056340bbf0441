"""The cost model (issue 48): exact counts on simple kernels in Triton's
interpreter (a copy, a strided copy, a masked tail, a tl.dot tile), the
estimate made of them, the load map's picture of an off-by-one mask, and a
result's `cost` and `load_map` read back from hostile JSON."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

KERNELS = """
import triton
import triton.language as tl


@triton.jit
def copy(x_ptr, y_ptr, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs * STRIDE, mask=mask) * 2.0, mask=mask)


@triton.jit
def off_by_one(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n - 1  # the last element is never stored
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def past_the_end(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs <= n  # one lane too many: reads x[n]
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=offs < n)


@triton.jit
def tile_2d(x_ptr, y_ptr, stride, T: tl.constexpr):
    # Programs (i, j) copy T x T tiles; `stride` is the row stride it is given.
    rows = tl.program_id(0) * T + tl.arange(0, T)
    cols = tl.program_id(1) * T + tl.arange(0, T)
    offs = rows[:, None] * stride + cols[None, :]
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def dot_tile(a_ptr, b_ptr, c_ptr, M: tl.constexpr):
    r = tl.arange(0, M)
    a = tl.load(a_ptr + r[:, None] * M + r[None, :])
    b = tl.load(b_ptr + r[:, None] * M + r[None, :])
    tl.store(c_ptr + r[:, None] * M + r[None, :], tl.dot(a, b))
"""


@pytest.fixture
def kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # read as each kernel is decorated
    path = tmp_path / "cost_kernels.py"
    path.write_text(KERNELS, "utf-8")
    spec = importlib.util.spec_from_file_location("cost_kernels", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _launch(grid: tuple[int, ...], kernel: Any, *args: Any, maps: bool = False, **kw: Any) -> dict:
    from gpulab.sandbox.counting import counting

    with counting(maps=maps) as counts:
        kernel[grid](*args, **kw)
    (launch,) = counts.to_json()["launches"]
    return launch


def _tensor(launch: dict, name: str) -> dict:
    return next(t for t in launch["tensors"] if t["name"] == name)


def test_a_copy_and_its_masked_tail_move_exactly_their_bytes(kernels: Any) -> None:
    import torch

    n = 1000  # 4 programs of 256 lanes: 24 lanes of the last one masked
    x, y = torch.randn(n), torch.empty(n)
    la = _launch((4,), kernels.copy, x, y, n, STRIDE=1, BLOCK=256)
    assert la["programs"] == 4 and la["grid"] == [4, 1, 1]
    loads, stores = _tensor(la, "x_ptr")["loads"], _tensor(la, "y_ptr")["stores"]
    for acc in (loads, stores):
        assert acc["lanes"] == n and acc["masked_lanes"] == 24 and acc["accesses"] == 4
        # Masked lanes move nothing: 4000 bytes, 125 sectors, each once.
        assert acc["bytes"] == acc["sector_bytes"] == acc["footprint_bytes"] == 4 * n
        assert acc["warp_sector_bytes"] == acc["min_sector_bytes"] == 4 * n
    assert _tensor(la, "x_ptr")["stores"]["lanes"] == 0
    assert la["flops"] == 4 * 256  # the multiply by 2.0, on every lane of the block


def test_a_strided_copy_touches_twice_the_sectors_it_needs(kernels: Any) -> None:
    import torch

    n = 1024
    x, y = torch.randn(2 * n), torch.empty(n)
    la = _launch((4,), kernels.copy, x, y, n, STRIDE=2, BLOCK=256)
    loads = _tensor(la, "x_ptr")["loads"]
    assert loads["bytes"] == 4 * n  # what was asked for
    assert loads["sector_bytes"] == loads["footprint_bytes"] == 8 * n  # what moves
    assert loads["warp_sector_bytes"] == 2 * loads["min_sector_bytes"]  # coalescing: 2x


def test_a_dot_tile_counts_2mnk(kernels: Any) -> None:
    import torch

    a, b, c = torch.randn(32, 32), torch.randn(32, 32), torch.empty(32, 32)
    la = _launch((1,), kernels.dot_tile, a, b, c, M=32)
    assert la["dot_flops"] == 2 * 32 * 32 * 32
    assert la["dots"] == [[32, 32, 32]]
    assert _tensor(la, "a_ptr")["loads"]["sector_bytes"] == 32 * 32 * 4


def test_the_estimate_of_a_strided_copy_on_a_datasheet_gpu() -> None:
    from gpulab.gpu import costmodel, hardware

    gpu = hardware.GPUS["h100-sxm"]
    n = 1 << 20
    counts = {
        "launches": [
            {
                "kernel": "copy",
                "programs": 4096,
                "flops": n,
                "tensors": [
                    {"name": "x", "loads": {"sector_bytes": 8 * n, "footprint_bytes": 8 * n}},
                    {"name": "y", "stores": {"sector_bytes": 4 * n, "footprint_bytes": 4 * n}},
                ],
            }
        ]
    }
    cost = costmodel.estimate(
        counts, case="N", dtype="fp32", minimum_bytes=8 * n, minimum_flops=n, gpu=gpu
    )
    assert cost is not None
    assert cost["ratio"] == pytest.approx(1.5)
    assert cost["best_fraction"] == pytest.approx(1 / 1.5)
    assert cost["bound"] == "bandwidth"
    line = costmodel.headline(costmodel.read({"cost": cost}) or {})
    assert line.startswith("moves 1.5x the minimum bytes: at best 67% of the H100 SXM's")
    # A fixed grid of 66 programs on 132 SMs halves what it can reach.
    half = costmodel.estimate(
        {"launches": [{**counts["launches"][0], "programs": 66}]},
        case="N",
        dtype="fp32",
        minimum_bytes=8 * n,
        minimum_flops=n,
        gpu=gpu,
        fixed_grid=True,
    )
    assert half is not None and half["best_fraction"] == pytest.approx(0.5 / 1.5)


def test_an_off_by_one_mask_is_drawn_masked_where_the_store_never_went(kernels: Any) -> None:
    import torch
    from rich.console import Console

    from gpulab.gpu import loadmap

    n = 100
    x, y = torch.randn(n), torch.full((n,), float("nan"))
    la = _launch((2,), kernels.off_by_one, x, y, n, BLOCK=64, maps=True)
    data = {
        "load_map": {"case": "N=100", "number": 1, "counts": {"launches": [la]}, "wrong": [[99]]}
    }
    found = loadmap.read(data)
    assert found is not None
    y_map = _tensor(la, "y_ptr")["map"]
    assert y_map["stored"][:64] == [0] * 64 and y_map["stored"][64:99] == [1] * 35
    assert y_map["stored"][99] == -1 and y_map["masked"][99] == "s"
    console = Console(width=80, record=True, color_system=None)
    console.print(loadmap.renderable(data))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    # 64 to a row: element 64 starts row 64; the last row ends in the masked 99.
    assert "    64  " + "1" * 35 + "-" in text
    assert "never stored, a masked lane pointed there: [99]" in text


def test_a_lane_past_the_end_is_listed_with_its_program(kernels: Any) -> None:
    import torch
    from rich.console import Console

    from gpulab.gpu import loadmap

    n = 100
    base = torch.randn(2 * n)
    x, y = base[:n], torch.empty(n)  # x[n] exists in memory (base[n]): no crash
    la = _launch((2,), kernels.past_the_end, x, y, n, BLOCK=64, maps=True)
    loads = _tensor(la, "x_ptr")["loads"]
    assert loads["out_of_range_lanes"] == 1 and loads["out_of_range"] == [[1, 100]]
    console = Console(width=80, record=True, color_system=None)
    console.print(loadmap.renderable({"load_map": {"counts": {"launches": [la]}}}))
    assert "program 1 loaded element 100 of x_ptr, past its end (100 elements)" in (
        console.export_text()
    )


@pytest.mark.parametrize(
    "rest",
    [
        {"cost": {"ratio": "2", "best_fraction": 0.5}},
        {"cost": {"ratio": float("nan"), "footprint_ratio": 1, "coalescing": 1}},
        {"cost": []},
        {"load_map": {"counts": {"launches": [{"tensors": [{"shape": [2, 2], "elements": 5}]}]}}},
        {"load_map": {"counts": {"launches": "x"}}},
    ],
)
def test_malformed_advice_is_not_drawn(rest: dict) -> None:
    from gpulab.gpu import costmodel, loadmap

    assert costmodel.read(rest) is None
    drawn = loadmap.read(rest)
    assert drawn is None or all(not la["tensors"] for la in drawn["launches"])


def test_a_wrong_row_stride_is_seen_program_by_program(kernels: Any) -> None:
    """The issue-47 puzzles' view: trace_launch gives per program the
    elements it touched, and the 2-D picture shows the rows it missed."""
    import torch
    from rich.console import Console

    from gpulab.gpu import loadmap
    from gpulab.sandbox.counting import trace_launch

    x, y = torch.randn(8, 8), torch.zeros(8, 8)
    # Right: stride 8. Wrong: the tile's width, 4. Program (i, j), linear id
    # i + 2j, reads the 16 elements from 16i + 4j on: the tiles overlap.
    la = trace_launch(kernels.tile_2d, (2, 2), x, y, 4, T=4)
    programs = _tensor(la, "x_ptr")["map"]["programs"]
    assert programs["0"]["loaded"] == list(range(16))
    assert programs["3"]["loaded"] == list(range(20, 36))
    console = Console(width=80, record=True, color_system=None)
    console.print(loadmap.launch_renderable(la))
    text = console.export_text()
    # A row of the tensor a line: rows 1-3 read by several programs, 5-7 by none.
    assert "   0  0000++++" in text and "   3  ++++++++" in text
    assert "   4  3333...." in text and "   7  ........" in text
    assert "x_ptr: 36 of 64 elements loaded" in text


def test_a_count_that_fails_leaves_the_kernel_to_run(kernels: Any, monkeypatch) -> None:
    """The replay that carries the count is a verdict's: counting stops, the
    kernel runs on, and the judge makes no estimate of a partial count."""
    import torch

    from gpulab.judge.cost import cost_of
    from gpulab.sandbox import costcount, counting

    def broken(*args: Any) -> None:
        raise ValueError("a pointer the counter did not expect")

    monkeypatch.setattr(costcount.Counts, "access", broken)
    x, y = torch.randn(300), torch.empty(300)
    with counting.counting() as counts:
        kernels.copy[(2,)](x, y, 300, STRIDE=1, BLOCK=256)
    assert torch.equal(y, x * 2.0)
    found = counts.to_json()
    assert found["problem"].startswith("ValueError: a pointer the counter")

    class Case:
        sizes, dtype, name = {"N": 300}, torch.float32, "N=300"

    class Request:
        bytes, flops, explain_gpu, gpu_setting, exercise = "3*N*elt", "2*N", None, None, "x"

    assert cost_of(Request(), [(Case(), found)]) is None  # type: ignore[arg-type]


def test_masked_lanes_belong_to_the_tensor_their_access_reads(kernels: Any) -> None:
    """x and out as views of one buffer (the triad's are): x's masked tail
    points at out's first elements, and stays x's."""
    import torch

    base = torch.zeros(2, 100)
    x, out = base[0], base[1]
    la = _launch((2,), kernels.off_by_one, x, out, 100, BLOCK=64, maps=True)
    x_map, out_t = _tensor(la, "x_ptr")["map"], _tensor(la, "y_ptr")
    assert x_map["masked"][99] == "l" and x_map["loaded"][99] == -1
    assert out_t["loads"]["masked_lanes"] == 0 and "l" not in out_t["map"]["masked"]
    assert _tensor(la, "x_ptr")["loads"]["masked_lanes"] == 2 * 64 - 99


def test_a_little_over_one_sector_ratio_is_not_called_poor_coalescing():
    # A correct triad read 1.1x (partial sectors at the blocks' edges) and was
    # told its accesses "coalesce poorly": a stride costs 2x to 8x.
    from gpulab.gpu.costmodel import details

    def said(coalescing: float) -> str:
        cost = {
            "case": "N=70001 fp32",
            "bytes": 840_012,
            "minimum_bytes": 840_012,
            "footprint_ratio": 1.0,
            "coalescing": coalescing,
        }
        return next(line for line in details(cost) if "coalesce" in line)

    assert "poorly" not in said(1.1) and "edges" in said(1.1)
    assert "poorly" not in said(1.0)
    assert "poorly" in said(2.0)
