"""Lesson 05's extra timing (gpulab.judge.rope_timing) on the CPU.

On a GPU, torch.compile's forward and backward are timed beside the
learner's backward in the judge's batches. Here the device's calls (the
timing lock, the flush, `measure`, the judge's batches, the ceilings) are
stand-ins that write to one trace, so what runs in which order, the rows
added, the summary and the notes are pinned. The real path runs on the H200
(tests/judge/test_rope_rmsnorm.py)."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest
import torch

from gpulab.gpu import ceilings, gpulock
from gpulab.judge import batches, rope_timing
from gpulab.judge.harness import GradeFailed
from gpulab.judge.kernel_spec import Case
from gpulab.judge.timed_rows import KernelRow, KernelTiming, RemoteTiming
from gpulab.measure import timing
from gpulab.sandbox import learner

GB = 1e9


def _case(i: int) -> tuple[Case, torch.Tensor, None]:
    B, S, H, D = 1, 4, 2, 8
    x = torch.randn(B, S, H, D)
    args = (x, torch.randn(D), torch.randn(S, D // 2), torch.randn(S, D // 2))
    case = Case(name=f"case{i}", args=args, dtype=torch.bfloat16, sizes={"S": S}, shape=f"s{i}")
    return case, torch.randn(B, S, H, D), None


def _timed(ms: float, implausible: str | None = None) -> RemoteTiming:
    """What the judge's batches give, reduced to a median."""
    return RemoteTiming(
        stats={"ms": ms},
        clocks={},
        batch_reps=4,
        judge_flush_ms=0.0,
        judge_copy_ms=0.0,
        batches=[],
        implausible=implausible,
    )


def _forward_row(i: int) -> KernelRow:
    return KernelRow(
        name=f"case{i}",
        shape=f"s{i}",
        dtype="bf16",
        timed=_timed(0.2),
        flops=None,
        bytes=None,
        kind="memory",
        sizes={"S": 4},
        intensity=None,
        baseline_ms=0.4,
        baseline="eager chain",
        speedup=2.0,
    )


def _forward_timing() -> KernelTiming:
    return KernelTiming(
        cases=[_forward_row(0), _forward_row(1)],
        grade="A",
        roofline_fraction=0.5,
        speedup=2.0,
        baseline="eager chain",
        throughput=1.0,
        unit="GB/s",
        ms=0.2,
        summary="A: 2.00x eager",
        implausible=None,
        device="Fake GPU",
    )


@pytest.fixture
def run(monkeypatch):
    trace: list[tuple] = []

    @contextlib.contextmanager
    def lock(what, gpu, on_wait):
        trace.append(("lock", what, gpu))
        yield
        trace.append(("unlock",))

    def compile_(chain, dynamic):
        assert dynamic is False

        def compiled(*a):
            trace.append(("compiled", a[0].requires_grad))
            return chain(*a)

        return compiled

    def run_(backward_ms, compile_ms=(0.1, 0.1), back_compile_ms=(0.5, 0.5), peak=1e12):
        """Two cases; `backward_ms[i]`: the learner's backward's time, or an
        exception the judge's batches raise, or "implausible"."""
        fwd_ms, bwd_ms = iter(compile_ms), iter(back_compile_ms)

        def measure(fn, flusher, log_clocks):
            assert flusher == "flusher" and log_clocks is False
            kind = "grad" if isinstance(fn(), tuple) else "fwd"  # autograd.grad: a tuple
            trace.append(("measure", kind))
            return {"ms": next(fwd_ms if kind == "fwd" else bwd_ms)}

        answers = iter(backward_ms)

        def time_remote(ctx, spec, fn, case, flusher, backward):
            trace.append(("time_remote", case.name, backward))
            a = next(answers)
            if isinstance(a, BaseException):
                raise a
            if a == "implausible":
                return _timed(1.0, "too fast")
            return _timed(a)

        monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: "Fake GPU")
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch, "compile", compile_)
        monkeypatch.setattr(ceilings, "floor_peaks", lambda name: (peak, {}))
        monkeypatch.setattr(ceilings, "ceiling", lambda *a: (2e12, "datasheet HBM"))
        monkeypatch.setattr(gpulock, "gpu_timing_lock", lock)
        monkeypatch.setattr(timing, "L2Flusher", lambda: "flusher")
        monkeypatch.setattr(timing, "measure", measure)
        monkeypatch.setattr(batches, "time_remote", time_remote)
        ctx = SimpleNamespace(
            stage=lambda kind, s: trace.append(("stage", s)),
            waiting=lambda s: trace.append(("waiting", s)),
            timing=_forward_timing(),
            notes=[],
            request=SimpleNamespace(workspace=None),
        )
        reference, tolerance = object(), object()
        rope_timing.time_compile_and_backward(
            ctx,
            "fn",
            [_case(0), _case(1)],
            spec="spec",
            chain=lambda x, w, cos, sin: x * w,
            reference=reference,
            tolerance=tolerance,
        )
        return ctx, trace, (reference, tolerance)

    return run_


