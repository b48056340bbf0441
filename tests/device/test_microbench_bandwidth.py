"""The bandwidth microbenchmark (microbench_measure.bench_bandwidth) on the CPU,
in this process: buffers on the CPU, the Triton kernels replaced by torch
stand-ins, `measure` and CUDA's synchronize/empty_cache by stand-ins that
write to one trace with the events emitted. Pinned: the order of steps,
measurements, synchronizations and checks; the rows' numbers; the notes of a
wrong or failing method; the buffers freed before the cache is emptied.
The dry run in test_microbench runs the real kernels (interpreter); the
GPU run is test_microbench's test_quick_bench_on_gpu."""

from __future__ import annotations

import weakref

import pytest
import torch

from gpulab.measure import microbench_kernels as K
from gpulab.measure import microbench_measure as mm
from gpulab.measure import timing

N = 5000  # float32 elements: 20000 bytes, 5 partial sums of 1024
NBYTES = 4 * N


@pytest.fixture
def bench(monkeypatch):
    trace: list[tuple] = []
    buffers: list[weakref.ref] = []

    def run(wrong_fill=False, read_fails=False):
        def copy(dst, src, block, warps):
            buffers.extend([weakref.ref(dst), weakref.ref(src)])
            trace.append(("copy", block, warps))
            dst.copy_(src)

        def read(src, partial, block, warps):
            buffers.append(weakref.ref(partial))
            trace.append(("read", block, warps))
            if read_fails:
                raise RuntimeError("no read")
            nb = -(-src.numel() // block)
            partial[:nb] = torch.stack([src[i * block : (i + 1) * block].sum() for i in range(nb)])

        def fill(dst, value, block, warps):
            trace.append(("fill", block, warps))
            dst.fill_(0.0 if wrong_fill else value)

        times = iter(float(i) for i in range(1, 20))

        def measure(fn, flusher, budget_s):
            assert flusher == "flusher" and budget_s == 0.25
            fn()
            ms = next(times)
            trace.append(("measure", ms))
            return {"ms": ms, "min_ms": ms / 2, "p20_ms": ms, "p80_ms": ms, "reps": 7}

        def empty_cache():
            # The buffers are gone by then: the next stage gets their memory.
            trace.append(("empty_cache", bool(buffers) and all(r() is None for r in buffers)))

        monkeypatch.setattr(mm, "DEVICE", "cpu")
        monkeypatch.setattr(mm, "emit", lambda e: trace.append(("emit", e)))
        monkeypatch.setattr(K, "copy", copy)
        monkeypatch.setattr(K, "read", read)
        monkeypatch.setattr(K, "fill", fill)
        monkeypatch.setattr(timing, "measure", measure)
        monkeypatch.setattr(torch.cuda, "synchronize", lambda: trace.append(("sync",)))
        monkeypatch.setattr(torch.cuda, "empty_cache", empty_cache)
        steps = mm.Steps(9)
        rows = mm.bench_bandwidth(torch, steps, NBYTES, "flusher", 0.25)
        return rows, trace

    return run


def _progress(done: int, label: str) -> tuple:
    return ("emit", {"type": "progress", "done": done, "total": 9, "label": label})


def _row(kind: str, method: str, ms: float, moves: int) -> dict:
    return {
        "group": "bandwidth",
        "name": kind,
        "method": method,
        "ms": ms,
        "min_ms": ms / 2,
        "p20_ms": ms,
        "p80_ms": ms,
        "reps": 7,
        "clocks": {},
        "buffer_bytes": NBYTES,
        "bytes": moves * NBYTES,
        "counted": "read + write" if moves == 2 else kind,
        "tbs": moves * NBYTES / (ms * 1e-3) / 1e12,
    }


METHODS = [
    ("copy", "torch: dst.copy_(src)", 2, None),
    ("copy", "triton: copy_kernel BLOCK=512 warps=4", 2, ("copy", 512, 4)),
    ("copy", "triton: copy_kernel BLOCK=4096 warps=4", 2, ("copy", 4096, 4)),
    ("copy", "triton: copy_kernel BLOCK=8192 warps=8", 2, ("copy", 8192, 8)),
    ("read", "torch: torch.sum(x)", 1, None),
    ("read", "triton: read_kernel BLOCK=4096 warps=4", 1, ("read", 4096, 4)),
    ("read", "triton: read_kernel BLOCK=8192 warps=8", 1, ("read", 8192, 8)),
    ("write", "torch: x.fill_(v)", 1, None),
    ("write", "triton: fill_kernel BLOCK=4096 warps=4", 1, ("fill", 4096, 4)),
]


def test_each_method_measured_run_again_synchronized_checked_then_a_row(bench):
    rows, trace = bench()
    want = []
    for i, (kind, method, moves, call) in enumerate(METHODS):
        label = f"{kind} {mm.size_label(NBYTES)} ({method.split(':')[0]})"
        launch = [call] if call else []
        row = _row(kind, method, float(i + 1), moves)
        want += [_progress(i, label), *launch, ("measure", float(i + 1)), *launch, ("sync",)]
        want.append(("emit", {"type": "row", **row}))
        assert rows[i] == row
    assert trace == [*want, ("empty_cache", True)]
    assert len(rows) == 9


def test_a_wrong_result_and_a_failing_method_are_left_out_with_notes(bench):
    rows, trace = bench(wrong_fill=True, read_fails=True)
    notes = [e["text"] for kind, e in (t for t in trace if t[0] == "emit") if e["type"] == "note"]
    assert notes == [
        "read via triton: read_kernel BLOCK=4096 warps=4 failed: no read",
        "read via triton: read_kernel BLOCK=8192 warps=8 failed: no read",
        "write via triton: fill_kernel BLOCK=4096 warps=4 gave a wrong result; left out",
    ]
    assert [r["method"] for r in rows] == [m for _, m, _, _ in METHODS[:5]] + [METHODS[7][1]]
    # The failing reads failed inside `measure`; the wrong fill was measured (7 ms).
    assert [r["ms"] for r in rows] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert trace[-1] == ("empty_cache", True)


@pytest.mark.parametrize("chunk", [3, 4, 2**26])
def test_the_reads_expected_sum_is_float64_chunk_by_chunk(chunk):
    # 2**24 + 1 is not a float32: a float32 sum would lose the ones.
    src = torch.tensor([2.0**24] + [1.0] * 9)
    assert mm._float64_sum(src, src.numel(), chunk) == 2**24 + 9
    assert float(src.sum()) != 2**24 + 9
