"""Timing from the replay (gpulab.judge.replay_timing): a case's launches,
recorded once at the timed size, run again and timed in the replay's
sandbox, which runs no learner Python; every repetition's result checked.

On a GPU the replay's sandbox times with CUDA events (the strict-xfail GPU
test `test_gpu_kernel_times_claimed_short_do_not_lift_the_grade` is what
this is for); here the same requests run through the Triton interpreter,
timed by the host's clock, in a fresh Python with the sandbox's handlers
called in it (tests/inprocess.py): the judge's requests, the replay's
buffers, the checks of each result are the real ones."""

from __future__ import annotations

import os

import pytest
import torch

from tests.inprocess import InProcessSandbox
from tests.judge.test_replay_record import PREPARED, SOFTMAX_KERNEL, _load, in_interpreter


def _kept(source: str, tmp_path, case, device="cpu"):
    """The file's softmax called once on the case's input as the sandbox
    calls it (the input a view of the judge's shared memory, with a storage
    of its own), its launches recorded; and the replay's own sandbox."""
    from gpulab.judge.graders import softmax
    from gpulab.judge.kernel import Kept, encode
    from gpulab.judge.remote import Arena
    from gpulab.judge.replay import Replayer
    from gpulab.sandbox import tensors
    from gpulab.sandbox.guards import LaunchRecorder
    from gpulab.sandbox.replay import Recording, copy_watch
    from gpulab.wire.protocol import TensorRef

    mod = _load(source, tmp_path)
    arena = Arena(7, 1 << 20, device)
    refs: dict = {}
    ref = encode(arena, case.args[0], refs)
    assert isinstance(ref, dict)
    arenas = {7: tensors.open_arena(arena.spec, os.dup(arena.fd))}
    x = tensors.view(arenas, TensorRef.from_json(ref))
    with LaunchRecorder(set()) as launches:
        launches.recording = Recording(arenas)
        with copy_watch(launches.recording):  # as gpulab.sandbox.calls calls it
            y = mod.softmax(x)
    kept = Kept(launches.recording.result(y), refs, softmax.expect(case))
    box = InProcessSandbox(tmp_path / "attempt.py", [], device)
    # On a GPU the replay launches the compiled kernels the record carries.
    replayer = Replayer(lambda: box, str(tmp_path / "attempt.py"), device=device)
    return kept, replayer, softmax.SPEC, arena


def _case(rows=4, cols=33, device="cpu"):
    from gpulab.judge.kernel_spec import Case

    x = torch.randn(rows, cols, device=device)
    return Case(f"{rows}x{cols}", (x,), torch.float32, shape=f"{rows}x{cols}")


def test_an_honest_kernels_replay_is_timed_and_every_result_checked(tmp_path):
    in_interpreter("tests.judge.test_replay_timing:honest_timed", tmp_path)


def honest_timed(tmp_path):
    from gpulab.judge.replay_timing import replayed_times

    case = _case()
    kept, replayer, spec, _arena = _kept(PREPARED, tmp_path, case)
    stats, why = replayed_times(replayer, spec, case, kept, seed=1234, warmup_s=0.0, batch=4)
    assert stats is not None, why
    assert stats["reps"] >= 4 and stats["ms"] > 0, stats


# A number the wrapper worked out in Python, stored by a kernel: right only
# where the answer is that one number. Every repetition's result is checked,
# so a replay that gives a wrong answer gives no times at all.
FIRST_ANSWER = (
    """import torch
import triton
import triton.language as tl
"""
    + SOFTMAX_KERNEL
    + """

@triton.jit
def put_kernel(y_ptr, x_ptr, v, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, v + 0 * tl.load(x_ptr + offs, mask=mask), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    v = float(torch.softmax(x, dim=1)[0, 0])  # the wrapper's Python, not a kernel
    put_kernel[(1,)](y, x, v, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return y
"""
)


def test_a_replay_that_gives_a_wrong_result_gives_no_times(tmp_path):
    in_interpreter("tests.judge.test_replay_timing:wrong_untimed", tmp_path)


