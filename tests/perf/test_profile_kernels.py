"""Lesson 07's kernel list holds kernels only, never a record_function range.

torch.profiler copies each record_function range onto the GPU's timeline, as
a device-side event under the range's own name (Kineto's gpu_user_annotation).
The H200 run committed in benchmarks/ listed `Optimizer.step#SGD.step` at
0.146 ms as the busiest "kernel", above nine real kernels of 0.06 ms in all.
No GPU here: the profile is rebuilt from that run's rows as torch's own
FunctionEvents, with the range's device copy flagged as each torch version
may flag it, and fed to the sandbox's list builders.
"""

from __future__ import annotations

import inspect
import json

import pytest
import torch
from torch.autograd import DeviceType
from torch.autograd.profiler_util import EventList, FunctionEvent

from gpulab.sandbox import bottleneck, training
from tests.conftest import REPO

RUN = REPO / "benchmarks" / "h200-2026-11-30" / "check_nvtx_profile.json"
RANGE = "Optimizer.step#SGD.step"
HAS_ACTIVITY = "activity_type" in inspect.signature(FunctionEvent.__init__).parameters


class Profile:
    """What the builders read of torch.profiler.profile: events(), key_averages()."""

    def __init__(self, events: list[FunctionEvent]) -> None:
        self._events = EventList(events, use_device="cuda")
        self._events._build_tree()  # as torch.profiler does before key_averages

    def events(self) -> EventList:
        return self._events

    def key_averages(self) -> EventList:
        return self._events.key_averages()


def recorded() -> list[dict]:
    return json.loads(RUN.read_text(encoding="utf-8"))["timing"]["profile"]["top_kernels"]


def profile(flags: dict, host_range: bool = True) -> Profile:
    """The run's device rows as device events (each call a slice of its row's
    time), the range's copy carrying `flags`, beside host-side ops and (with
    host_range) the optimizer's host range, as record_function makes it."""
    events: list[FunctionEvent] = []
    t = 0.0

    def add(name: str, us: float, **kw) -> None:
        nonlocal t
        events.append(FunctionEvent(len(events) + 1, name, 1, t, t + us, stack=[], **kw))
        t += us + 1.0

    add("aten::addmm", 900.0)
    if host_range:
        add(RANGE, 8700.0, scope=training.USER_SCOPE, is_user_annotation=True)
    for row in recorded():
        for _ in range(row["calls"]):
            kw: dict = {"device_type": DeviceType.CUDA}
            if row["name"] == RANGE:
                kw.update(flags)
            elif HAS_ACTIVITY:
                kw["activity_type"] = "kernel"
            add(row["name"], row["device_ms"] * 1e3 / row["calls"], **kw)
    return Profile(events)


FLAGS = [
    pytest.param({}, id="flagged-by-nothing"),  # only its name tells
    pytest.param({"is_user_annotation": True}, id="is_user_annotation"),
]
if HAS_ACTIVITY:
    FLAGS.append(pytest.param({"activity_type": "gpu_user_annotation"}, id="activity_type"))


def test_the_recorded_run_has_the_range_among_its_kernels():
    rows = recorded()
    assert rows[0]["name"] == RANGE and rows[0]["device_ms"] == pytest.approx(0.146, abs=5e-4)
    assert sum(r["device_ms"] for r in rows[1:]) == pytest.approx(0.06, abs=0.005)


@pytest.mark.parametrize("flags", FLAGS)
def test_top_kernels_never_lists_a_range(flags):
    rows = training.top_kernels(profile(flags))
    names = [r.name for r in rows]
    assert RANGE not in names
    assert len(rows) == 9
    assert names[0].startswith("void sgemm_largek_lds64")
    # a kernel's name may hold '#' ({lambda(float, float)#1}): it stays
    assert any("#1}" in n for n in names)
    assert sum(r.device_ms for r in rows) == pytest.approx(0.0616, abs=1e-4)


@pytest.mark.parametrize("flags", FLAGS[1:])
def test_a_flagged_range_goes_without_its_host_side(flags):
    rows = training.top_kernels(profile(flags, host_range=False))
    assert RANGE not in [r.name for r in rows]


@pytest.mark.parametrize("flags", FLAGS)
def test_top_ops_and_the_bottleneck_rows_drop_the_ranges_device_copy(flags):
    prof = profile(flags)
    ops = training.top_ops(prof, "cuda")
    assert ops[0].name != RANGE
    # the host range stays (its CPU time is real), its device copy goes
    assert [o.self_device_ms for o in ops if o.name == RANGE] == [0.0]
    rows = bottleneck.op_rows(prof)
    assert [r.self_device_us for r in rows if r.name == RANGE] == [0]
    assert any(r.name == "aten::addmm" for r in rows)


def test_cpu_profile_lists_no_kernels():
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        m = torch.nn.Linear(4, 4)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        m(torch.ones(2, 4)).sum().backward()
        opt.step()
    assert RANGE in training.range_names(prof)
    assert training.top_kernels(prof) == ()


def test_read_trace_keeps_gpu_annotations_out_of_the_kernels(tmp_path):
    """`gpulab profile` reads the Chrome trace, where a range's GPU copy is
    category gpu_user_annotation and a kernel is category kernel."""
    from gpulab.gpu.traces import read_trace

    events = [
        {"ph": "X", "cat": "user_annotation", "name": "forward", "ts": 0, "dur": 50},
        {"ph": "X", "cat": "gpu_user_annotation", "name": RANGE, "ts": 10, "dur": 146},
        {"ph": "X", "cat": "kernel", "name": "void sgemm_largek_lds64<>()", "ts": 10, "dur": 7},
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}), encoding="utf-8")
    summary = read_trace(path)
    assert [k["name"] for k in summary["kernels"]] == ["void sgemm_largek_lds64<>()"]
    assert [r["name"] for r in summary["ranges"]] == ["forward"]
