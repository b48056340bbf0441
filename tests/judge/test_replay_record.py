"""The launch record the replay runs from (gpulab.sandbox.replay.Recording),
as a GPU replay needs it: each launch's options (num_warps, num_stages...),
only the launches of the call's own work (not @triton.autotune's timing of
its configs), and a buffer's starting bytes read the same way on any device.

On the CPU the interpreter ignores launch options, but a replay that is
timed on a GPU must run a kernel as it ran: num_warps=4 and num_warps=16
are different kernels there. Real checks in real child processes, in the
Triton interpreter; the record itself is read in this process."""

from __future__ import annotations

import pytest

SOFTMAX_KERNEL = """
@triton.jit
def softmax_kernel(y_ptr, x_ptr, x_row_stride, y_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * x_row_stride + offs, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * y_row_stride + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
"""

# An honest softmax autotuned over two launch configurations, timed by a CPU
# clock (the interpreter has no CUDA events; a learner without a GPU can
# still write @triton.autotune this way).
AUTOTUNED = (
    """import time

import torch
import triton
import triton.language as tl


def _cpu_bench(fn, quantiles=None, **kwargs):
    start = time.perf_counter()
    fn()
    took = (time.perf_counter() - start) * 1e3
    return [took, took, took] if quantiles else took


@triton.autotune(
    configs=[triton.Config({}, num_warps=2), triton.Config({}, num_warps=4, num_stages=2)],
    key=["n_cols"],
    do_bench=_cpu_bench,
)"""
    + SOFTMAX_KERNEL
    + """

def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols,
                              BLOCK=triton.next_power_of_2(n_cols))
    return y
"""
)


def in_interpreter(body: str, tmp_path) -> None:
    """Run `body` ("module:function", called with tmp_path) in a fresh Python
    with TRITON_INTERPRET=1 set before Triton is imported, as the sandbox
    runs on the CPU. Not in this process: where triton.language was imported
    for the GPU first (a pytest worker that ran another test), tl.max and
    its kin are compiled-only functions, and the interpreter refuses them."""
    import subprocess
    import sys

    from tests.conftest import REPO, gpulab_env

    module, name = body.split(":")
    code = (
        f"import sys; sys.path.insert(0, {str(REPO)!r}); from pathlib import Path; "
        f"from {module} import {name}; {name}(Path({str(tmp_path)!r}))"
    )
    env = gpulab_env(tmp_path / "home", TRITON_INTERPRET="1")
    r = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-5000:])


def _record(source: str, tmp_path, shape=(3, 10)):
    """The launch record of one call of the file's softmax, as the sandbox
    makes it (LaunchRecorder with a Recording), in the interpreter."""
    import torch

    from gpulab.sandbox.guards import LaunchRecorder
    from gpulab.sandbox.replay import Recording, copy_watch

    mod = _load(source, tmp_path)
    x = torch.randn(*shape)
    with LaunchRecorder(set()) as launches:
        launches.recording = Recording({})
        with copy_watch(launches.recording):  # as gpulab.sandbox.calls calls it
            y = mod.softmax(x)
    assert torch.allclose(y, torch.softmax(x, dim=1), atol=1e-5)
    return launches.recording.result(y), launches


def test_autotune_timing_its_configs_is_not_in_the_record(tmp_path):
    in_interpreter("tests.judge.test_replay_record:autotune_record", tmp_path)


def autotune_record(tmp_path):
    record, launches = _record(AUTOTUNED, tmp_path)
    # Both configs ran while @triton.autotune timed them, then the chosen
    # one ran the call: the record holds that one launch, with its options.
    assert len(launches.launches) >= 3, launches.launches
    assert len(record.launches) == 1, record.launches
    options = record.launches[0].options
    assert options is not None and options["num_warps"] in (2, 4), options
    assert options["num_warps"] == 2 or options["num_stages"] == 2, options