def wrong_untimed(tmp_path):
    from gpulab.judge.replay_timing import WRONG, replayed_times

    case = _case(1, 1)  # softmax of one element: 1.0, whatever x is
    kept, replayer, spec, _ = _kept(FIRST_ANSWER, tmp_path, case)
    stats, why = replayed_times(replayer, spec, case, kept, seed=7, warmup_s=0.0, batch=2)
    assert stats is not None, why  # the constant answer is right here
    case = _case(3, 5)
    kept, replayer, spec, _ = _kept(FIRST_ANSWER, tmp_path, case)
    stats, why = replayed_times(replayer, spec, case, kept, seed=7, warmup_s=0.0, batch=2)
    assert stats is None and why.startswith(WRONG), why


def test_a_record_the_replay_cannot_run_gives_no_times(tmp_path):
    in_interpreter("tests.judge.test_replay_timing:forged_untimed", tmp_path)


def forged_untimed(tmp_path):
    import dataclasses

    from gpulab.judge.replay_timing import replayed_times

    case = _case()
    kept, replayer, spec, _ = _kept(PREPARED, tmp_path, case)
    assert kept.record is not None
    forged = dataclasses.replace(kept.record, launches=())
    stats, why = replayed_times(
        replayer, spec, case, dataclasses.replace(kept, record=forged), seed=1, warmup_s=0.0
    )
    assert stats is None and "No Triton kernel launch" in why, why


def test_the_replay_time_request_round_trips_and_refuses_malformed_ones():
    from gpulab.wire.launch_record import View
    from gpulab.wire.protocol import ProtocolError, TensorRef
    from gpulab.wire.replay import (
        ReplayBuffer,
        ReplayLaunch,
        ReplayRep,
        ReplayTimed,
        ReplayTimeRequest,
    )
    from gpulab.wire.requests import request

    slot = TensorRef(0, 0, 32, "float32", (8,), (1,), 0)
    msg = ReplayTimeRequest(
        source="",
        modules={},
        kernels=("k",),
        launches=(ReplayLaunch("k", (1,), {}, {"num_warps": 4}),),
        outs=(View(0, 0, (8,), (1,), "float32"),),
        reps=(ReplayRep((ReplayBuffer(32, poison=True),), (slot,)),),
        warmup_s=0.1,
    )
    assert request(msg.to_json()) == msg
    for bad in (
        {"reps": []},
        {"reps": [{"buffers": [], "slots": []}]},
        {"warmup_s": 1e9},
        {"warmup_s": "1"},
    ):
        with pytest.raises(ProtocolError):
            request(msg.to_json() | bad)
    assert ReplayTimed.parse({"times_ms": [0.5, 1]}).times_ms == (0.5, 1.0)
    assert ReplayTimed.parse({"times_ms": [0.5, "1"]}).times_ms == ()
    assert ReplayTimed.parse({"times_ms": [float("nan")]}).times_ms == ()


# --- on a GPU (run there: the device driver's pytest-gpu step) ----------------


@pytest.mark.gpu
def test_gpu_a_record_reads_its_buffers_on_the_device_after_the_call(tmp_path):
    from gpulab.sandbox.guards import LaunchRecorder
    from gpulab.sandbox.replay import Recording, copy_watch

    mod = _load(PREPARED, tmp_path)
    x = torch.randn(3, 10, device="cuda")
    with LaunchRecorder(set()) as launches:
        launches.recording = Recording({})
        with copy_watch(launches.recording):  # as gpulab.sandbox.calls calls it
            y = mod.softmax(x)
    record = launches.recording.result(y)
    fills = [b.fill for b in record.buffers]
    assert "00000000" in fills and "0000c07f" in fills, record.buffers
    assert any(b.data is not None for b in record.buffers), record.buffers
    assert [la.options.get("num_warps") for la in record.launches] == [2, None]


