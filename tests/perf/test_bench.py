"""`gpulab bench`: a clear refusal without a GPU; a real run on one."""

from __future__ import annotations

import json

import pytest

from tests.conftest import cuda_available


def test_bench_without_gpu_exits_2_with_one_line(run_gpulab):
    if cuda_available():
        pytest.skip("this machine has a GPU")
    r = run_gpulab("bench", "softmax")
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "GPU" in r.stderr


def test_bench_rejects_unknown_kernels(run_gpulab):
    r = run_gpulab("bench", "nope")
    assert r.returncode == 2 and "unknown kernel" in r.stderr


@pytest.mark.gpu
def test_bench_softmax_on_a_gpu(run_gpulab, tmp_path):
    out = tmp_path / "bench.json"
    r = run_gpulab("bench", "softmax", "--json", str(out), timeout=600)
    assert r.returncode == 0, r.stderr
    report = json.loads(out.read_text())
    assert {"device", "date", "torch", "triton", "results"} <= set(report)
    row = report["results"][0]
    assert {
        "kernel",
        "shape",
        "dtype",
        "ms",
        "baseline",
        "baseline_ms",
        "speedup",
        "roofline_fraction",
    } <= set(row)
    assert row["kernel"] == "softmax"
    assert abs(row["speedup"] - row["baseline_ms"] / row["ms"]) < 1e-9
    assert 0 < row["roofline_fraction"] < 1.1


def test_rounds_must_be_positive(run_gpulab):
    r = run_gpulab("bench", "softmax", "--rounds", "0")
    assert r.returncode == 2 and "--rounds" in r.stderr


def test_side_by_side_rotates_the_order_and_takes_medians():
    """Timed in rounds with the order rotating, so a drift lands on every
    side alike: here the 'GPU' slows steadily, 0.1 ms per measurement, and
    the side timed last in a plain A-then-B order looks 9% slower than the
    other for nothing."""
    from gpulab.targets.bench import side_by_side

    order, clock = [], [1.0]

    def measure_one(fn, first):
        order.append((fn(), first))
        clock[0] += 0.1
        return {"ms": clock[0], "p20_ms": 0.0, "tag": fn()}

    fns = {"ours": lambda: "ours", "base": lambda: "base"}
    one = side_by_side(fns, measure_one, rounds=1)
    assert order == [("ours", True), ("base", False)]  # the plain order
    assert one["base"]["ms"] / one["ours"]["ms"] == pytest.approx(1.2 / 1.1)

    order.clear()
    clock[0] = 1.0
    four = side_by_side(fns, measure_one, rounds=4)
    assert [n for n, _ in order] == ["ours", "base", "base", "ours", "ours", "base", "base", "ours"]
    assert four["ours"]["rounds_ms"] == pytest.approx([1.1, 1.4, 1.5, 1.8])
    # Medians of rounds that saw the same drift: the two sides come out equal.
    assert four["base"]["ms"] / four["ours"]["ms"] == pytest.approx(1.0)
    assert four["ours"]["tag"] == "ours" and "rounds_ms" in four["base"]