def test_an_autotuned_honest_softmax_passes_and_its_options_replay(grade):
    r = grade("softmax", AUTOTUNED, timing=False)
    assert r["status"] == "passed", (r["summary"], r.get("message"), r["cases"][-3:])


def test_launch_options_round_trip_and_unknown_ones_make_the_launch_malformed():
    from gpulab.wire.launch_record import RecordedLaunch
    from gpulab.wire.protocol import ProtocolError
    from gpulab.wire.replay import ReplayLaunch

    launch = RecordedLaunch(
        kernel="k", qualname="k", file="f.py", grid=(1,), args={}, options={"num_warps": 8}
    )
    assert RecordedLaunch.parse(launch.to_json()) == launch
    assert ReplayLaunch.parse(launch.to_json()).options == {"num_warps": 8}
    forged = launch.to_json() | {"options": {"num_warps": 8, "os.system": 1}}
    assert RecordedLaunch.parse(forged).options is None
    assert RecordedLaunch.parse(launch.to_json() | {"options": [4]}).options is None
    assert RecordedLaunch.parse(launch.to_json() | {"options": {"num_warps": "8"}}).options is None
    with pytest.raises(ProtocolError):
        ReplayLaunch.parse(forged)


def _load(source: str, tmp_path):
    import importlib.util

    path = tmp_path / "attempt.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("attempt_record", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(
    ("options", "ok"),
    [
        ({}, True),
        ({"num_warps": 4, "num_stages": 3}, True),
        ({"num_warps": 32, "num_ctas": 2, "maxnreg": 128, "enable_fp_fusion": False}, True),
        ({"num_warps": 3}, False),
        ({"num_warps": 64}, False),
        ({"num_warps": True}, False),
        ({"num_stages": -1}, False),
        ({"num_stages": 1000}, False),
        ({"maxnreg": 0}, False),
        ({"enable_fp_fusion": 1}, False),
        (None, False),
    ],
)
def test_the_judge_replays_only_launch_options_triton_takes(options, ok):
    import torch

    from gpulab.judge.kernel_spec import Expect
    from gpulab.judge.replay_plan import plan_replay
    from gpulab.sandbox.replay_source import extract
    from gpulab.wire.launch_record import LaunchRecord, RecordedBuffer, RecordedLaunch, View

    source = extract(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(p):\n    pass\n"
    )
    out = View(0, 0, (8,), (1,), "float32")
    record = LaunchRecord(
        buffers=(RecordedBuffer(32, "float32", unknown=True),),
        launches=(
            RecordedLaunch(
                kernel="k", qualname="k", file="f.py", grid=(1,), args={}, options=options
            ),
        ),
        out=out,
        tensor_out=True,
    )
    plan, why = plan_replay(source, record, {}, [Expect((8,), torch.zeros(8), "x")], "f.py")
    if ok:
        assert plan is not None, why
        assert plan.launches[0].options == options
    else:
        assert plan is None and "launch option" in why, why


def test_two_draws_must_launch_with_the_same_options():
    # num_warps is a number the wrapper picks: an honest one follows the
    # shapes, the same for two draws of one shape. The order they are
    # passed in is not a difference.
    from gpulab.judge.two_draws import _launch_key
    from gpulab.wire.launch_record import RecordedLaunch

    def key(options):
        return _launch_key(RecordedLaunch(kernel="k", grid=(1,), args={}, options=options), ())

    assert key({"num_warps": 4}) != key({"num_warps": 8})
    assert key({"num_warps": 4}) != key({})
    assert key({"num_warps": 4, "num_stages": 2}) == key({"num_stages": 2, "num_warps": 4})


