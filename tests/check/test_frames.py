"""The judge <-> sandbox frames of the kernel-grading path (gpulab.wire.calls,
timed_batch, launch_record; read as gpulab.wire.replies says), and the others:
requests round-trip through JSON as the sandbox reads them; each reply the
judge reads is checked field by field, and a malformed one is the
learner's failure with a clear message, never a crash of the judge."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from gpulab.wire import (
    benches,
    calls,
    dynamo,
    explain,
    launch_record,
    protocol,
    replies,
    sandbox_start,
    training,
)
from gpulab.wire import replay as replay_frames
from gpulab.wire import requests as request_frames
from gpulab.wire.calls import (
    AUDIT_MALFORMED,
    Audited,
    BackwardReply,
    CallRequest,
    Desc,
    GuardReport,
    Guards,
    Returned,
)
from gpulab.wire.kernel_binary import KernelBinary
from gpulab.wire.protocol import ArenaSpec, TensorRef
from gpulab.wire.replies import MALFORMED, BadReply, Broken, Raised, read_reply
from gpulab.wire.sandbox_start import CompiledAhead
from gpulab.wire.timed_batch import NO_TIMING, Timed, TimedInputs, TimeRequest


def ref(offset: int = 0) -> TensorRef:
    return TensorRef(0, offset, 64, "float32", (4, 4), (4, 1))


def wire(obj: dict) -> dict:
    """As the other process reads it: through JSON."""
    return json.loads(json.dumps(obj))


def call_reply(frame: dict):
    return read_reply(frame, Returned)


def time_reply(frame: dict):
    return read_reply(frame, Timed)


def answering(frame: dict) -> SimpleNamespace:
    """A sandbox whose every reply is `frame`, read as the judge asks."""
    return SimpleNamespace(ask=lambda msg, kind: read_reply(frame, kind))


# --- requests: judge -> JSON -> sandbox -----------------------------------------------


def test_a_guarded_call_round_trips_with_the_keys_it_always_had():
    guards = Guards(banned=("torch.softmax",), banned_aten=("_softmax",), label="softmax")
    call = CallRequest(
        function="softmax",
        args=[ref().to_json(), 3, {"__tuple__": [1, 2]}],
        kwargs={"dim": -1},
        out=ref(256),
        guards=guards,
        contiguous=True,
    )
    sent = wire(call.to_json())
    assert set(sent) == {"type", "function", "args", "kwargs", "guards", "out", "contiguous"} | {
        "grad_slots"
    }
    # Guards send only what is set: no eager_width, audit_span or replay here.
    assert set(sent["guards"]) == {"banned", "banned_aten", "banned_large", "label"}
    assert CallRequest.parse(sent) == call


def test_a_backward_call_and_guards_with_every_switch_round_trip():
    guards = Guards(banned=("torch.rms_norm",), eager_width=64, audit_span=True, replay=True)
    call = CallRequest(
        function="f",
        args=[ref().to_json()],
        kwargs={},
        out=ref(256),
        guards=guards,
        grad_slots=(ref(512), ref(768)),
        contiguous=False,
        grad_args=(0, 1),
        grad_output=ref(1024),
        grad_api="backward",
    )
    sent = wire(call.to_json())
    assert sent["guards"]["eager_width"] == 64 and sent["guards"]["audit_span"] is True
    assert sent["grad_args"] == [0, 1] and sent["grad_api"] == "backward"
    assert CallRequest.parse(sent) == call


def test_a_call_returning_two_tensors_round_trips_with_its_second_slot():
    """Lesson 05's backward step returns (dx, dweight): the second goes to
    `rest`, and the reply says whether it reached its slot."""
    call = CallRequest(function="f", args=[], kwargs={}, out=ref(0), rest=(ref(512),))
    sent = wire(call.to_json())
    assert sent["rest"] == [ref(512).to_json()] and CallRequest.parse(sent) == call
    assert "rest" not in wire(CallRequest(function="f", args=[], kwargs={}, out=None).to_json())
    back = Returned(Desc(type="Tensor"), GuardReport(), True, rest_copied=(False,))
    assert Returned.parse(wire(back.to_json())) == back


def test_a_call_without_guards_is_one_without_audit():
    call = CallRequest(function="step", args=[], kwargs={}, out=None, guards=None)
    sent = wire(call.to_json())
    assert sent["guards"] is None and "contiguous" not in sent and "grad_args" not in sent
    assert CallRequest.parse(sent).guards is None


@pytest.mark.parametrize(
    "bad",
    [
        {"function": 3, "args": [], "kwargs": {}},
        {"function": "f", "args": {}, "kwargs": {}},
        {"function": "f", "args": [], "kwargs": []},
        {"function": "f", "args": [], "kwargs": {}, "grad_args": ["0"]},
        {"function": "f", "args": [], "kwargs": {}, "guards": ["torch.softmax"]},
        {"function": "f", "args": [], "kwargs": {}, "guards": {"banned": "torch.softmax"}},
        {"function": "f", "args": [], "kwargs": {}, "out": {"__tensor__": [0]}},
    ],
)
def test_a_malformed_call_request_is_a_protocol_error(bad):
    with pytest.raises(protocol.ProtocolError):
        CallRequest.parse(bad)


def test_a_timing_request_round_trips_forward_and_backward():
    forward = TimeRequest(
        function="softmax",
        inputs=(TimedInputs([ref().to_json()], {}), TimedInputs([ref(64).to_json()], {"b": 1})),
        outs=(ref(128), ref(192)),
        flush=True,
        warmup_s=0.2,
    )
    sent = wire(forward.to_json())
    assert set(sent) == {"type", "function", "inputs", "outs", "flush", "warmup_s"}
    assert set(sent["inputs"][0]) == {"args", "kwargs"}
    assert TimeRequest.parse(sent) == forward

    backward = TimeRequest(
        function="f",
        inputs=(TimedInputs([ref().to_json()], {}, grad_output=ref(64)),),
        outs=(ref(128),),
        grad_args=(0, 1),
        extra_outs=((ref(192),),),
        lead_cycles=2_000_000,
    )
    sent = wire(backward.to_json())
    assert sent["grad_args"] == [0, 1] and sent["lead_cycles"] == 2_000_000
    assert "grad_output" in sent["inputs"][0]
    assert TimeRequest.parse(sent) == backward


def test_a_timing_request_reads_what_it_leaves_out_as_it_always_did():
    parsed = TimeRequest.parse({"function": "f", "inputs": [], "outs": []})
    assert parsed.flush is True and parsed.warmup_s == 0.0 and parsed.extra_outs == ()
    with pytest.raises(protocol.ProtocolError):
        TimeRequest.parse({"function": "f", "inputs": [{"args": 1}], "outs": []})


# --- the call's reply, read by the judge ---------------------------------------------


def returned(**report) -> dict:
    full = {
        "banned": [],
        "eager": [],
        "audit": [],
        "audit_threads": "all",
        "audit_off": "",
        "launches": 2,
        "side_stream": False,
        "overruns": 0,
        "wrote_out": True,
        "altered_after": False,
        "aliases_input": False,
        **report,
    }
    return {
        "type": "return",
        "desc": {
            "type": "Tensor",
            "exact": True,
            "shape": [4, 4],
            "dtype": "float32",
            "device": "cpu",
            "contiguous": True,
            "grad_fn": False,
        },
        "report": full,
        "copied": True,
    }


def test_an_honest_return_round_trips():
    frame = returned(audit_window=3, replay={"launches": [], "buffers": []})
    reply = call_reply(wire(frame))
    assert isinstance(reply, Returned)
    assert reply.report.launches == 2 and reply.report.audit_window == 3
    assert reply.desc.shape == (4, 4) and reply.copied is True and reply.backward is None
    assert reply.to_json() == frame


BINARY = KernelBinary(
    0,
    "k2",
    "AAAA",
    {"name": "k2", "target": {"backend": "cuda", "arch": 90, "warp_size": 32}, "shared": 0},
    (("x", "*fp32"),),
)
VIEW = launch_record.View(1, 0, (2, 4), (4, 1), "float32")

# A launch record as gpulab.sandbox.replay writes it: each buffer's start
# (a place in the judge's memory, a fill, bytes, or unknown), each launch
# (a kernel, something else, one the recorder could not read), the result.
RECORD = {
    "buffers": [
        {"nbytes": 32, "dtype": "float32", "arena": [1, 64]},
        {"nbytes": 32, "dtype": "float32", "fill": "00000000"},
        {"nbytes": 8, "dtype": "int32", "bytes": "AAAAAAEAAAA="},
        {"nbytes": 4096, "dtype": "float32", "unknown": True},
    ],
    "launches": [
        {
            "kernel": "k",
            "qualname": "k",
            "file": "/w/k.py",
            "grid": [2, 1],
            "args": {
                "x": {"__buf__": VIEW.to_json()},
                "n": 8,
                "eps": {"__float__": (1e-5).hex()},
                "flag": True,
                "none": None,
                "name": "rows",
                "dt": {"__tl_dtype__": "fp16"},
                "obj": {"__unsupported__": "Foo"},
            },
        },
        {"kernel": None, "what": "Autotuner"},
        {"kernel": "k", "error": "TypeError: missing n"},
    ],
    "out": VIEW.to_json(),
}


def test_a_launch_record_round_trips_typed():
    frame = returned(replay=RECORD)
    reply = call_reply(wire(frame))
    assert isinstance(reply, Returned) and reply.report.replay is not None
    rec = reply.report.replay
    assert rec.out == VIEW and rec.tensor_out and rec.overflow is None
    assert rec.buffers is not None and rec.buffers[0].arena == (1, 64)
    assert rec.launches is not None and rec.launches[0].args is not None
    assert rec.launches[0].args["x"] == launch_record.BufferArg(VIEW)
    assert rec.launches[0].args["obj"] == launch_record.OtherArg("Foo")
    assert reply.to_json() == frame
    # A call that returned a tensor no launch was handed, or no tensor at all.
    for out in ({"out": None}, {}):
        frame = returned(replay={"buffers": [], "launches": [], **out})
        assert call_reply(wire(frame)).to_json() == frame


@pytest.mark.parametrize(
    "forged, read",
    [
        # A field of the wrong type reads as absent...
        ({"nbytes": "4"}, launch_record.RecordedBuffer(None)),
        ({"nbytes": 4, "fill": 7, "bytes": [1]}, launch_record.RecordedBuffer(4)),
        # ...unless absent would pass where it failed: a place that is no
        # place matches no input (the buffer starts as poison).
        ({"nbytes": 4, "arena": "x"}, launch_record.RecordedBuffer(4, arena=launch_record.NOWHERE)),
        ({"nbytes": 4, "arena": [1.0, 0]}, launch_record.RecordedBuffer(4, arena=(1, 0))),
        (3, launch_record.RecordedBuffer(None)),
    ],
)
def test_a_forged_buffer_is_typed_never_refused(forged, read):
    assert launch_record.RecordedBuffer.parse(forged) == read


def test_a_forged_launch_is_typed_never_refused():
    parse = launch_record.RecordedLaunch.parse
    assert parse(5) == launch_record.RecordedLaunch(what="?")
    assert parse({"kernel": "k", "error": 1}).error == ""  # counts, says nothing
    assert parse({"kernel": "k", "qualname": 5}).qualname == ""  # a name no kernel has
    assert parse({"kernel": "k", "grid": "abc"}).grid == "abc"  # quoted back
    assert parse({"kernel": "k", "grid": [1, "2"]}).grid is None
    args = parse(
        {
            "kernel": "k",
            "args": {
                "big": 1 << 63,
                "long": "s" * 65,
                "f": 1.5,
                "two": {"__buf__": VIEW.to_json(), "__unsupported__": "X"},
                "view": {"__buf__": [0, 0, [1], [1]]},
                "hex": {"__float__": "zz"},
            },
        }
    ).args
    assert args == {
        "big": launch_record.OtherArg(),
        "long": launch_record.OtherArg(),
        "f": launch_record.OtherArg(),
        "two": launch_record.OtherArg("X"),
        "view": launch_record.OtherArg(),
        "hex": launch_record.OtherArg(),
    }
    assert launch_record.LaunchRecord.parse([]) is None
    rec = launch_record.LaunchRecord.parse({"buffers": {}, "launches": [], "overflow": 2})
    assert rec == launch_record.LaunchRecord(None, (), overflow="")


def test_a_backward_reply_keeps_what_was_reported_apart_from_what_was_not():
    frame = returned()
    frame["backward"] = {
        "report": {"banned": [], "eager": [], "audit": [], "launches": 1, "side_stream": False},
        "copied": [True, False],
        "missing": [False, True],
    }
    reply = call_reply(wire(frame))
    assert isinstance(reply, Returned) and reply.backward is not None
    assert reply.backward.report.wrote_out is None  # not reported: not False
    assert reply.backward.copied == (True, False) and reply.backward.missing == (False, True)
    assert reply.to_json() == frame
    frame["backward"] = {"no_grad_fn": True}
    back = call_reply(wire(frame)).backward
    assert isinstance(back, BackwardReply) and back.no_grad_fn


def test_raised_and_broken_replies_and_their_text_cut():
    raised = call_reply({"type": "raised", "summary": "x" * 10**6, "message": 5})
    assert isinstance(raised, Raised)
    assert len(raised.summary) == 20000 and raised.message == ""
    broken = call_reply({"type": "broken", "summary": "KeyError: 'args'"})
    assert isinstance(broken, Broken) and broken.summary == "KeyError: 'args'"
    # A type the judge does not expect is the sandbox failing too.
    assert isinstance(call_reply({"type": "timed"}), Broken)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda f: f["report"].update(launches="2"), "report.launches"),
        (lambda f: f["report"].update(launches=-1), "report.launches"),
        (lambda f: f["report"].update(launches=True), "report.launches"),
        (lambda f: f["report"].update(banned="torch.softmax"), "report.banned"),
        (lambda f: f["report"].update(banned=[1, 2]), "report.banned"),
        (lambda f: f["report"].update(eager=["mul"] * 20000), "report.eager"),
        (lambda f: f["report"].update(wrote_out=1), "report.wrote_out"),
        (lambda f: f["report"].update(side_stream="no"), "report.side_stream"),
        (lambda f: f["report"].update(audit_off=["x"]), "report.audit_off"),
        (lambda f: f.update(report=[]), "report"),
        (lambda f: f.update(copied="yes"), "copied"),
        (lambda f: f.update(desc="Tensor"), "desc"),
        (lambda f: f["desc"].update(shape=[4, "4"]), "desc.shape"),
        (lambda f: f["desc"].update(shape=[1] * 100), "desc.shape"),
        (lambda f: f["desc"].update(exact="true"), "desc.exact"),
        (lambda f: f["desc"].update(dtype=16), "desc.dtype"),
        (lambda f: f.update(backward=[]), "backward"),
        (lambda f: f.update(backward={"copied": [1]}), "backward.copied"),
        # The field's whole path (the hand parser said `backward.launches`).
        (lambda f: f.update(backward={"report": {"launches": 0.5}}), "backward.report.launches"),
    ],
)
def test_a_malformed_return_is_the_learners_failure_naming_the_field(change, named):
    frame = returned()
    change(frame)
    with pytest.raises(BadReply) as info:
        call_reply(wire(frame))
    assert info.value.summary == MALFORMED
    assert f"`{named}`" in info.value.message
    assert "cannot be graded" in info.value.message


def test_names_are_cut_and_what_an_honest_sandbox_leaves_out_reads_falsy():
    reply = call_reply(
        {"type": "return", "report": {"banned": ["torch." + "x" * 1000]}, "desc": {"type": "int"}}
    )
    assert isinstance(reply, Returned)
    assert len(reply.report.banned[0]) == replies.NAME_LIMIT
    assert reply.report.launches == 0 and reply.report.wrote_out is None
    assert reply.copied is False and reply.desc == Desc(type="int")
    assert call_reply({"type": "return"}).report == GuardReport()  # type: ignore[union-attr]


# --- the timed batch's reply ------------------------------------------------------------


def test_an_honest_timed_reply_round_trips():
    frame = {
        "type": "timed",
        "ms": [0.5, 0.25],
        "copy_ms": [0.01, 0.01],
        "copied": [True, True],
        "fwd_ms": [],
        "clocks": {"sm_mhz_median": 1980.0, "logged": True},
    }
    reply = time_reply(wire(frame))
    assert isinstance(reply, Timed) and reply.ms == (0.5, 0.25)
    assert reply.to_json() == frame


def test_a_timed_reply_leaves_its_counts_to_the_judge():
    # Absent lists are empty: the judge's count (one a repetition) refuses them
    # with its message; so are clocks of the wrong kind, which decide nothing.
    reply = time_reply({"type": "timed", "clocks": {"a": {"nested": 1}, "b": 2}})
    assert isinstance(reply, Timed) and reply.ms == () and reply.fwd_ms == ()
    assert reply.clocks == {"b": 2}
    assert time_reply({"type": "timed", "clocks": []}).clocks is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "fields",
    [
        {"ms": "0.5"},
        {"ms": [0.5, "0.5"]},
        {"ms": [0.5, float("nan")]},
        {"ms": [True]},
        {"ms": [0.1] * 20000},
        {"copy_ms": {"0": 0.1}},
        {"fwd_ms": [None]},
        {"copied": [1]},
        {"copied": "all"},
    ],
)
def test_a_malformed_timed_reply_is_no_usable_timing(fields):
    with pytest.raises(BadReply) as info:
        time_reply(wire({"type": "timed", **fields}))
    assert info.value.summary == NO_TIMING


def test_the_judge_names_the_case_of_an_unusable_timing():
    from gpulab.judge import batches
    from gpulab.sandbox.learner import LearnerError

    failed = []

    def fail(summary, message=""):
        failed.append((summary, message))
        raise RuntimeError

    case = SimpleNamespace(name="8×64 fp32")
    for frame in ({"type": "timed", "ms": ["x"]}, {"type": "broken", "summary": "boom"}):
        ctx = SimpleNamespace(fail=fail, sandbox=answering(frame))
        with pytest.raises(RuntimeError):
            batches._timed(ctx, case, None)
    assert failed == [
        ("timing 8×64 fp32: the sandbox sent no usable timing", ""),
        ("timing 8×64 fp32: the sandbox sent no usable timing", "boom"),
    ]
    with pytest.raises(LearnerError):
        ctx = SimpleNamespace(fail=fail, sandbox=answering({"type": "raised", "summary": "V"}))
        batches._timed(ctx, case, None)


# --- the shared profile's end, and the compile-ahead ---------------------------------------


def test_audited_round_trips_and_anything_else_is_the_malformed_profile():
    frame = {"type": "audited", "findings": [[], ["aten::mul"]]}
    assert Audited.parse(wire(frame)).to_json() == frame
    for bad in (
        {"type": "broken"},
        {"type": "audited"},
        {"type": "audited", "findings": {"0": []}},
        {"type": "audited", "findings": [[], "aten::mul"]},
        {"type": "audited", "findings": [[1]]},
        {"type": "audited", "findings": [[]] * 20000},
    ):
        with pytest.raises(BadReply) as info:
            Audited.parse(bad)
        assert info.value.summary == AUDIT_MALFORMED


def test_the_judge_refuses_a_profile_of_another_number_of_calls():
    from gpulab.judge.kernel_guards import AuditSpan

    failed = []

    def fail(summary, message=""):
        failed.append(summary)
        raise RuntimeError

    reply = {"type": "audited", "findings": [[]]}
    ctx = SimpleNamespace(fail=fail, sandbox=answering(reply))
    span = AuditSpan()
    span.calls = ["a", "b"]
    with pytest.raises(RuntimeError):
        span.end(ctx)
    assert failed == [AUDIT_MALFORMED]
    assert span.end(ctx) == ()  # asked once


def test_compiled_ahead_decides_nothing_so_a_bad_field_is_none():
    done = CompiledAhead(kernels=3, compiled=2, workers=2, seconds=0.5)
    assert CompiledAhead.parse(wire(done.to_json())) == done
    assert isinstance(read_reply({"type": "broken"}, CompiledAhead), Broken)
    odd = CompiledAhead.parse({"type": "compiled_ahead", "kernels": "3", "workers": True})
    assert odd is not None
    assert odd.record() == {"kernels": None, "compiled": None, "workers": None, "seconds": None}
    # The sandbox's reply on the CPU: no time taken, none recorded.
    assert CompiledAhead().to_json() == {
        "type": "compiled_ahead",
        "kernels": 0,
        "compiled": 0,
        "workers": 0,
    }


# --- the kernel-path switches: typed, not the judge's environment -------------------------


def test_a_check_request_names_the_kernel_paths_it_turns_off():
    from gpulab.wire.check_request import CheckRequest
    from gpulab.wire.protocol import KERNEL_PATHS, ProtocolError, paths_off_env

    request = CheckRequest(exercise="softmax", function="softmax", file="/k.py")
    assert request.paths_off == []
    request.paths_off = ["fa3", "matmul_tma"]
    assert CheckRequest.from_json(wire(request.to_json())) == request
    assert paths_off_env(request.paths_off) == {"GPULAB_FA3": "0", "GPULAB_MATMUL_TMA": "0"}
    assert set(KERNEL_PATHS.values()) == {"GPULAB_FA3", "GPULAB_SOFTMAX_SMEM", "GPULAB_MATMUL_TMA"}
    for bad in (["GPULAB_FA3"], "fa3", [1]):
        with pytest.raises(ProtocolError):
            CheckRequest.from_json({**request.to_json(), "paths_off": bad})


def test_gpulab_check_off_is_the_declared_set(tmp_path):
    from gpulab.cli import build_parser
    from gpulab.lab.runner import check_request
    from gpulab.wire.protocol import KERNEL_PATHS

    parser = build_parser()
    args = parser.parse_args(["check", "softmax", "--off", "fa3", "--off", "softmax_smem"])
    assert args.off == ["fa3", "softmax_smem"]
    assert parser.parse_args(["check", "softmax"]).off is None
    with pytest.raises(SystemExit):
        parser.parse_args(["check", "softmax", "--off", "GPULAB_FA3"])
    sub = next(a for a in parser._actions if a.dest == "command")
    choices = next(a.choices for a in sub.choices["check"]._actions if a.dest == "off")
    assert list(choices) == list(KERNEL_PATHS)
    lesson = SimpleNamespace(
        exercise="softmax", function="softmax", flops=None, bytes=None, kind=None, root=tmp_path
    )
    request = check_request(lesson, tmp_path / "k.py", paths_off=args.off)
    assert request.paths_off == ["fa3", "softmax_smem"]


def test_the_sandbox_takes_the_switches_asked_for_and_none_from_the_environment(
    monkeypatch, tmp_path
):
    from gpulab.judge import remote

    assert not [k for k in remote.ENV_ALLOWED if k.startswith("GPULAB_")]
    monkeypatch.setenv("GPULAB_SOFTMAX_SMEM", "0")  # the judge's own: not passed on
    seen = {}

    class Started(Exception):
        pass

    def popen(argv, **kw):
        seen.update(kw["env"])
        raise Started

    monkeypatch.setattr(remote.subprocess, "Popen", popen)
    with pytest.raises(Started):
        remote.Sandbox(
            file=str(tmp_path / "k.py"),
            device="cpu",
            private=tmp_path,
            policy=sandbox_start.Policy(),
            switches={"GPULAB_FA3": "0"},
        )
    assert seen["GPULAB_FA3"] == "0" and "GPULAB_SOFTMAX_SMEM" not in seen


# --- the other frames (the conversation modules of gpulab.wire) ----------------------------------------


def test_every_request_round_trips_through_the_sandboxs_reading():
    r = ref()
    requests = [
        sandbox_start.LoadRequest(("softmax",), ("dynamo",), source="AAAA"),
        sandbox_start.LoadRequest(("softmax",), problem="unreadable"),
        sandbox_start.Warm(),
        sandbox_start.Prepare(),
        sandbox_start.Exit(),
        sandbox_start.PlainCall("plan", [1, {"__ns__": {"a": 2}}]),
        dynamo.DynamoRequest("step", [r.to_json()]),
        dynamo.DynamoConfigRequest("step"),
        dynamo.CompileRequest("step", "aot_eager", [[r.to_json()]], (r,)),
        dynamo.ModesRequest("step", (None, "default"), [r.to_json()], (r, r)),
        dynamo.StreamRequest("compile_step", "eager", [[r.to_json(), [3], 0.5]], (r,)),
        benches.BenchRequest(
            "copy_bandwidth", "model", (1 << 20,), benches.BenchModel(3e12, 50, 4e-6, 7)
        ),
        benches.BenchRequest("copy_bandwidth", "cuda", (1 << 20, 1 << 30)),
        benches.MatmulBenchRequest(
            "matmul_tflops",
            "model",
            ((8192, 8192, 8192), (8192, 4096, 2048)),
            benches.MatmulModel(7e14, 5e-6, 0.25, 0.15, 0.03, 4.1e12, 50 << 20, 7),
        ),
        benches.MatmulBenchRequest("matmul_tflops", "cuda", ((4096, 4096, 4096),)),
        benches.ExportRequest(((8, 16, 32, 4),)),
        benches.ExportRequest(((8, 16, 32, 4),), {"goal": "fn"}, (("data", 2), ("model", 4))),
        dynamo.OverheadRequest("method", scenarios=((5.0, 1.0, 3, 150.0),)),
        dynamo.OverheadRequest("run", {"w": r}, (r,), (r,), calls=50),
        training.TrainRequest("train_step", (r,), (r, r), (r,), 4, 2, "/tmp/t.json"),
        training.BottleneckRequest(
            "block", {"w": r}, (r,), (r,), profile=True, trace="/tmp/b.json"
        ),
        training.BottleneckRequest("block", {"w": r}, (r,), (r,)),
        replay_frames.ReplayRequest(
            "src",
            {"tl": "triton.language"},
            ("k",),
            (
                replay_frames.ReplayBuffer(4, fill="00"),
                replay_frames.ReplayBuffer(8, input=(1, 0, 8)),
            ),
            (
                replay_frames.ReplayLaunch(
                    "k", (2, 1), {"x": launch_record.BufferArg(VIEW), "n": 3}
                ),
                launch_record.TorchStep("sum", VIEW, VIEW, (0,)),
                launch_record.TorchStep("copy", VIEW, VIEW),
            ),
            (VIEW, VIEW),
            (r, r),
            again=(
                replay_frames.ReplayBuffer(4, fill="00"),
                replay_frames.ReplayBuffer(8, input=(1, 0, 8)),
            ),
            again_slots=(r, r),
        ),
        replay_frames.ReplayRequest(  # a GPU's: a compiled kernel, no text
            "",
            {},
            (),
            (replay_frames.ReplayBuffer(4, fill="00"),),
            (
                replay_frames.ReplayLaunch(
                    "k2", (1,), {"x": launch_record.BufferArg(VIEW)}, binary=0
                ),
            ),
            (VIEW,),
            (r,),
            binaries=(BINARY,),
        ),
        explain.ExplainRequest("softmax", "sm_90", 1.5, [{"name": "c"}], compile="later"),
        explain.ExplainPrepare(),
        explain.ExplainCompile("K0.0"),
        explain.ProfileRequest("softmax", {"name": "c", "args": [], "kwargs": {}}, 0, 3),
    ]
    for request in requests:
        assert request_frames.request(wire(request.to_json())) == request, request
    # The judge made the plan from a record it checked: a launch it would
    # have refused is a broken request.
    replay = next(r for r in requests if isinstance(r, replay_frames.ReplayRequest)).to_json()
    replay["launches"][0]["args"]["n"] = {"__unsupported__": "Foo"}
    with pytest.raises(protocol.ProtocolError, match="malformed launch"):
        request_frames.request(wire(replay))
    replay = next(r for r in requests if isinstance(r, replay_frames.ReplayRequest)).to_json()
    replay["launches"][1]["op"] = "matmul"
    with pytest.raises(protocol.ProtocolError, match="malformed torch step"):
        request_frames.request(wire(replay))
    replay = next(r for r in requests if isinstance(r, replay_frames.ReplayRequest)).to_json()
    replay["slots"] = replay["slots"][:1]
    with pytest.raises(protocol.ProtocolError, match="a slot for each result"):
        request_frames.request(wire(replay))
    # A GPU's launch names a compiled kernel by number; the binaries sent
    # are checked as data (gpulab.wire.kernel_binary).
    compiled = [r for r in requests if isinstance(r, replay_frames.ReplayRequest)][1].to_json()
    for binary in (True, -1, "0"):
        bad = {**compiled, "launches": [{**compiled["launches"][0], "binary": binary}]}
        with pytest.raises(protocol.ProtocolError, match="malformed launch"):
            request_frames.request(wire(bad))
    bad_type = {**compiled["binaries"][0], "params": [["x", "*fp32); system(1"]]}
    for binaries in ([None], [bad_type], [compiled["binaries"][0]] * 65, {"a": 1}):
        with pytest.raises(protocol.ProtocolError, match="binar|compiled kernel"):
            request_frames.request(wire({**compiled, "binaries": binaries}))


def test_the_sandboxs_reading_sends_the_kernel_paths_requests_to_their_parsers():
    call = CallRequest(function="f", args=[], kwargs={}, out=None)
    assert request_frames.request(wire(call.to_json())) == call
    assert isinstance(request_frames.request({"type": "audit_end"}), calls.AuditEnd)
    assert isinstance(request_frames.request({"type": "compile_ahead"}), sandbox_start.CompileAhead)
    with pytest.raises(protocol.ProtocolError, match="unknown type"):
        request_frames.request({"type": "on_nothing"})
    with pytest.raises(protocol.ProtocolError, match="without its `function`"):
        request_frames.request({"type": "dynamo", "args": []})


def test_the_config_and_an_arena_round_trip():
    policy = sandbox_start.Policy(
        read=["/usr"], profiler=sandbox_start.ProfilerPolicy("ncu", ["/opt/ncu"])
    )
    config = sandbox_start.SandboxConfig("cpu", "/w/f.py", policy, ("/site",), source="QQ==")
    assert sandbox_start.SandboxConfig.parse(wire(config.to_json())) == config
    arena = sandbox_start.ArenaRequest(ArenaSpec(1, 4096, "memfd"))
    assert request_frames.request(wire(arena.to_json())) == arena
    with pytest.raises(protocol.ProtocolError):
        sandbox_start.ArenaRequest.parse({"type": "arena", "arena": {"id": 1}})


REPLIES = [
    sandbox_start.Ready(("namespaces: user, mount", "seccomp")),
    sandbox_start.Ok(),
    sandbox_start.Loaded(("softmax",)),
    sandbox_start.PlainReturned({"a": [1, 2.5, "x"]}),
    dynamo.Traced(
        plain=dynamo.DynamoTrace(2, (dynamo.DynamoBreak(7, "print(x)", ("builtin print",)),), 9),
        full=None,
        disabled=False,
        config_changed=("capture_scalar_outputs",),
    ),
    dynamo.Traced(
        plain=dynamo.DynamoTrace(1, (), 9), full=dynamo.DynamoTrace(1, (), 9, opaque=("f",))
    ),
    dynamo.DynamoConfig(("verbose",), True),
    dynamo.CompiledSteps((True, False), ()),
    dynamo.Modes(
        (dynamo.ModeRow(ms=1.5, reps=100, kernels=3), dynamo.ModeRow(ms=0.5, compile_s=2.0))
    ),
    dynamo.Stream(
        config_at_import=("a",),
        graphs=(dynamo.StreamGraph(-1, 4), dynamo.StreamGraph(2, 4)),
        calls=(0, 1, 1),
        requests=(
            dynamo.StreamStep(True, (dynamo.Compile("step", dynamo.Recompile("len(l) == 4", 57)),)),
            dynamo.StreamStep(False),
        ),
        graph_breaks=(dynamo.StreamBreak(9, "print"),),
    ),
    benches.Bench((1e12, {"__unsupported__": "str"}), (3, -1)),
    training.Trained(losses=(2.0, 1.0), returned="NoneType"),
    training.Trained(
        losses=(2.0, 1.0),
        events=(training.ProfileEvent("x", 1.0, 2.0, True),),
        top_ops=(training.OpRow("aten::mm", 2, 0.5, 0.75, 0.0),),
        top_kernels=(training.KernelRow("gemm", 2, 0.25),),
        trace_error="denied",
    ),
    training.Blocks(answer="aten::addmm", answer_type="str", copied=(True,), seconds=0.25),
    training.Blocks(
        answer=None,
        answer_type="int",
        copied=(True, True),
        calls=2,
        wall_s=0.5,
        cpu_total_us=1e5,
        ops=(training.BlockOp("aten::mm", 3, 2.0, 4.0, 1.0),),
        top_kernels=(training.KernelRow("gemm", 3, 0.5),),
    ),
    benches.Exported(
        "", 8, {"data parallel": benches.ExportedStep(programs=[{"program": "AA=="}])}
    ),
    benches.Exported("no mesh", 8, {"tensor parallel": benches.ExportedStep(error="not defined")}),
    dynamo.Overhead(measured=(5.2, None), errors=("", "returned str, not a number")),
    dynamo.Overhead(compiles=("mode='reduce-overhead'",), cudagraphs=(True,), copied=(True,)),
    dynamo.Overhead(eager_ms=0.3, step_ms=0.05),
    replay_frames.Replayed(""),
    replay_frames.Replayed("launch 1: no kernel k"),
    explain.Explained(cases=[{"name": "c"}], compiled={"K": {}}, seconds=1.0, steps={"trace": 0.5}),
    explain.Explained(error="could not import your file"),
    explain.Prepared(),
    explain.Prepared("the Triton interpreter ran here first"),
    explain.ExplainCompiled({"K0.0": {"spills": 0}}),
    explain.Profiled(kernels=("softmax_kernel",), case="c", steps={"warmup": 0.1}),
    explain.Profiled(kernels=(), error="TypeError: no"),
]


@pytest.mark.parametrize("reply", REPLIES, ids=lambda r: type(r).__name__)
def test_a_good_reply_round_trips(reply):
    assert replies.read_reply(wire(reply.to_json()), type(reply)) == reply


@pytest.mark.parametrize("reply", REPLIES, ids=lambda r: type(r).__name__)
def test_a_reply_of_another_type_is_the_learners_error_or_the_sandboxs_failure(reply):
    raised = replies.read_reply(wire(Raised("ValueError: no", "Traceback").to_json()), type(reply))
    assert raised == Raised("ValueError: no", "Traceback")
    broken = replies.read_reply({"type": "broken", "summary": "KeyError: 'x'"}, type(reply))
    assert isinstance(broken, Broken) and broken.summary == "KeyError: 'x'"


def test_a_broken_reply_is_written_as_it_is_read():
    broken = Broken("broken", "KeyError: 'x'", "Traceback ...")
    assert Broken.parse(wire(broken.to_json())) == broken


# Each field of the wrong type reads as the judge always read it: left out.
def test_fields_of_the_wrong_type_read_as_absent():
    trace = replies.read_reply(
        {
            "type": "traced",
            "plain": {"graphs": "2", "breaks": [5, {"line": True, "reasons": ["r", 3]}]},
            "full": [],
            "disabled": 1,
            "config_changed": ["k" * 200, None],
        },
        dynamo.Traced,
    )
    assert trace == dynamo.Traced(
        plain=dynamo.DynamoTrace(0, (dynamo.DynamoBreak(0, "", ("r",)),)),
        full=None,
        disabled=True,
        config_changed=("k" * 80,),
    )
    assert replies.read_reply({"type": "traced", "plain": 3}, dynamo.Traced) == dynamo.Traced()
    assert (
        replies.read_reply({"type": "loaded", "functions": 7}, sandbox_start.Loaded)
        == sandbox_start.Loaded()
    )
    assert replies.read_reply(
        {"type": "compiled", "copied": [1, True]}, dynamo.CompiledSteps
    ).copied == (
        False,
        True,
    )
    rows = replies.read_reply(
        {"type": "modes", "rows": [3, {"ms": True, "kernels": 2.0}]}, dynamo.Modes
    )
    assert rows == dynamo.Modes((dynamo.ModeRow(), dynamo.ModeRow()))
    stream = replies.read_reply(
        {"type": "stream", "graphs": [1, {"request": "2"}], "calls": [1, "x"], "requests": [3]},
        dynamo.Stream,
    )
    assert stream.graphs == (dynamo.StreamGraph(0, 0),) and stream.calls == (1,)
    assert stream.requests == (dynamo.StreamStep(),)
    trained = replies.read_reply(
        {"type": "trained", "losses": [1, "x", float("nan")]}, training.Trained
    )
    assert trained.losses == (1.0, None, None) and trained.events == ()
    # Profile rows: an event with a field of the wrong type is left out, a
    # table's cell of the wrong type reads as 0, an operator row that cannot
    # be used is left out (as the graders always kept them).
    profiled = replies.read_reply(
        {
            "type": "trained",
            "events": [
                {"name": "a", "start": 1, "end": 2, "user": "yes"},
                {"name": "b", "start": float("nan"), "end": 2},
                {"name": 3, "start": 1, "end": 2},
                "x",
            ],
            "top_ops": ["x", {"name": "m", "calls": "2", "self_cpu_ms": 1.5}] + [{}] * 30,
            "top_kernels": [{"name": "k", "calls": 2.9, "device_ms": True}],
        },
        training.Trained,
    )
    assert profiled.events == (training.ProfileEvent("a", 1.0, 2.0, None),)
    assert (
        profiled.top_ops[0] == training.OpRow("m", 0, 1.5, 0.0, 0.0) and len(profiled.top_ops) == 19
    )
    assert profiled.top_kernels == (training.KernelRow("k", 2, 0.0),)
    ops = replies.read_reply(
        {
            "type": "blocks",
            "calls": 2,
            "ops": [
                {
                    "name": "a",
                    "calls": 1,
                    "self_cpu_us": 1,
                    "cpu_total_us": 2,
                    "self_device_us": "x",
                },
                {"name": "b", "calls": -1, "self_cpu_us": 1, "cpu_total_us": 2},
                {"name": "c", "calls": 1, "self_cpu_us": 1},
            ],
        },
        training.Blocks,
    ).ops
    assert ops == (training.BlockOp("a", 1.0, 1.0, 2.0, 0.0),)
    blocks = replies.read_reply({"type": "blocks", "answer": 5, "copied": "yes"}, training.Blocks)
    assert blocks.answer is None and blocks.answer_type == "?" and blocks.copied == ()
    exported = replies.read_reply(
        {"type": "exported", "steps": {"dp": 5, "tp": {"error": 3}}}, benches.Exported
    )
    assert exported.steps == {
        "dp": benches.ExportedStep(error=""),
        "tp": benches.ExportedStep(error=""),
    }
    assert replies.read_reply({"type": "exported", "steps": []}, benches.Exported).steps is None
    assert replies.read_reply(
        {"type": "replayed", "problem": 5}, replay_frames.Replayed
    ) == replay_frames.Replayed("")
    assert replies.read_reply(
        {"type": "replayed", "problem": "p" * 900}, replay_frames.Replayed
    ).problem == ("p" * 400)


def test_a_graders_reply_of_another_type_keeps_the_messages_it_always_had():
    from gpulab.judge.context import GradeFailed
    from gpulab.judge.graph_dynamo import sandbox_reply
    from gpulab.sandbox.learner import LearnerError

    with pytest.raises(LearnerError) as raised:
        sandbox_reply(
            read_reply({"type": "raised", "summary": "s" * 3000, "message": "tb"}, dynamo.Traced)
        )
    assert raised.value.summary == "s" * 2000 and raised.value.message == "tb"
    with pytest.raises(GradeFailed) as failed:
        sandbox_reply(
            read_reply(
                {"type": "broken", "summary": "KeyError: 'x'", "message": "m" * 5000}, dynamo.Modes
            )
        )
    assert failed.value.summary == "the sandbox failed: KeyError: 'x'"
    assert failed.value.message == "m" * 4000 and failed.value.status == "error"
    assert sandbox_reply(read_reply({"type": "modes", "rows": []}, dynamo.Modes)) == dynamo.Modes()
