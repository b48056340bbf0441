"""The profiler audit's rules on hand-made events (the GPU's kernel list
cannot be had on the CPU; the real path runs in tests/judge/test_trusted_grading)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from gpulab.sandbox import audit

CUDA, CPU = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU


def span(at):
    return SimpleNamespace(start=at[0], end=at[1])


def kernel(name, at=(0, 0)):
    return SimpleNamespace(
        name=name, device_type=CUDA, cpu_parent=None, input_shapes=[], time_range=span(at)
    )


def op(name, shapes=(), parent=None, at=(0, 0)):
    return SimpleNamespace(
        name=name,
        device_type=CPU,
        cpu_parent=parent,
        input_shapes=[list(s) for s in shapes],
        time_range=span(at),
    )


def findings(device, events, launched=(), sum_width=0):
    a = audit.Audit(device, sum_width)
    a.events = events
    return a.findings(set(launched))


def test_gpu_torch_maths_and_copies_to_the_host_are_named():
    got = findings(
        "cuda",
        [
            kernel("softmax_kernel"),
            kernel(
                "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"
            ),
            kernel("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>"),
            # torch.softmax on rows of up to 1024: a kernel outside at::native.
            kernel("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10>"),
            kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"),
            kernel("Memcpy DtoH (Device -> Pageable)"),
            kernel("Memcpy HtoD (Pageable -> Device)"),
        ],
        launched={"softmax_kernel"},
    )
    assert len(got) == 4, got
    assert any("cunn_SoftMaxForward" in g for g in got)
    assert any("softmax_warp_forward" in g for g in got)
    assert any("xmma_gemm" in g for g in got)
    assert any("device-to-host" in g for g in got)


def read(t0, shape=()):
    """`.item()` from t0 to t0 + 10 µs, and its copy inside it."""
    return [
        op("aten::_local_scalar_dense", [shape], at=(t0, t0 + 10)),
        kernel("Memcpy DtoH (Device -> Pageable)", at=(t0 + 4, t0 + 6)),
    ]


def test_gpu_a_few_scalar_reads_pass_but_not_bulk_copies():
    # The reference softmax checks its candidates with one read each.
    reads = [e for t in range(0, 40, 20) for e in read(t)] + read(60, (1,))
    assert findings("cuda", reads) == []
    # A copy outside any read, or a read of a whole row, is the bytes.
    stray = kernel("Memcpy DtoH (Device -> Pageable)", at=(12, 15))
    assert findings("cuda", [*reads, stray]) == ["a device-to-host copy (maths on the CPU?)"]
    assert findings("cuda", read(0, (1000,))) == ["a device-to-host copy (maths on the CPU?)"]
    # Two copies in one read: only one is the value.
    twice = [*read(0), kernel("Memcpy DtoH (Device -> Pageable)", at=(7, 8))]
    assert findings("cuda", twice) == ["a device-to-host copy (maths on the CPU?)"]
    # Reading a softmax's output one value at a time: too many reads.
    many = [e for t in range(0, 20 * (audit.SCALAR_READS + 1), 20) for e in read(t)]
    assert findings("cuda", many) == [
        f"more than {audit.SCALAR_READS} values read back to the CPU (maths on the CPU?)"
    ]


def test_gpu_unknown_kernel_names_pass():
    # A Triton kernel's CUDA name may carry a suffix: never refuse a name
    # that is not torch's.
    assert (
        findings("cuda", [kernel("my_kernel_0d1d2"), kernel("helper")], launched={"my_kernel"})
        == []
    )


def test_cpu_ops_outside_the_wrapper_set_are_named_even_when_nested():
    allowed = op("aten::empty_like")
    to = op("aten::to")
    sub = op("aten::exp", parent=op("aten::clone"))  # a subclass's work inside clone
    got = findings("cpu", [allowed, to, op("aten::softmax"), sub])
    assert got == ["torch's aten::exp", "torch's aten::softmax"]


def test_cpu_ops_inside_gpulabs_own_ranges_are_not_the_learners():
    with audit.own():
        pass
    a = audit.Audit("cpu")
    a._opened_before = audit._opened - 1
    own = SimpleNamespace(name=audit._OWN, device_type=CPU, cpu_parent=None, input_shapes=[])
    a.events = [own, op("aten::arange", parent=own)]
    assert a.findings(set()) == []
    # A learner's range of the same name is one more than gpulab opened.
    a.events = [own, own, op("aten::arange", parent=own)]
    assert a.findings(set()) == ["a profiler range named like gpulab's own"]


def test_rmsnorm_partials_sum_is_allowed_only_at_its_width():
    ok = op("aten::sum", shapes=[(64, 128)])
    bad = op("aten::sum", shapes=[(64, 4096)])
    assert findings("cpu", [ok], sum_width=128) == []
    assert findings("cpu", [bad], sum_width=128) == ["torch's aten::sum"]


def test_a_profile_that_ended_early_is_a_finding():
    # The last range gpulab opens is missing when the code stopped the profiler.
    a = audit.Audit("cpu")
    a.stopped_early = True
    assert a.findings(set()) == ["the profiler was stopped during your call"]


def test_torchs_raw_events_give_the_findings_its_event_list_gives():
    """The audit reads torch's raw (C++) events, not its FunctionEvents
    (which cost about 1 s a call on a GPU): the same findings either way, on
    a real profile with gpulab's own ranges, an allowed sum, scalar reads,
    ops nested in allowed ones and a second thread."""
    import threading

    a = audit.Audit("cpu", sum_width=8)
    x = torch.randn(64)
    with a:
        x.clone().view(8, 8).contiguous()
        torch.exp(x)
        with audit.own():
            torch.sin(x)
            x.to(torch.float64)
        torch.randn(4, 8).sum(0)
        torch.randn(4, 9).sum(0)
        float(x[0])
        t = threading.Thread(target=lambda: torch.cos(x))
        t.start()
        t.join()
    raw = a.findings(set())
    assert isinstance(a.events[0], audit.Ev)
    a.events = list(a._prof.function_events)  # torch's own parse of the same profile
    assert a.findings(set()) == raw
    assert any("exp" in f for f in raw) and not any("sin" in f for f in raw), raw
    assert sum("sum" in f for f in raw) == 1, raw  # the width-9 sum only
    if a.all_threads:
        assert any("cos" in f for f in raw), raw


# --- one profile across the correctness calls (audit.SpanAudit), real profiler ---


def test_a_shared_profile_judges_each_call_in_its_own_window():
    import threading

    x = torch.randn(64, 64)
    span = audit.SpanAudit("cpu")
    with span.window():
        x.view(-1).clone()  # wrapper ops only
    torch.exp(x)  # between calls: gpulab's business, not judged
    with span.window():
        t = threading.Thread(target=lambda: torch.softmax(x, -1))  # another thread
        t.start()
        t.join()
    with span.window():
        x.t().contiguous()
    got = span.close()
    assert len(got) == 3, got
    assert got[0] == [] and got[2] == [], got
    assert any("softmax" in f for f in got[1]), got
    assert span.close() is got  # read once


def test_a_shared_profile_stopped_in_a_later_call_fails_every_call():
    span = audit.SpanAudit("cpu")
    with span.window():
        pass
    with span.window():
        torch.autograd._disable_profiler()
    with span.window():
        torch.exp(torch.ones(4))
    assert span.close() == [[audit.STOPPED]] * 3


def test_a_learner_window_of_gpulabs_name_voids_the_windows():
    span = audit.SpanAudit("cpu")
    with span.window():
        with audit._range(audit._WIN):  # the learner read the secret name
            torch.exp(torch.ones(4))
    assert span.close() == [[audit.IMITATED]]