@pytest.mark.gpu
def test_gpu_an_honest_kernels_replay_is_timed_with_cuda_events(tmp_path):
    from gpulab.judge.replay_timing import replayed_times

    case = _case(64, 1000, device="cuda")
    kept, replayer, spec, _ = _kept(PREPARED, tmp_path, case, device="cuda")
    stats, why = replayed_times(replayer, spec, case, kept, seed=5, warmup_s=0.1, batch=8)
    assert stats is not None, why
    # Two small kernels on a 64x1000 fp32 input: tens of µs, not the host's
    # launch path (the lead spin hides it), and not nothing.
    assert 0.001 < stats["ms"] < 0.2, stats


def test_the_replays_sandbox_on_a_gpu_keeps_the_device_nodes_and_a_cache_of_its_own(tmp_path):
    # CUDA opens more device nodes as it goes: the replay's sandbox is let
    # write the ones the check's is. Its compiler cache is kept per file
    # beside the check's, never inside it (the check's sandbox writes its
    # own cache and could plant a compiled kernel for the replay to run).
    from pathlib import Path

    from gpulab.judge.prepared import Prepared
    from gpulab.wire.check_request import CheckRequest

    # A judge on the CPU sets TRITON_INTERPRET=1 in its own process, which
    # here is pytest's; tests/conftest.py puts it back after each test.

    file = tmp_path / "softmax.py"
    file.write_text("def softmax(x):\n    return x\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    request = CheckRequest(
        exercise="softmax", function="softmax", file=str(file), workspace=str(ws), device="cpu"
    )
    prepared = Prepared(request)
    started = {}
    prepared._Sandbox = lambda **kw: started.update(kw)  # type: ignore[assignment]
    try:
        prepared.policy.write.append("/dev/nvidia0")  # as policy_for lists a GPU's nodes
        prepared.device = "cuda"
        prepared.fresh_replay()
        cache = Path(started["triton_cache"])
        write = started["policy"].write
        assert cache.parent == ws / ".gpulab" / "replay-cache", cache
        assert not cache.is_relative_to(prepared.cache) and str(prepared.cache) not in write
        assert str(cache) in write and "/dev/nvidia0" in write, write
        assert str(prepared.private) not in write
        prepared.device = "cpu"  # the interpreter compiles nothing: its own folder's
        prepared.fresh_replay()
        assert Path(started["triton_cache"]).parent == Path(started["private"])
    finally:
        prepared.close()


# An honest wrapper that copies its (strided) input before launching: the
# copy was recorded as its bytes, up to 8 MiB a call, and past that as
# unknown, so on a GPU at a timed size (a transposed copy of a large matrix)
# the replay had nothing to start from and refused an honest kernel. A whole
# copy of an input is recorded as the torch step that made it now, and the
# replay makes it from its own inputs, at any size.
COPIES = (
    """import torch
import triton
import triton.language as tl
"""
    + SOFTMAX_KERNEL
    + """

def softmax(x: torch.Tensor) -> torch.Tensor:
    xc = x.contiguous()
    TOUCH
    y = torch.empty_like(xc)
    softmax_kernel[(xc.shape[0],)](y, xc, xc.stride(0), y.stride(0), xc.shape[1],
                                   BLOCK=triton.next_power_of_2(xc.shape[1]))
    return y
"""
)


def test_a_copy_of_an_input_is_recorded_as_the_step_that_made_it(tmp_path):
    in_interpreter("tests.judge.test_replay_timing:copied_as_step", tmp_path)


