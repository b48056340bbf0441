"""The grade is computed where learner code cannot reach it (issue: trusted
grading). Each test is a determined student's attempt, run for real: a judge
process, a confined sandbox, the Triton interpreter on the CPU."""

from __future__ import annotations

import pytest

from tests.conftest import REPO, reference_source

REF = reference_source("softmax")


def landlock() -> bool:
    from gpulab.sandbox.isolation import landlock_abi

    return landlock_abi() > 0


def test_the_result_says_who_judged_and_what_confined_the_code(grade):
    r = grade("softmax", REF, shared=True)
    assert r["passed"] and r["verdict"] == "judge"
    assert any(s.startswith("rlimits") for s in r["isolation"])
    # The audit's profiler says nothing in the learner's output (Kineto in
    # torch 2.13 logs "profiler_start"/"profiler_stop" lines by default).
    assert "profiler_" not in r["output"], r["output"]
    if landlock():
        assert any(s.startswith("landlock") for s in r["isolation"])


def test_a_forged_reply_on_the_sandbox_channel_does_not_pass(grade):
    # The learner finds the sandbox's socket and answers the call itself,
    # claiming a result was copied; the slot still holds the judge's poison.
    src = (
        REF
        + """
import json as _json, os as _os, struct as _struct
_real = softmax

def softmax(x):
    frame = _json.dumps({"type": "return", "copied": True, "report": {"launches": 1,
        "wrote_out": True}, "desc": {"type": "Tensor", "exact": True,
        "shape": list(x.shape), "dtype": str(x.dtype)[6:], "device": "cpu",
        "contiguous": True}}).encode()
    for fd in range(3, 40):
        try:
            _os.write(fd, _struct.pack("<I", len(frame)) + frame)
        except OSError:
            pass
    return x
"""
    )
    r = grade("softmax", src)
    assert not r["passed"]


def test_a_shadow_gpulab_or_torch_beside_the_file_is_never_imported(grade, tmp_path):
    (tmp_path / "gpulab").mkdir()
    (tmp_path / "gpulab" / "__init__.py").write_text("print('SHADOW-GPULAB')\n")
    (tmp_path / "torch.py").write_text("print('SHADOW-TORCH')\n")
    r = grade("softmax", REF)
    assert r["passed"], r["summary"]
    assert "SHADOW" not in r["output"]


def test_the_graders_modules_cannot_be_imported(grade):
    src = "from gpulab.judge import compare\ncompare.DEFAULT_TOLERANCE.clear()\n" + REF
    r = grade("softmax", src)
    assert not r["passed"]
    assert "part of the grader" in r["summary"] + r["message"]


def test_editing_anything_in_the_sandbox_leaves_the_judge_untouched(grade):
    # Loosen every tolerance and empty every list the sandbox can reach,
    # then return zeros: the judge's own tables decide.
    src = """
import sys, torch
for name, mod in list(sys.modules.items()):
    if name.startswith("gpulab") and mod is not None:
        for k, v in list(vars(mod).items()):
            if isinstance(v, (dict, list, set)) and not k.startswith("__"):
                try:
                    v.clear()
                except Exception:
                    pass

def softmax(x):
    return torch.zeros_like(x)
"""
    r = grade("softmax", src)
    assert not r["passed"]


@pytest.mark.skipif(not landlock(), reason="needs Landlock")
def test_the_reference_solutions_cannot_be_read(grade):
    path = REPO / "kernels" / "softmax.py"
    src = f"exec(open({str(path)!r}).read())\n"
    r = grade("softmax", src)
    assert not r["passed"]
    # Absent from the sandbox's root (namespaces), or refused (Landlock alone).
    said = r["summary"] + r["message"]
    assert "Permission" in said or "No such file" in said


def test_only_a_reference_check_reads_the_hopper_backends(tmp_path):
    # kernels/flash_attention.py loads kernels/hopper/ on sm_90: unreadable,
    # the judge graded its portable path (H200, 2026-12-01). A learner's
    # file gets no such folder, even one named the same.
    from pathlib import Path

    from gpulab.judge.policy import policy_for

    def reads(file):
        from gpulab.wire.check_request import CheckRequest

        request = CheckRequest(exercise="flash_attention", function="attention", file=str(file))
        return policy_for(request, "cuda", tmp_path, tmp_path / "cache").read

    assert str(REPO / "kernels" / "hopper") in reads(REPO / "kernels" / "flash_attention.py")
    mine = tmp_path / "mine" / "flash_attention.py"
    (tmp_path / "mine" / "hopper").mkdir(parents=True)
    mine.write_text("")
    assert not any(Path(r).is_relative_to(REPO / "kernels") for r in reads(mine))
    assert str(tmp_path / "mine" / "hopper") not in reads(mine)


