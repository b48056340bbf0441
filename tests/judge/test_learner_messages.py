"""What a check tells a learner, in their terms (issue 48): a NaN named as
the online softmax's exp(-inf - (-inf)) with its line, an fp16 error that is
an fp16 value, print() inside a kernel, where a timed-out check was, and a
process killed from outside blamed on no kernel. Pure functions: no check runs."""

from __future__ import annotations

import signal
from types import SimpleNamespace

import pytest
import torch

from gpulab.judge import print_note, stuck
from gpulab.judge.compare import compare, describe_mismatch
from gpulab.judge.context import GradeFailed
from gpulab.judge.kernel import replay_verdict
from gpulab.judge.replay import REPLAY_KILLED, Replayer
from gpulab.wire.crashes import crash_summary, killed_words
from gpulab.wire.sandbox_start import Policy
from gpulab.wire.status import Status


def test_a_nan_from_minus_inf_inputs_is_named_with_its_line():
    x = torch.full((2, 4), float("-inf"))
    ref = torch.zeros(2, 4, dtype=torch.float64)
    rep = compare(torch.full((2, 4), float("nan")), ref, 1e-6, 1e-5)
    line = "line 33: `s = s * tl.exp(m - m_new)`"
    words = describe_mismatch(rep, (x,), (line,))
    assert "exp(-inf - (-inf))" in words and "first made at " + line in words
    assert "unwritten or overflowed?" not in words
    # No -inf among the inputs: the other causes, still with the line.
    other = describe_mismatch(rep, (torch.zeros(2, 4),), (line,))
    assert "exp(-inf" not in other and "0/0" in other and line in other


def test_an_fp16_error_is_one_fp16_can_hold():
    """A reference of 3.07e-202 rounds to 0 in fp16: no error to show."""
    ref = torch.tensor([3.07e-202, 0.25, 1e-3], dtype=torch.float64)
    rep = compare(ref.to(torch.float16), ref, 1e-5, 2e-3)
    assert rep.max_abs == 0.0 or rep.max_abs > 1e-8, rep
    assert compare(torch.zeros(1, dtype=torch.float16), ref[:1], 1e-5, 2e-3).max_abs == 0.0


SOURCE = b"""import triton
import triton.language as tl


@triton.jit
def kernel(x_ptr):
    x = tl.load(x_ptr)
    print("x", x)
    tl.device_print("x", x)


def wrapper(x):
    print(x)
"""


def test_print_inside_a_kernel_is_noted_with_device_print():
    assert print_note.kernel_prints(SOURCE) == [8]
    note = print_note.note(SOURCE)
    assert note is not None and "line 8" in note and "tl.device_print" in note
    assert print_note.note(SOURCE.replace(b'    print("x", x)\n', b"")) is None  # wrapper's only
    assert print_note.note(b"def broken(:\n") is None


DUMP = """some output of the learner's
Thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3/threading.py", line 320 in wait

Current thread 0x00007f0000000002 (most recent call first):
  File "/site/triton/runtime/interpreter.py", line 90 in binary_op
  File "/home/me/gpulab/exercises/softmax.py", line 12 in softmax_kernel
  File "/site/triton/runtime/interpreter.py", line 1200 in __call__
  File "/home/me/gpulab/exercises/softmax.py", line 20 in softmax
"""


def test_a_timeout_names_the_innermost_line_of_the_learners_file():
    frames = stuck.last_dump(DUMP)
    assert frames[0] == ("/site/triton/runtime/interpreter.py", 90, "binary_op")
    source = b"\n" * 11 + b"    while i < n:\n"
    words = stuck.where_words(frames, "/home/me/gpulab/exercises/softmax.py", source)
    assert words == "line 12 of softmax.py, in softmax_kernel: `while i < n:`"
    # The replay's copy of the kernels keeps the file's line numbers.
    replayed = DUMP.replace("/home/me/gpulab/exercises/softmax.py", "/t/gpulab-replay-x/kernels.py")
    words = stuck.where_words(
        stuck.last_dump(replayed), "/home/me/gpulab/exercises/softmax.py", source
    )
    assert words.startswith("line 12 of softmax.py") and "again" in words
    assert stuck.where_words(frames, "/elsewhere.py", source) == ""
    assert stuck.last_dump("no dump here") == []


def test_a_process_killed_from_outside_is_not_the_kernels_fault():
    summary, advice = killed_words("gpulab's grader (the judge process)", -signal.SIGKILL)
    assert "SIGKILL" in summary and "not at fault" in summary and "run the check again" in summary
    assert "out-of-memory" in advice
    assert killed_words("x", 0) is None and killed_words("x", None) is None
    summary, advice = crash_summary(-signal.SIGKILL, "", Policy())
    assert "from outside gpulab" in summary and "not at fault" in advice


def test_the_replays_process_killed_is_an_error_not_a_wrong_kernel():
    replayer = Replayer.__new__(Replayer)
    replayer.sandbox = SimpleNamespace(
        proc=SimpleNamespace(wait=lambda timeout: -signal.SIGKILL),
        output=SimpleNamespace(text=lambda: ""),
    )
    why = replayer._died(EOFError("the other process closed the channel"))
    assert why.startswith(REPLAY_KILLED) and "SIGKILL" in why
    with pytest.raises(GradeFailed) as failed:
        replay_verdict(SimpleNamespace(), ("3×7 fp32", why))
    assert failed.value.status == Status.ERROR
    assert "not at fault" in failed.value.summary and "kernels alone" not in failed.value.summary
