"""The nvtx_profile grader (lesson 07) through real child processes on the CPU
(the reference passes and writes its trace, the starter and each wrong variant
fail for the stated reason), the range checks on hand-made events, the trace
reader of gpulab.targets.profiling, and `gpulab profile`. GPU tests check the kernels
table and the NVTX ranges."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import CPU_CHECK_TIMEOUT, REPO, reference_source, starter_source

REF = reference_source("nvtx_profile")


def variant(old: str, new: str, src: str = REF) -> str:
    assert old in src, f"variant anchor not found: {old!r}"
    return src.replace(old, new, 1)


def test_reference_passes_and_writes_a_trace(grade, tmp_path):
    r = grade("nvtx_profile", REF)
    assert r["passed"], r
    names = [c["name"] for c in r["cases"]]
    for n in (
        "ranges present",
        "ranges nest and come in order",
        "range forward",
        "range loss",
        "range backward",
        "range optimizer_step",
        "losses match the original over 4 steps",
    ):
        assert n in names
    prof = r["timing"]["profile"]
    trace = Path(prof["trace"])
    assert trace == tmp_path / "workspace" / "traces" / "nvtx_profile.json"
    events = json.loads(trace.read_text())["traceEvents"]
    assert {"train_step", "forward", "backward"} <= {e.get("name") for e in events}
    assert [x["name"] for x in prof["ranges"]] == [
        "train_step",
        "forward",
        "loss",
        "backward",
        "optimizer_step",
    ]
    assert any(op["name"] == "aten::addmm" for op in prof["top_ops"])
    assert any(str(trace) in n for n in r["notes"])


def test_starter_fails(grade):
    r = grade("nvtx_profile", starter_source("nvtx_profile"), shared=True)
    assert r["status"] == "failed"
    assert "missing: train_step, forward, loss, backward, optimizer_step" in r["summary"]


WRONG = {
    "range missing": (
        variant(
            """        with annotate("loss"):
            loss = F.cross_entropy(logits, y)""",
            """        loss = F.cross_entropy(logits, y)""",
        ),
        "missing: loss",
    ),
    "misnamed": (
        variant('annotate("backward")', 'annotate("Backward")'),
        "ranges found with other names: Backward",
    ),
    "wrongly nested": (
        variant(
            """        with annotate("forward"):
            logits = model(x)
        with annotate("loss"):
            loss = F.cross_entropy(logits, y)""",
            """        with annotate("forward"):
            logits = model(x)
            with annotate("loss"):
                loss = F.cross_entropy(logits, y)""",
        ),
        "forward overlaps loss",
    ),
    "wrong ops": (
        variant(
            """        with annotate("backward"):
            loss.backward()
        with annotate("optimizer_step"):
            optimizer.step()""",
            """        with annotate("backward"):
            loss.backward()
            optimizer.step()
        with annotate("optimizer_step"):
            pass""",
        ),
        "range backward: holds optimizer_step's work",
    ),
    "step broken": (
        variant("            optimizer.step()", "            pass"),
        "losses match the original",
    ),
    # zero_grad before the step's range opens: its profiler range is outside.
    "zero_grad outside train_step": (
        variant(
            '    with annotate("train_step"):\n'
            "        # zero_grad belongs to the step, not to any one phase.\n"
            "        optimizer.zero_grad(set_to_none=True)\n",
            '    optimizer.zero_grad(set_to_none=True)\n    with annotate("train_step"):\n',
        ),
        "runs outside the train_step range",
    ),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_variants_fail(grade, name):
    src, expected = WRONG[name]
    r = grade("nvtx_profile", src)
    assert r["status"] == "failed", (name, r["summary"])
    assert expected in r["summary"], (name, r["summary"])


# --- the range checks on hand-made events (no child process) -----------------------


def _ev(name, start, end, user=False):
    from gpulab.wire.training import ProfileEvent

    return ProfileEvent(name, start, end, user)


def _good_events():
    return [
        _ev("train_step", 0, 100, True),
        _ev("forward", 10, 20, True),
        _ev("aten::addmm", 11, 12),
        _ev("loss", 25, 30, True),
        _ev("aten::cross_entropy_loss", 26, 27),
        _ev("backward", 35, 60, True),
        _ev("autograd::engine::evaluate_function: AddmmBackward0", 40, 45),
        _ev("aten::mm", 41, 42),
        _ev("optimizer_step", 70, 90, True),
        _ev("Optimizer.step#SGD.step", 71, 89, True),
        _ev("aten::add_", 72, 73),
    ]


@pytest.fixture(scope="module")
def grader():
    from gpulab.judge import nvtx_ranges

    return nvtx_ranges


def _failed(cases):
    return {c.name: c.detail for c in cases if not c.passed}


def test_ranges_good_events_pass(grader):
    assert _failed(grader.check_ranges(_good_events())) == {}


def test_ranges_wrong_order_and_twice(grader):
    ev = _good_events()
    ev[3] = _ev("loss", 5, 8, True)  # loss before forward
    assert "loss" in _failed(grader.check_ranges(ev))["ranges nest and come in order"]
    twice = _good_events() + [_ev("forward", 92, 95, True)]
    assert "forward appears 2 times" in _failed(grader.check_ranges(twice))["ranges present"]


def test_ranges_step_work_outside_train_step(grader):
    ev = [_ev("Optimizer.zero_grad#SGD.zero_grad", -5, -1, True)] + _good_events()
    bad = _failed(grader.check_ranges(ev))
    assert "outside the train_step range" in bad["all of each phase inside its range"]


def test_ranges_work_outside_its_range(grader):
    ev = _good_events() + [_ev("aten::addmm", 95, 96)]  # a matmul after the phases
    bad = _failed(grader.check_ranges(ev))
    assert "outside the forward range" in bad["all of each phase inside its range"]


# --- gpulab.targets.profiling (no torch) --------------------------------------------------


def test_read_trace_self_times(tmp_path):
    from gpulab.gpu import traces as profiling

    trace = {
        "traceEvents": [
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": "forward",
                "ts": 0,
                "dur": 100,
                "pid": 1,
                "tid": 1,
            },
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::linear",
                "ts": 10,
                "dur": 50,
                "pid": 1,
                "tid": 1,
            },
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::addmm",
                "ts": 20,
                "dur": 30,
                "pid": 1,
                "tid": 1,
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "gemm_kernel",
                "ts": 25,
                "dur": 7,
                "pid": 0,
                "tid": 7,
            },
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": "Optimizer.step#SGD.step",
                "ts": 0,
                "dur": 1,
                "pid": 1,
                "tid": 1,
            },
        ]
    }
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    s = profiling.read_trace(path)
    ops = {o["name"]: o for o in s["ops"]}
    assert ops["aten::linear"]["self_cpu_ms"] == pytest.approx(0.020)  # 50 - 30 µs
    assert ops["aten::addmm"]["self_cpu_ms"] == pytest.approx(0.030)
    assert s["kernels"] == [{"name": "gemm_kernel", "calls": 1, "device_ms": 0.007}]
    assert s["ranges"] == [{"name": "forward", "calls": 1, "ms": 0.1}]


def test_nsys_and_ncu_commands():
    from gpulab.gpu import traces as profiling

    nsys = profiling.nsys_command("nvtx_profile", "/x/f.py", "/w/traces/nvtx_profile")
    assert nsys[:2] == ["nsys", "profile"] and "--capture-range=cudaProfilerApi" in nsys
    assert nsys[-6:-2] == ["-m", "gpulab.targets.profiling", "nvtx_profile", "/x/f.py"]
    ncu = profiling.ncu_command("nvtx_profile", "/x/f.py", "/w/traces/nvtx_profile")
    assert ncu[0] == "ncu" and "--nvtx-include" in ncu and "off" in ncu
    # The clocks as they run, as the course's counters were taken (lesson 07).
    assert ncu[ncu.index("--clock-control") + 1] == "none"
    assert "--nvtx" not in profiling.ncu_command("graph_breaks", "/x/f.py", "/o")


def test_profile_command(run_gpulab, tmp_path):
    ref = str(REPO / "kernels" / "nvtx_profile.py")
    p = run_gpulab("profile", "nvtx_profile", "--file", ref, "--steps", "2")
    assert p.returncode == 0, p.stderr + p.stdout
    assert "Your ranges" in p.stdout and "optimizer_step" in p.stdout
    assert "aten::addmm" in p.stdout
    # Kineto's own log lines ("USDT: ... profiler_start", and with torch's CUDA
    # build on a CPU box "gpuGetDeviceCount failed with code 35"): not shown.
    assert "USDT" not in p.stdout + p.stderr and "gpuGetDeviceCount" not in p.stdout + p.stderr
    assert (tmp_path / "workspace" / "traces" / "nvtx_profile.json").is_file()
    p = run_gpulab("profile", "nvtx_profile", "--print-command")
    assert p.returncode == 0 and p.stdout.startswith("nsys profile") and "\nncu " in p.stdout
    p = run_gpulab("profile", "softmax")
    assert p.returncode == 2 and "gpulab check" in p.stderr


def test_profile_without_nsys_says_so(run_gpulab):
    from gpulab.gpu import traces as profiling

    if profiling.tools()["nsys"]:
        pytest.skip("nsys is installed here")
    p = run_gpulab("profile", "nvtx_profile", "--nsys")
    assert p.returncode == 2 and "nsys is not on PATH" in p.stderr


# --- GPU ------------------------------------------------------------------------


@pytest.mark.gpu
def test_gpu_profile_has_kernels_and_nvtx(grade):
    r = grade("nvtx_profile", REF, device="cuda")
    assert r["passed"], r
    prof = r["timing"]["profile"]
    assert prof["top_kernels"] and prof["top_kernels"][0]["device_ms"] > 0
    assert set(prof["nvtx"]) >= {"train_step", "forward", "loss", "backward", "optimizer_step"}
    # record_function without NVTX still passes, with a note for Nsight users.
    r = grade(
        "nvtx_profile",
        REF.replace("_NVTX = torch.cuda.is_available()", "_NVTX = False"),
        device="cuda",
    )
    assert r["passed"], r
    assert any("Nsight Systems will not show your ranges" in n for n in r["notes"])


# --- the judge (issue 16) -----------------------------------------------------------


def test_judged_without_a_workspace_the_trace_is_copied_out(course, tmp_path):
    # No workspace: the sandbox writes in its private folder and the judge
    # copies the trace out to the temp folder.
    from gpulab.lab.runner import run_check

    path = tmp_path / "nvtx_profile_attempt.py"
    path.write_text(REF)
    r = run_check(
        course.find("nvtx_profile"), path, device="cpu", timeout=CPU_CHECK_TIMEOUT
    ).to_json()
    assert r["passed"] and r["verdict"] == "judge", r["summary"]
    trace = Path(r["timing"]["profile"]["trace"])
    assert trace.is_file() and "traceEvents" in trace.read_text()


# The sandbox's reply forged: made-up losses, and the grader's own range
# checks (which no longer live in the sandbox) cannot be reached.
FORGED = (
    REF
    + """

