"""Issue 44: on a GPU the replay launches the compiled kernels a check ran
(gpulab.wire.kernel_binary, gpulab.sandbox.binaries) and never the file's
Python. What can be proven without a GPU: a kernel Triton compiles for
sm_90 on this CPU (it ships ptxas) is recorded with its binary, crosses the
boundary as checked data, is planned by the judge with its arguments held
to its parameters, and is rebuilt as Triton's own CompiledKernel in a
process that never imports the kernel's file. The launches themselves are
the GPU tests' (tests/judge/test_replay_timing.py, `gpu` marked)."""

from __future__ import annotations

import base64
import dataclasses
import json
import subprocess
import sys

import pytest

from tests.judge.test_replay_record import _compiled_copy


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("binaries")
    mod, kernel, _ = _compiled_copy(tmp, num_warps=4)
    return mod, kernel


@pytest.fixture(autouse=True)
def _fresh_registry(monkeypatch):
    import gpulab.sandbox.replay as replay

    monkeypatch.setattr(replay, "_IDENTS", {})
    monkeypatch.setattr(replay, "_BINARIES", {})
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


def _record(kernel, n=1000):
    import torch

    from gpulab.sandbox.replay import Recording

    x, y = torch.randn(n), torch.empty(n)
    rec = Recording({})
    rec.launch_compiled(kernel, (4, 1, 1), (x, y, n, 256))
    return rec.result(y)


def test_a_compiled_kernel_is_recorded_with_its_binary_and_crosses_as_data(compiled):
    from gpulab.wire.launch_record import LaunchRecord, RecordedLaunch

    _, kernel = compiled
    record = _record(kernel)
    [launch] = record.launches
    assert isinstance(launch, RecordedLaunch) and launch.binary == 0, launch
    [binary] = record.binaries
    assert binary is not None
    assert binary.name == "copy"
    assert binary.params == (
        ("x_ptr", "*fp32"),
        ("y_ptr", "*fp32"),
        ("n", "i32"),
        ("BLOCK", "constexpr"),
    )
    assert base64.b64decode(binary.cubin) == kernel.asm["cubin"]
    assert binary.metadata["target"]["arch"] == 90
    # Through JSON, as the judge reads it: the same record.
    again = LaunchRecord.parse(json.loads(json.dumps(record.to_json())))
    assert again == record


def _binary_json(kernel) -> dict:
    from gpulab.sandbox.binaries import binary_of

    binary = binary_of(kernel, 3)
    assert binary is not None
    return binary.to_json()


@pytest.mark.parametrize(
    "field, value",
    [
        # A type the launcher is built from, carrying C or Python.
        ("params", [["x_ptr", '*fp32); system("id"'], ["n", "i32"]]),
        ("params", [["x_ptr", "i32\n"], ["n", "i32"]]),
        ("params", [["not a name", "i32"]]),
        ("params", [["n", ["i32", ["i32", ["i32", ["i32"]]]]]]),  # nested past its depth
        ("name", "copy; rm"),
        ("name", "other"),  # not the metadata's
        ("cubin", "not base64!"),
        ("cubin", ""),
        ("ident", -2),
        ("ident", "0"),
        ("constants", [[[99], 1]]),
        ("constants", [[[0], {"a": 1}]]),
    ],
)
def test_a_malformed_binary_is_refused_at_the_boundary(compiled, field, value):
    from gpulab.wire.kernel_binary import KernelBinary

    raw = _binary_json(compiled[1])
    assert KernelBinary.parse(raw) is not None
    raw[field] = value
    assert KernelBinary.parse(raw) is None


@pytest.mark.parametrize(
    "meta",
    [
        {"bad key": 1},
        {"target": {"backend": "hip", "arch": 90, "warp_size": 32}},
        {"shared": float("nan")},
        {"deep": [[[[["x"]]]]]},
        {"text": "\x1b[2J"},
    ],
)
def test_malformed_metadata_is_refused(compiled, meta):
    from gpulab.wire.kernel_binary import KernelBinary

    raw = _binary_json(compiled[1])
    raw["metadata"] = {**raw["metadata"], **meta}
    assert KernelBinary.parse(raw) is None


