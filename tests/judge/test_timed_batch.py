"""The sandbox's timed batch (gpulab.sandbox.calls.timed_batch) on the CPU.

On a GPU each call sits between CUDA events; here events, the stream, the L2
flush, NVML's clock log and synchronize are stand-ins that write to one
trace, so the order of everything the GPU would see (records, flushes, the
learner's calls, copies out, synchronizations) is pinned, with the reply
built from the events. The real path runs on the H200
(tests/judge/test_trusted_grading.py, tests/judge/test_integrity_all.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from gpulab.measure import timing
from gpulab.sandbox import calls
from gpulab.sandbox.failure import LearnerFailure
from gpulab.wire.protocol import TensorRef
from gpulab.wire.timed_batch import TimeRequest

N = 4  # elements a tensor


class Event:
    made = 0

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        Event.made += 1
        self.id = Event.made


@pytest.fixture
def batch(monkeypatch):
    trace: list[tuple] = []
    clock = SimpleNamespace(now=100.0)
    Event.made = 0

    def perf_counter():
        clock.now += 1.0  # each look at the clock: one second later
        return clock.now

    class ClockLog:
        def __enter__(self):
            trace.append(("clocklog",))
            return self

        def __exit__(self, *exc):
            trace.append(("clocklog-end",))

        def summary(self):
            return {"logged": True, "sm_mhz_median": 1980.0}

    def grad(y, leaves, dy):
        trace.append(("grad", len(leaves)))
        return tuple(torch.full_like(leaf, float(dy[0])) for leaf in leaves)

    def copy(slot, out):
        trace.append(("copy", float(out[0])))
        slot.copy_(out)

    monkeypatch.setattr(calls.time, "perf_counter", perf_counter)
    monkeypatch.setattr(calls.torch.cuda, "Event", Event)
    monkeypatch.setattr(calls.torch.cuda, "current_stream", lambda: "stream")
    monkeypatch.setattr(calls.torch.cuda, "synchronize", lambda: trace.append(("sync",)))
    monkeypatch.setattr(calls.torch.autograd, "grad", grad)
    monkeypatch.setattr(calls, "_RECORD", lambda e, s: trace.append(("record", e.id, s)))
    monkeypatch.setattr(calls, "_ELAPSED", lambda a, b: float(10 * a.id + b.id))
    monkeypatch.setattr(calls, "_COPY", copy)
    monkeypatch.setattr(calls, "_SLEEP", lambda cycles: trace.append(("sleep", cycles)))
    monkeypatch.setattr(timing, "ClockLog", ClockLog)
    monkeypatch.setattr(timing, "L2Flusher", lambda: lambda: trace.append(("flush",)))

    def run(reps=2, grad_args=(), fail_at=None, wrong_at=None, **extra):
        """`reps` repetitions of x + 1 (x_i filled with i), outputs to slots."""
        buf = torch.zeros(64 * N * 4, dtype=torch.uint8)
        arenas = {0: SimpleNamespace(nbytes=buf.numel(), whole=lambda: buf)}
        refs = iter(range(64))

        def tensor(value=None):
            ref = TensorRef(0, next(refs) * N * 4, N * 4, "float32", (N,), (1,))
            if value is not None:
                calls.view(arenas, ref, False).fill_(value)
            return ref.to_json()

        def fn(x, y=None, *, bias=0.0):
            trace.append(("fn", float(x.detach()[0])))
            if fail_at is not None and float(x[0]) == fail_at:
                raise ValueError("the learner's error")
            if wrong_at is not None and float(x[0]) == wrong_at:
                return (x + 1 + bias).double()  # not the slot's dtype: not copied
            return x + 1 + bias

        inputs = []
        for i in range(reps):
            args = [tensor(i)] + [tensor(20 + i) for _ in grad_args[1:]]
            entry = {"args": args, "kwargs": {"bias": 0.0}}
            if grad_args:
                entry["grad_output"] = tensor(10 + i)
            inputs.append(entry)
        msg = {"function": "f", "inputs": inputs, "outs": [tensor() for _ in range(reps)]}
        if grad_args:
            msg["grad_args"] = list(grad_args)
            msg["extra_outs"] = [[tensor() for _ in grad_args[1:]] for _ in range(reps)]
        msg.update(extra)
        server = SimpleNamespace(
            function=lambda name: fn, arenas=arenas, flusher=None, file="/nonexistent/learner.py"
        )
        reply = calls.timed_batch(server, TimeRequest.parse(msg)).to_json()
        slots = [float(calls.view(arenas, TensorRef.from_json(o), False)[0]) for o in msg["outs"]]
        for row in msg.get("extra_outs", []):
            slots += [float(calls.view(arenas, TensorRef.from_json(o), False)[0]) for o in row]
        return reply, trace, slots

    return run


def test_forward_batch_flushes_then_times_each_call_then_copies_out(batch):
    reply, trace, slots = batch(reps=2, warmup_s=2.5)
    s = "stream"
    assert trace == [
        # Warm-up by time (the fake clock: two rounds in 2.5 s), clocks logged,
        # one event as both start and end, a synchronize after each round.
        ("clocklog",),
        *[("record", 1, s), ("fn", 0.0), ("record", 1, s), ("sync",)],
        *[("record", 2, s), ("fn", 0.0), ("record", 2, s), ("sync",)],
        ("clocklog-end",),
        # Then the events of the timed repetitions (3 each), each call after a flush.
        *[("flush",), ("record", 3, s), ("fn", 0.0), ("record", 4, s)],
        *[("copy", 1.0), ("record", 5, s)],
        *[("flush",), ("record", 6, s), ("fn", 1.0), ("record", 7, s)],
        *[("copy", 2.0), ("record", 8, s)],
        ("sync",),
    ]
    assert reply == {
        "type": "timed",
        "ms": [34.0, 67.0],
        "copy_ms": [45.0, 78.0],
        "copied": [True, True],
        "fwd_ms": [],
        "clocks": {"logged": True, "sm_mhz_median": 1980.0},
    }
    assert slots == [1.0, 2.0]


def test_no_flush_no_warmup_and_a_wrong_output_is_not_copied(batch):
    reply, trace, slots = batch(reps=2, flush=False, wrong_at=1.0)
    s = "stream"
    assert trace == [
        *[("record", 1, s), ("fn", 0.0), ("record", 2, s), ("copy", 1.0), ("record", 3, s)],
        *[("record", 4, s), ("fn", 1.0), ("record", 5, s), ("record", 6, s)],
        ("sync",),
    ]
    assert reply["clocks"] == {} and reply["copied"] == [True, False]
    assert reply["ms"] == [12.0, 45.0] and reply["copy_ms"] == [23.0, 56.0]
    assert slots == [1.0, 0.0]


def test_backward_batch_times_the_forward_then_the_gradients(batch):
    reply, trace, slots = batch(reps=2, grad_args=[0], warmup_s=1.5)
    s = "stream"
    assert trace == [
        ("clocklog",),
        # Warm-up: the forward between its own events, the flush, the backward.
        *[("record", 2, s), ("fn", 0.0), ("record", 3, s), ("flush",)],
        *[("record", 1, s), ("grad", 1), ("record", 1, s), ("sync",)],
        ("clocklog-end",),
        # Timed: no flush before the forward; one between forward and backward.
        # The repetitions' events (4-9) are made first, the forwards' as they run.
        *[("record", 10, s), ("fn", 0.0), ("record", 11, s), ("flush",)],
        *[("record", 4, s), ("grad", 1), ("record", 5, s), ("copy", 10.0), ("record", 6, s)],
        *[("record", 12, s), ("fn", 1.0), ("record", 13, s), ("flush",)],
        *[("record", 7, s), ("grad", 1), ("record", 8, s), ("copy", 11.0), ("record", 9, s)],
        ("sync",),
    ]
    # The warm-up's forward events are dropped: only the timed ones are reported.
    assert reply["fwd_ms"] == [111.0, 133.0]
    assert reply["ms"] == [45.0, 78.0] and reply["copy_ms"] == [56.0, 89.0]
    assert reply["copied"] == [True, True] and slots == [10.0, 11.0]


def test_a_backward_lead_spins_the_gpu_before_each_forward(batch):
    # The GPU is kept busy ahead of the host, so autograd's launch latency
    # lands before the events, not inside them; the lead asked for is bounded.
    reply, trace, _ = batch(reps=2, grad_args=[0], lead_cycles=10**12)
    s = "stream"
    lead = ("sleep", calls.MAX_LEAD_CYCLES)
    assert trace == [
        *[lead, ("record", 7, s), ("fn", 0.0), ("record", 8, s), ("flush",)],
        *[("record", 1, s), ("grad", 1), ("record", 2, s), ("copy", 10.0), ("record", 3, s)],
        *[lead, ("record", 9, s), ("fn", 1.0), ("record", 10, s), ("flush",)],
        *[("record", 4, s), ("grad", 1), ("record", 5, s), ("copy", 11.0), ("record", 6, s)],
        ("sync",),
    ]
    assert reply["fwd_ms"] == [78.0, 100.0] and reply["ms"] == [12.0, 45.0]


def test_a_forward_batch_or_a_negative_lead_never_spins(batch):
    _, trace, _ = batch(reps=1, grad_args=[0], lead_cycles=-5)
    assert not [t for t in trace if t[0] == "sleep"]
    _, trace, _ = batch(reps=1, lead_cycles=1000)
    assert not [t for t in trace if t[0] == "sleep"]


def test_the_learners_error_while_timed_is_a_learner_failure(batch):
    with pytest.raises(LearnerFailure) as info:
        batch(reps=3, fail_at=1.0)
    assert info.value.summary == "timing failed: ValueError: the learner's error"
    assert info.value.message == "ValueError: the learner's error"


def test_a_warm_up_without_inputs_fails_as_the_learners(batch):
    with pytest.raises(LearnerFailure, match="timing failed: IndexError"):
        batch(reps=0, warmup_s=1.5)


def test_further_gradients_go_to_extra_outs_after_the_copy_is_timed(batch):
    reply, trace, slots = batch(reps=1, grad_args=[0, 1])
    s = "stream"
    assert trace == [
        *[("record", 4, s), ("fn", 0.0), ("record", 5, s), ("flush",)],
        *[("record", 1, s), ("grad", 2), ("record", 2, s), ("copy", 10.0), ("record", 3, s)],
        ("copy", 10.0),  # dweight: into extra_outs, outside the copy's event
        ("sync",),
    ]
    assert reply["copied"] == [True] and slots == [10.0, 10.0]