COPY_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
"""


def _compiled_copy(tmp_path, num_warps: int):
    """kernels `copy`, and it compiled for sm_90 by Triton's own compiler on
    this CPU (no GPU needed: Triton ships ptxas), as `copy[grid](...)`
    returns it on a GPU."""
    import triton
    from triton.backends.compiler import GPUTarget

    from gpulab.measure.compile_info import _source
    from gpulab.measure.compile_specs import load_module

    path = tmp_path / "kernels" / "copy.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(COPY_KERNEL)
    mod = load_module(path, f"copy_kernels_{num_warps}")
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    source = _source(mod.copy, sig, {"BLOCK": 256}, True, set())
    target = GPUTarget("cuda", 90, 32)
    return mod, triton.compile(source, target=target, options={"num_warps": num_warps}), target


def test_a_compiled_kernel_launched_directly_is_recorded_as_its_jit_launch(tmp_path):
    # `compiled[grid](x, y, n, 256)` (a launcher that skips the JIT's
    # dispatch; the sm_90 shared-memory softmax reference is one) passes
    # every parameter in order, constexprs included, and says every launch
    # option. It is recorded as the JIT launch it compiles from, with the
    # options that are not the defaults, so the replay can launch it through
    # the JIT, and a shape's two draws (one through the JIT, the first time,
    # one direct) compare equal. It was recorded as no launch at all.
    import torch

    from gpulab.judge.two_draws import _launch_key
    from gpulab.sandbox.replay import Recording, _option_defaults
    from gpulab.wire.launch_record import RecordedLaunch

    mod, compiled, target = _compiled_copy(tmp_path, num_warps=8)
    x, y = torch.randn(1000), torch.empty(1000)
    direct = Recording({})
    direct.launch_compiled(compiled, (4, 1, 1), (x, y, 1000, 256))
    [launch] = direct.launches
    assert isinstance(launch, RecordedLaunch) and not launch.error, launch
    assert (launch.kernel, launch.grid, launch.options) == ("copy", (4, 1, 1), {"num_warps": 8})
    assert launch.file == str(tmp_path / "kernels" / "copy.py")
    assert (launch.args or {})["n"] == 1000 and (launch.args or {})["BLOCK"] == 256, launch.args

    jit = Recording({})  # the first draw, through the JIT: num_stages=3 is the default
    options = {"num_warps": 8, "num_stages": 3}
    jit.launch(mod.copy, (x, y, 1000), {"grid": (4,), "BLOCK": 256, **options},
               defaults=_option_defaults(target))  # fmt: skip
    [through_jit] = jit.launches
    assert through_jit.options == {"num_warps": 8}, through_jit.options
    assert isinstance(through_jit, RecordedLaunch)
    assert _launch_key(through_jit, tuple(jit.buffers)) != _launch_key(launch, ())  # grid (4,)
    jit.launches.clear()
    index = jit.launch(mod.copy, (x, y, 1000), {"grid": (4, 1, 1), "BLOCK": 256, **options},
                       defaults=_option_defaults(target))  # fmt: skip
    jit.compiled(index, compiled)  # on a GPU the JIT returns the kernel it ran
    assert _launch_key(jit.launches[0], tuple(jit.buffers)) == _launch_key(
        launch, tuple(direct.buffers)
    )
    # Compiled with other options, it is another launch.
    _, four, _ = _compiled_copy(tmp_path, num_warps=4)
    other = Recording({})
    other.launch_compiled(four, (4, 1, 1), (x, y, 1000, 256))
    assert other.launches[0].options == {}
    assert _launch_key(other.launches[0], ()) != _launch_key(launch, ())


def test_a_compiled_kernel_of_no_known_source_is_a_launch_the_replay_refuses():
    from gpulab.sandbox.replay import Recording
    from gpulab.wire.launch_record import RecordedLaunch

    class Compiled:  # what a kernel compiled from IR text, with no Python source, is like
        metadata = None

    record = Recording({})
    record.launch_compiled(Compiled(), (1, 1, 1), ())
    assert record.launches == [RecordedLaunch(what="Compiled")]


# A wrapper that hands its kernels a zeroed buffer, a copy of the input and
# an output filled with NaN: fills, and bytes the replay may keep.
PREPARED = (
    """import torch