import gpulab.sandbox.main as _main

class _Frame:  # any JSON the file likes, sent as the reply
    def __init__(self, frame):
        self.frame = frame

    def to_json(self):
        return self.frame

def _forged(self, msg):
    return _Frame({"type": "trained", "losses": [2.0, 1.5, 1.0, 0.5],
            "events": [{"name": n, "start": float(i), "end": 100.0 - i, "user": True}
                       for i, n in enumerate(("train_step", "forward", "loss", "backward",
                                              "optimizer_step"))]})

# The sandbox answers from its table of routes (ROUTES): the forgery goes there.
_kind = next(k for k, r in _main.ROUTES.items() if r.answer is _main.Server.on_train)
_main.ROUTES[_kind] = _main.Route(_main.ROUTES[_kind].read, _forged)
try:
    import gpulab.judge.nvtx_ranges as _g  # the judge's rules: not importable here
    _g.check_ranges = lambda events: []
except ImportError:
    pass
"""
)


def test_a_forged_training_reply_fails_on_the_judges_own_training(grade):
    r = grade("nvtx_profile", FORGED)
    assert r["status"] == "failed"
    bad = {c["name"]: c.get("detail", "") for c in r["cases"] if not c["passed"]}
    assert "losses match the original over 4 steps" in bad
    # the weight slots were never written: the judge's poison is still there
    assert "weights match the original after training" in bad


def test_read_trace_counts_an_op_inside_its_own_name_once(tmp_path):
    """aten::div_ with a scalar calls aten::div_ with a tensor: its total is
    the outer call's, not both added (which put div_ over its parent mean
    in the find_bottleneck starter's profile)."""
    from gpulab.gpu import traces as profiling

    def op(name, ts, dur):
        return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1}

    events = []
    for i in range(3):  # three means, each with its sum and a div_ inside a div_
        t = i * 100
        events += [op("aten::mean", t, 60), op("aten::sum", t + 5, 20)]
        events += [op("aten::div_", t + 30, 25), op("aten::div_", t + 32, 20)]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    rows = {r["name"]: r for r in profiling.read_trace(path)["ops_by_total"]}
    assert rows["aten::div_"]["calls"] == 6
    assert rows["aten::div_"]["cpu_total_ms"] == pytest.approx(3 * 25 / 1e3)
    assert rows["aten::mean"]["cpu_total_ms"] == pytest.approx(3 * 60 / 1e3)
    assert profiling.read_trace(path)["ops_by_total"][0]["name"] == "aten::mean"