def test_compile_first_then_each_case_timed_under_the_lock(run):
    ctx, trace, (reference, tolerance) = run([0.25, 0.5])
    backwards = [t[2] for t in trace if t[0] == "time_remote"]
    for b in backwards:
        assert b.grad_args == (0, 1) and b.y_shape == (1, 4, 2, 8)
        assert b.y_dtype == torch.float32 and b.forward_ms == 0.2
        assert b.reference is reference and b.tolerance is tolerance
        assert b.labels == ("dx", "dweight")
    steps = [t if t[0] != "time_remote" else t[:2] for t in trace]
    assert steps == [
        # Both graphs compiled before the lock: forward, then forward + backward.
        ("stage", "preparing case0: torch.compile"),
        ("compiled", False),
        ("compiled", True),
        ("stage", "preparing case1: torch.compile"),
        ("compiled", False),
        ("compiled", True),
        ("lock", "checking rope_rmsnorm", 0),
        ("stage", "timing case0: torch.compile forward"),
        ("compiled", False),
        ("measure", "fwd"),
        ("stage", "timing case0: your backward"),
        ("time_remote", "case0"),
        ("stage", "timing case0: torch.compile backward"),
        ("measure", "grad"),
        ("stage", "timing case1: torch.compile forward"),
        ("compiled", False),
        ("measure", "fwd"),
        ("stage", "timing case1: your backward"),
        ("time_remote", "case1"),
        ("stage", "timing case1: torch.compile backward"),
        ("measure", "grad"),
        ("unlock",),
    ]
    timing = ctx.timing.to_json()
    rows = timing["cases"]
    assert [r["name"] for r in rows] == ["case0", "case1", "case0 backward", "case1 backward"]
    assert rows[0]["compile_ms"] == 0.1 and rows[0]["speedup_compile"] == pytest.approx(0.5)
    nbytes = 3 * 64 * 4 + 2 * 4 * 4 * 4 + 2 * 8 * 4
    assert rows[2] == {
        "name": "case0 backward",
        "shape": "s0 backward",
        "dtype": "bf16",
        "ms": 0.25,
        "clocks": {},
        "batch_reps": 4,
        "judge_flush_ms": 0.0,
        "judge_copy_ms": 0.0,
        "batches": [],
        "bytes": nbytes,
        "flops": None,
        "kind": "memory",
        "sizes": {"S": 4},
        "throughput": nbytes / 0.25e-3 / GB,
        "unit": "GB/s",
        "roofline_fraction": nbytes / 0.25e-3 / 2e12,
        "ceiling": "datasheet HBM",
        "baseline": "torch.compile backward",
        "baseline_ms": 0.5,
        "speedup": 2.0,
        "graded": False,
    }
    assert timing["speedup_compile"] == pytest.approx(0.5)
    assert timing["backward_speedup_compile"] == pytest.approx(2**0.5)
    assert timing["baselines"] == ["eager chain", "torch.compile"]
    assert (
        timing["summary"] == "A: 2.00x eager, 0.50x torch.compile; backward 1.41x torch.compile's"
    )
    assert timing["implausible"] is None
    assert ctx.notes == [
        "forward s0 bf16: 200.0 µs, eager chain 400.0 µs, torch.compile 100.0 µs (0.50x)",
        "forward s1 bf16: 200.0 µs, eager chain 400.0 µs, torch.compile 100.0 µs (0.50x)",
        f"backward s0 backward: 250.0 µs ({nbytes / 0.25e-3 / GB:.0f} GB/s), "
        "torch.compile 500.0 µs (2.00x; not graded)",
        f"backward s1 backward: 500.0 µs ({nbytes / 0.5e-3 / GB:.0f} GB/s), "
        "torch.compile 500.0 µs (1.00x; not graded)",
    ]


def test_a_backward_not_timed_or_refused_leaves_its_row_out_with_a_note(run):
    ctx, trace, _ = run([RuntimeError("x" * 400), "implausible"])
    assert [t for t in trace if t[0] == "measure"] == [("measure", "fwd")] * 2
    assert len(ctx.timing.cases) == 2
    assert ctx.timing.backward_speedup_compile is None
    assert ctx.timing.summary == "A: 2.00x eager, 0.50x torch.compile"
    assert ctx.notes[:2] == [
        ("backward s0: not timed (RuntimeError: " + "x" * 400)[:300],
        "backward s1: timing refused: too fast",
    ]
    assert len(ctx.notes) == 4 and ctx.notes[2].startswith("forward s0 bf16")


@pytest.mark.parametrize(
    "exc", [learner.LearnerError("boom", "boom!"), GradeFailed("wrong dx")], ids=str
)
def test_the_learners_failing_backward_is_the_verdict(run, exc):
    with pytest.raises(type(exc)):
        run([exc, 0.5])


def test_a_backward_faster_than_the_datasheet_is_implausible(run):
    ctx, _, _ = run([0.25, 0.5], peak=1e6)
    assert ctx.timing.implausible.startswith("case1 backward took 500.0 µs, below the ")