def test_the_judge_plans_a_binary_launch_and_holds_its_arguments_to_its_parameters(compiled):
    from gpulab.judge.replay_params import params_problem
    from gpulab.judge.replay_plan import plan_replay
    from gpulab.wire.launch_record import BufferArg, FloatArg, RecordedLaunch, TupleArg

    _, kernel = compiled
    record = _record(kernel)
    [binary] = record.binaries
    assert binary is not None

    class Expect:
        shape = (1000,)

        class like:  # noqa: N801 - an Expect's tensor
            import torch

            dtype = torch.float32

    plan, problem = plan_replay({0: binary}, record, {}, [Expect], "f.py")
    assert plan is not None, problem
    [launch] = plan.launches
    assert launch.binary == 0 and launch.kernel == "copy"

    args = dict(record.launches[0].args)
    assert params_problem(binary, args) == ""
    n_as_pointer = {**args, "n": args["x_ptr"]}
    assert "not an integer" in params_problem(binary, n_as_pointer)
    half = dataclasses.replace(args["x_ptr"].view, dtype="float16")
    assert "float16" in params_problem(binary, {**args, "x_ptr": BufferArg(half)})
    assert "not a tensor" in params_problem(binary, {**args, "y_ptr": FloatArg("0x1p0")})
    assert "out of its range" in params_problem(binary, {**args, "n": 1 << 40})
    assert "missing n" in params_problem(binary, {k: v for k, v in args.items() if k != "n"})
    assert "tuple" not in params_problem(binary, {**args, "BLOCK": TupleArg((1, 2))})  # constexpr

    # A launch that names no binary, or one the judge was never sent.
    unknown = dataclasses.replace(record.launches[0], binary=7)
    forged = dataclasses.replace(record, launches=(unknown,))
    plan, problem = plan_replay({0: binary}, forged, {}, [Expect], "f.py")
    assert plan is None and "could not be read" in problem
    none = dataclasses.replace(record, launches=(dataclasses.replace(unknown, binary=None),))
    plan, problem = plan_replay({0: binary}, none, {}, [Expect], "f.py")
    assert plan is None and "no compiled kernel" in problem
    assert isinstance(unknown, RecordedLaunch)


def test_a_binary_sent_again_under_its_ident_must_be_the_same(compiled):
    from gpulab.judge.replay import Replayer

    _, kernel = compiled
    record = _record(kernel)
    replayer = Replayer(lambda: None, "f.py", b"", device="cuda")
    assert replayer._learn(record) == ""
    [binary] = record.binaries
    assert binary is not None
    other = dataclasses.replace(binary, metadata={**binary.metadata, "shared": 1024})
    forged = dataclasses.replace(record, binaries=(other,))
    assert "different" in replayer._learn(forged)
    assert "malformed" in replayer._learn(dataclasses.replace(record, binaries=(None,)))


def test_tuple_arguments_are_recorded_and_passed_again():
    import torch

    from gpulab.sandbox.replay import Recording
    from gpulab.sandbox.replay_run import _decode
    from gpulab.wire.launch_record import LaunchRecord, TupleArg, parse_arg

    x = torch.arange(12.0).reshape(3, 4)
    rec = Recording({})
    value = rec.value((x.stride(0), x.stride(1)))
    assert value == TupleArg((4, 1))
    nested = rec.value((x, (2, 1.5)))
    assert isinstance(nested, TupleArg)
    json_form = LaunchRecord(buffers=(), launches=()).to_json()  # (a record round trips)
    assert LaunchRecord.parse(json_form) is not None
    from gpulab.wire.launch_record import arg_json

    assert parse_arg(json.loads(json.dumps(arg_json(nested)))) == nested
    decoded = _decode(nested, [x.reshape(-1).view(torch.uint8)])
    assert torch.equal(decoded[0], x) and decoded[1] == (2, 1.5)
    # Too deep or too long: not an argument gpulab can pass.
    deep: object = 1
    for _ in range(6):
        deep = {"__tuple__": [deep]}
    assert type(parse_arg(deep)).__name__ == "OtherArg"