@pytest.mark.skipif(not landlock(), reason="needs Landlock")
def test_the_serving_answer_key_cannot_be_read(grade):
    path = REPO / "gpulab" / "gpu" / "serving.py"
    src = f"src = open({str(path)!r}).read()\ndef weight_params(cfg):\n    return 0.0\n"
    r = grade("serving_roofline", src)
    assert not r["passed"]
    assert "Permission" in r["summary"] + r["message"]


def test_objects_that_compare_equal_to_anything_are_plain_data_to_the_judge(grade):
    src = (
        reference_source("serving_roofline")
        + """

class _Zero(float):
    def __sub__(self, other):
        return 0.0
    __rsub__ = __sub__
    def __eq__(self, other):
        return True
    __hash__ = float.__hash__

class _Any(str):
    def __eq__(self, other):
        return True
    __hash__ = str.__hash__

def weight_params(cfg):
    return _Zero(1.0)

_step = decode_step
def decode_step(cfg, gpu, batch, context):
    d = dict(_step(cfg, gpu, batch, context))
    d["bound"] = _Any("neither")
    return d
"""
    )
    r = grade("serving_roofline", src)
    assert not r["passed"]
    bad = [c["name"] for c in r["cases"] if not c["passed"]]
    assert any("weight_params" in n for n in bad) and any("decode" in n for n in bad)


def test_the_environment_is_scrubbed_and_home_is_private(grade, monkeypatch, tmp_path):
    monkeypatch.setenv("GPULAB_TEST_TOKEN", "s3cr3t-t0ken")
    src = (
        "import os\nprint(sorted(os.environ.items()))\n"
        "print('HOME-IS', os.path.expanduser('~'))\n" + REF
    )
    r = grade("softmax", src)
    assert r["passed"], r["summary"]
    assert "s3cr3t-t0ken" not in r["output"]
    home = r["output"].split("HOME-IS ", 1)[1].split()[0]
    assert "gpulab-sandbox-" in home and str(tmp_path) not in home


@pytest.mark.skipif(not landlock(), reason="needs Landlock")
def test_the_workspace_and_other_files_cannot_be_written(grade, tmp_path):
    target = tmp_path / "planted.txt"
    src = f"open({str(target)!r}, 'w').write('x')\n" + REF
    r = grade("softmax", src)
    assert not r["passed"] and not target.exists()


def test_huge_output_is_kept_short(grade):
    src = "import sys\nfor _ in range(20000):\n    sys.stdout.write('y' * 1000 + '\\n')\n" + REF
    r = grade("softmax", src)
    assert r["passed"], r["summary"]
    assert len(r["output"]) < 20000
    assert "bytes of output left out" in r["output"]


def test_a_store_one_past_the_end_fails(grade):
    src = reference_source("bandwidth").replace("offs < n", "offs <= n")
    assert "offs <= n" in src
    r = grade("bandwidth", src)
    assert not r["passed"]
    assert "past the end" in r["summary"]


def test_a_result_filled_by_torch_after_the_launch_fails(grade):
    # A kernel is handed the inputs and the output, then numpy's answer (maths
    # no op guard or profiler sees) is copied over it: only provenance can tell.
    src = (
        REF
        + """
import numpy as _np
import torch as _torch
_real = softmax

def softmax(x):
    out = _real(x)
    a = x.float().numpy()
    e = _np.exp(a - a.max(-1, keepdims=True))
    out.copy_(_torch.from_numpy(e / e.sum(-1, keepdims=True) * 1.01).to(out.dtype))
    return out
"""
    )
    r = grade("softmax", src)
    assert not r["passed"]
    assert "changed after your kernel wrote it" in r["summary"]


CHEATS = REPO / "tests" / "fixtures" / "cheats"


def cheat(name: str) -> str:
    """The reference softmax, then a cheat's tail (tests/fixtures/cheats/)."""
    return REF + "\n" + (CHEATS / f"{name}.py").read_text()


# Torch doing the work where the op guards (Python modes) cannot see it: the
# profiler's audit must still see it. Each returns the right answer.
HIDDEN_TORCH = ["second_thread", "modes_off", "inference_mode"]


STOP_PROFILER = {
    # torch's switch: on torch 2.11 it stops even an all-threads profile, and
    # the profile's own exit then raises (that once turned the audit off).
    "torch's switch": "    _torch.autograd._disable_profiler()\n",
    # the profile object itself, found through gc, stopped as its kind stops
    # (torch.profiler's `stop`; torch.autograd.profiler's, the audit's, exit)
    "the profile object": """    for o in _gc.get_objects():
        if type(o).__name__ == "profile":
            try:
                o.stop() if hasattr(o, "stop") else o.__exit__(None, None, None)
            except Exception:
                pass
""",
}