import triton
import triton.language as tl
"""
    + SOFTMAX_KERNEL
    + """

@triton.jit
def add_kernel(y_ptr, x_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(y_ptr + offs, mask=mask) + tl.load(z_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, v + 0 * tl.load(x_ptr + offs, mask=mask), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    xc = x.clone()
    y = torch.full_like(x, float("nan"))  # torch.empty_like, as gpulab's guard poisons it
    softmax_kernel[(n_rows,)](y, xc, xc.stride(0), y.stride(0), n_cols,
                              BLOCK=triton.next_power_of_2(n_cols), num_warps=2)
    z = torch.zeros_like(x)
    add_kernel[(triton.cdiv(x.numel(), 64),)](y, xc, z, x.numel(), BLOCK=64)
    return y
"""
)


def test_buffers_read_after_the_call_are_recorded_as_buffers_read_at_once(tmp_path):
    # A GPU's buffers are copied on the device at their first launch and
    # read when the call has ended (Recording.contents, `defer`); the CPU's
    # at once. Both must give the same record: the same fills, the same
    # bytes, and the same budget of bytes sent.
    in_interpreter("tests.judge.test_replay_record:read_later_record", tmp_path)


def read_later_record(tmp_path):
    import torch

    from gpulab.sandbox.guards import LaunchRecorder
    from gpulab.sandbox.replay import Recording, copy_watch

    mod = _load(PREPARED, tmp_path)
    x = torch.randn(3, 10)
    records = []
    for defer in (False, True):
        with LaunchRecorder(set()) as launches:
            launches.recording = Recording({}, defer=defer)
            with copy_watch(launches.recording):  # as gpulab.sandbox.calls calls it
                y = mod.softmax(x)
        records.append(launches.recording.result(y))
        assert not launches.recording.deferred
    at_once, later = records
    assert at_once == later
    fills = [b.fill for b in later.buffers]
    assert "00000000" in fills, later.buffers  # the zeros
    assert "0000c07f" in fills, later.buffers  # the NaNs
    assert any(b.data is not None for b in later.buffers), later.buffers  # the clone of x
    assert [la.options for la in later.launches] == [{"num_warps": 2}, {}]


def test_a_warp_specialized_kernel_launched_directly_keeps_its_launchs_num_warps():
    # A Gluon kernel with a loader partition: compiled with num_warps=8, its
    # metadata counts 12 warps (8 compute, the loader's rounded up to a
    # warpgroup). Recorded as 12, the replay refused it ("num_warps=12 is
    # not one Triton takes", the sm_90 softmax reference on an H100), and
    # launched with 12 it would be another kernel. The launch's is 8.
    pytest.importorskip("triton.experimental.gluon")
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from gpulab.measure.compile_specs import load_module
    from gpulab.sandbox.replay import Recording
    from tests.conftest import REPO

    m = load_module(REPO / "kernels" / "hopper" / "softmax_smem.py", "smem_record_warps")
    lay = m.shared_layout(torch.float16)
    d = f"tensordesc<fp16[32, {m.BOX}],{lay!r}>"
    sig = {"x_desc": d, "y_desc": d, "n_rows": "i32"}
    sig |= {k: "constexpr" for k in ("R", "NSLOT", "ONE_EXP")}
    source = GluonASTSource(m.softmax_smem, sig, {"R": 4, "NSLOT": 5, "ONE_EXP": False})
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
    assert compiled.metadata.num_warps == 12
    x, y = torch.randn(2, 1024).half(), torch.empty(2, 1024).half()
    descs = [TensorDescriptor(t, [8, 256], [256, 1], [32, 256], lay) for t in (x, y)]
    rec = Recording({})
    rec.launch_compiled(compiled, (2, 1, 1), (*descs, 2, 4, 5, False))
    [launch] = rec.launches
    assert launch.kernel == "softmax_smem" and launch.options == {"num_warps": 8}, launch