REBUILD = """
import json, sys
from gpulab.wire.kernel_binary import KernelBinary
from gpulab.sandbox.binaries import Loaded

binary = KernelBinary.parse(json.loads(sys.stdin.read()))
loaded = Loaded()
loaded.add(binary)
kernel = loaded.kernels[binary.ident]
print(json.dumps({
    "name": kernel.name,
    "signature": kernel.src.signature,
    "num_warps": kernel.metadata.num_warps,
    "cubin": kernel.kernel == binary.cubin_bytes(),
    "kernel_modules": sorted(m for m in sys.modules if m.startswith("copy_kernels")),
}))
"""


def test_the_replay_rebuilds_the_compiled_kernel_from_data_alone(compiled):
    # In a fresh process that never imports the kernel's file: Triton's own
    # CompiledKernel made from the binary's files (its launcher and module
    # come at the first launch, on a GPU).
    from tests.conftest import REPO

    raw = _binary_json(compiled[1])
    out = subprocess.run(
        [sys.executable, "-c", REBUILD],
        input=json.dumps(raw),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {
        "name": "copy",
        "signature": {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
        "num_warps": 4,
        "cubin": True,
        "kernel_modules": [],
    }


def test_the_two_draw_rule_sees_another_compiled_kernel(compiled):
    from gpulab.judge.two_draws import _launch_key

    _, kernel = compiled
    record = _record(kernel)
    [launch] = record.launches
    other = dataclasses.replace(launch, binary=5)
    assert _launch_key(launch, record.buffers or ()) != _launch_key(other, record.buffers or ())


def test_the_hopper_references_gluon_kernels_cross_as_binaries():
    # The shared-memory softmax (Gluon, TMA descriptors with an NVMMA layout,
    # warp-specialized) compiled for sm_90 here; its descriptor type names a
    # field with a digit (fp4_padded), which a first grammar refused on the
    # H100 ("its compiled kernel could not be read", 2026-12-07).
    pytest.importorskip("triton.experimental.gluon")
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    from gpulab.measure.compile_specs import load_module
    from gpulab.sandbox.binaries import binary_of
    from gpulab.wire.kernel_binary import KernelBinary, sig_type
    from tests.conftest import REPO

    m = load_module(REPO / "kernels" / "hopper" / "softmax_smem.py", "smem_binaries")
    lay = m.shared_layout(torch.float16)
    d = f"tensordesc<fp16[32, {m.BOX}],{lay!r}>"
    sig = {"x_desc": d, "y_desc": d, "n_rows": "i32"}
    sig |= {k: "constexpr" for k in ("R", "NSLOT", "ONE_EXP")}
    source = GluonASTSource(m.softmax_smem, sig, {"R": 4, "NSLOT": 5, "ONE_EXP": False})
    kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
    binary = binary_of(kernel, 1)
    assert isinstance(binary, KernelBinary), binary
    # FA3's, as Triton 3.6 wrote it on the H100 (benchmarks/h100-2026-12-07-cubin).
    fa3 = (
        "tensordesc<bf16[64, 128],NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16,"
        " rank=2, transposed=False, fp4_padded=False, cga_layout=[])>"
    )
    assert sig_type(fa3) == fa3
    assert sig_type("tensordesc<bf16[128, 64]>") == "tensordesc<bf16[128, 64]>"
    assert sig_type(fa3.replace("cga_layout=[]", "cga_layout=[__import__]")) is None