@pytest.mark.parametrize("how", list(STOP_PROFILER))
def test_stopping_the_profiler_fails(grade, how):
    # The profiler stopped, then torch does the work with the op guards off.
    src = (
        REF
        + """
import gc as _gc
import torch as _torch
_real = softmax

def softmax(x):
    out = _real(x)
"""
        + STOP_PROFILER[how]
        + """    from torch.utils._python_dispatch import _disable_current_modes as _off
    with _off(), _torch._C.DisableTorchFunction():
        out.copy_(_torch.softmax(x.float(), -1).to(x.dtype))
    return out
"""
    )
    r = grade("softmax", src)
    assert not r["passed"]
    assert "the profiler was stopped" in r["summary"], r["summary"]


@pytest.mark.parametrize("how", HIDDEN_TORCH)
def test_torch_hidden_from_the_op_guards_is_seen_by_the_audit(grade, how):
    r = grade("softmax", cheat(how))
    assert not r["passed"]
    assert "during your call torch ran" in r["summary"] or "called" in r["summary"], r["summary"]


LATER = """
import threading as _th
import torch as _torch
_real = softmax
_calls = [0]

def softmax(x):
    _calls[0] += 1
    out = _real(x)
    if _calls[0] == 4:  # one later case only: the shared profile's windows must tell
        %s
    return out
"""


def test_torch_in_one_later_case_only_is_seen_and_that_case_named(grade):
    # The correctness calls share one profile (audit.SpanAudit), read after
    # the last case: the fourth call's second thread is still its own.
    body = (
        "box = {}\n"
        "        t = _th.Thread(target=lambda: box.update(y=_torch.softmax(x.float(), -1)))\n"
        "        t.start(); t.join()\n"
        "        out.copy_(box['y'].to(x.dtype))"
    )
    r = grade("softmax", REF + LATER % body)
    assert not r["passed"]
    assert "during your call torch ran" in r["summary"], r["summary"]
    fourth = grade("softmax", REF, shared=True)["cases"][3][
        "name"
    ]  # the cases are drawn the same way
    assert f"(case {fourth})" in r["summary"], r["summary"]


def test_stopping_the_profiler_in_a_later_case_fails(grade):
    r = grade("softmax", REF + LATER % "_torch.autograd._disable_profiler()")
    assert not r["passed"]
    assert "the profiler was stopped" in r["summary"], r["summary"]


def test_the_audit_names_torch_ops_a_mode_never_saw(grade):
    r = grade("softmax", cheat("modes_off"))
    assert "aten::exp" in r["summary"] and "aten::amax" in r["summary"], r["summary"]


def test_an_answer_cached_from_the_first_call_fails(grade):
    r = grade("softmax", cheat("cached"))
    assert not r["passed"] and "no Triton kernel was launched" in r["summary"], r["summary"]


# --- On a GPU: timing the sandbox cannot shrink ---------------------------------


@pytest.mark.gpu
def test_gpu_work_hidden_in_the_copy_out_is_refused(grade):
    # The timed call only copies; the real kernel runs when the sandbox copies
    # the result out (measured on an H200: lifted 70% to 75% before this check).
    r = grade("softmax", cheat("dispatch_hook"), device="cuda", timeout=600)
    assert not r["passed"]
    assert "copying each result out" in r["summary"] or "wrong" in r["summary"], r["summary"]


# The sandbox's claimed kernel times, each times 0.8, the real kernel run as
# it is: the judge's bounds (the batch's wall clock, the copy out, time
# between calls up to twice the kernel's plus 0.5 ms) let a claim of 80% of
# the truth through. The reference softmax is B (70-71% of the roofline) on
# the H200; so forged, about 88%: A, before the replay on a GPU. Now the
# launches are replayed and timed where no learner code runs (docs/grading.md,
# the threat model's row "a forged timing claim").
FORGED_TIMES = (
    """import dataclasses as _dc
import gpulab.sandbox.calls as _calls

_true_reply = _calls._timed_reply


def _forged_reply(*args, **kwargs):
    timed = _true_reply(*args, **kwargs)
    return _dc.replace(timed, ms=tuple(m * 0.8 for m in timed.ms))


_calls._timed_reply = _forged_reply
"""
    + REF
)