def copied_as_step(tmp_path):
    from gpulab.judge.kernel_spec import Case
    from gpulab.judge.replay_timing import replayed_times
    from gpulab.wire.launch_record import TorchStep

    x = torch.randn(4, 64)[:, :33]  # strided: .contiguous() copies
    case = Case("4x33 (row stride 64)", (x,), torch.float32, shape="4x33")
    kept, replayer, spec, _ = _kept(COPIES.replace("TOUCH", "pass"), tmp_path, case)
    assert kept.record is not None
    steps = [la for la in kept.record.launches if isinstance(la, TorchStep)]
    assert [s.op for s in steps] == ["copy"], kept.record.launches
    assert kept.record.buffers[steps[0].src.buffer].arena is not None  # from the input
    made = kept.record.buffers[steps[0].dst.buffer]
    assert made.unknown and made.data is None, made  # made by the step, not from bytes
    # Each repetition's copy made from the judge's inputs, times c.
    stats, why = replayed_times(replayer, spec, case, kept, seed=3, warmup_s=0.0, batch=4)
    assert stats is not None, why
    # A copy written again by another torch op is no longer a clean copy of
    # the input: its bytes are recorded, as before.
    touched = COPIES.replace("TOUCH", "xc.mul_(1.0)")
    (tmp_path / "touched").mkdir()
    kept, *_ = _kept(touched, tmp_path / "touched", case)
    assert kept.record is not None
    assert not [la for la in kept.record.launches if isinstance(la, TorchStep)]
    xc = kept.record.launches[0].args["x_ptr"].view.buffer
    assert kept.record.buffers[xc].data is not None, kept.record.buffers


def test_a_case_timed_from_the_replay_takes_its_times_and_keeps_the_claim(monkeypatch):
    # gpulab.judge.speed._time_replayed: the timing's statistics become the
    # replay's (the row's throughput, fraction and datasheet floor are then
    # worked out from them); the sandbox's claim is kept beside them; a
    # replay that cannot time the case makes the timing implausible.
    from types import SimpleNamespace

    from gpulab.judge import replay_timing, speed
    from gpulab.judge.timed_rows import RemoteTiming

    ctx = SimpleNamespace(replayer=object(), seed=lambda salt: salt, stage=lambda *a: None)
    case = SimpleNamespace(name="4x4")
    answers = iter([({"ms": 2.0, "reps": 10}, ""), (None, "no kernel k")])
    monkeypatch.setattr(replay_timing, "replayed_times", lambda *a, **k: next(answers))
    t = RemoteTiming({"ms": 1.6}, {}, 4, 0.01, 0.01, [])  # a claim 20% short of 2 ms
    assert speed._time_replayed(ctx, None, case, None, t, 0.0) is None
    assert t.ms == 2.0 and t.claimed_ms == 1.6 and t.to_json()["claimed_ms"] == 1.6
    t = RemoteTiming({"ms": 1.0}, {}, 4, 0.01, 0.01, [])
    why = speed._time_replayed(ctx, None, case, None, t, 0.0)
    assert why is not None and "no kernel k" in why and t.ms == 1.0


# Issue 44: a module bound to another name (`L = tl`) walked past the replay's
# check of the file's text, which resolved attribute chains only from an
# import's name; kept as a "constant", its line ran where the replay loaded
# the kept text: the process whose CUDA events time the replay. This one
# divides the replay's clock by four (on the H100 a B kernel graded A, 98%).
# On a GPU the replay now launches the compiled kernels and runs no line of
# the file; on the CPU the verifier keeps no such line.
ALIAS_CLOCK = """
L = tl
CLOCK = L.core.builtins.exec(
    "import gpulab.sandbox.replay_run as _r\\n"
    "_m = _r._CudaClock.ms\\n"
    "_r._CudaClock.ms = staticmethod(lambda s, e: _m(s, e) / 4)\\n"
)
"""


@pytest.mark.gpu
def test_gpu_a_top_level_alias_does_not_reach_the_replays_clock(grade):
    from tests.conftest import reference_source

    honest = reference_source("bandwidth")
    cheat = honest + ALIAS_CLOCK
    fair = grade("bandwidth", honest, device="cuda", timeout=240, name="fair.py")
    forged = grade("bandwidth", cheat, device="cuda", timeout=240, name="forged.py")
    assert fair["passed"], fair["summary"]
    fair_ms = {c["name"]: c["ms"] for c in fair["timing"]["cases"]}
    for row in (forged.get("timing") or {}).get("cases", []):
        # Not lifted: each row's replayed time within noise of the honest file's.
        assert row["ms"] > 0.8 * fair_ms[row["name"]], (row, fair_ms)