@pytest.mark.gpu
def test_gpu_with_replay_timing_times_claimed_short_do_not_lift_the_grade(grade, monkeypatch):
    # A claim of 80% of the true kernel time was within the judge's bounds
    # (it passed on the H200, 2026-12-05: honest host time between calls
    # hides the difference). Now the grade comes from the kernels replayed
    # and timed where no learner Python runs (gpulab.judge.replay_timing, on
    # by default), and the sandbox's claim is only shown beside it.
    monkeypatch.delenv("GPULAB_GPU_REPLAY", raising=False)
    r = grade("softmax", FORGED_TIMES, device="cuda", timeout=600)
    assert r["passed"], r["summary"]
    assert r["timing"]["roofline_fraction"] < 0.8, r["timing"]["summary"]
    for row in r["timing"]["cases"]:
        assert row["claimed_ms"] < 0.9 * row["ms"], row
    assert not any("GPULAB_GPU_REPLAY" in n for n in r.get("notes") or []), r.get("notes")
    # Turned off, to compare: the result says its times are the sandbox's.
    monkeypatch.setenv("GPULAB_GPU_REPLAY", "0")
    r = grade("softmax", REF, device="cuda", timeout=600)
    assert any("GPULAB_GPU_REPLAY=0" in n for n in r.get("notes") or []), r.get("notes")
    assert all("claimed_ms" not in row for row in r["timing"]["cases"])


@pytest.mark.gpu
def test_gpu_reference_through_the_judge_is_timed_on_fresh_inputs(grade):
    r = grade("softmax", REF, device="cuda", timeout=600)
    assert r["passed"] and r["verdict"] == "judge", r["summary"]
    for row in r["timing"]["cases"]:
        assert row["batch_reps"] >= 2 and row["reps"] >= 10
        assert row["judge_copy_ms"] > 0 and row["batches"]
        # Timed from the replay (on sm_90 the shared-memory kernel of
        # hopper/ beside the reference, kept from that file).
        assert row["claimed_ms"] > 0, row


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(p.stem for p in CHEATS.glob("*.py")))
def test_gpu_every_softmax_cheat_fails(grade, name):
    # Each returns the right answer; the grade must still be refused, as a
    # failed check (not a crash of gpulab's).
    r = grade("softmax", cheat(name), device="cuda", timeout=600)
    assert r["status"] == "failed", (r["status"], r["summary"])


@pytest.mark.gpu
def test_gpu_a_compiled_kernel_launched_directly_is_recorded():
    # A launcher that skips the JIT's per-call dispatch (`compiled[grid](...)`,
    # as the sm_90 shared-memory softmax reference does) launches a Triton
    # kernel too: its output is the kernel's, and torch changing it after is seen.
    import torch
    import triton
    import triton.language as tl

    from gpulab.sandbox.guards import LaunchRecorder

    @triton.jit
    def copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    x = torch.randn(1000, device="cuda")
    y = torch.empty_like(x)
    compiled = copy[(4,)](x, y, 1000, BLOCK=256)  # compiles, outside the recorder
    y.zero_()
    with LaunchRecorder(inputs={x.untyped_storage().data_ptr()}) as rec:
        compiled[(4, 1, 1)](x, y, 1000, 256)  # every argument, constexprs included
        assert rec.provenance(y) == {
            "wrote_out": True,
            "altered_after": False,
            "aliases_input": False,
        }
        y.add_(1)
        assert rec.provenance(y)["altered_after"]
        assert not rec.side_streams()
        side = torch.cuda.Stream()
        compiled[(4, 1, 1)](x, y, 1000, 256, stream=side.cuda_stream)  # the runner's own argument
        torch.cuda.synchronize()
        assert rec.side_streams() == {side.cuda_stream}
    # With the judge replaying it, the launch is in the record too, as the
    # JIT launch it compiles from (gpulab.sandbox.replay.Recording.launch_compiled).
    from gpulab.sandbox.replay import Recording

    with LaunchRecorder(inputs={x.untyped_storage().data_ptr()}) as rec:
        rec.recording = Recording({})
        compiled[(4, 1, 1)](x, y, 1000, 256)
    [launch] = rec.recording.launches
    assert (launch.kernel, launch.grid, launch.args["BLOCK"]) == ("copy", (4, 1, 1), 256), launch


@pytest.mark.gpu
def test_gpu_rows_left_undone_in_timed_calls_are_caught_at_sampled_rows(grade):
    # Honest in the first call at each shape (the guarded one), then the last
    # 128 rows are never computed: large timed outputs are checked at rows the
    # judge draws after the output is in its slot (gpulab.judge.batches).
    src = (
        reference_source("matmul")
        + """
_seen = set()

def matmul(a, b):
    c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype)
    key = (tuple(a.shape), tuple(b.shape), a.dtype)
    if key in _seen and a.shape[0] >= 4096:
        launch(a[:-128], b, c[:-128])
    else:
        _seen.add(key)
        launch(a, b, c)
    return c
"""
    )
    r = grade("matmul", src, device="cuda", timeout=600)
    assert r["status"] == "failed", (r["status"], r["summary"])
    assert "rows of" in r["summary"] + r.get("message", ""), r["summary"]
