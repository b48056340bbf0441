"""Compiling for GPUs this machine does not have (gpulab.measure.compile_info and
`gpulab dev compile`): Triton's real compiler and ptxas, no GPU. A fast
subset here; the whole matrix (every reference x every target) is the slow
test at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from gpulab.measure.compile_info import (
    ARCHS,
    CompileInfo,
    occupancy,
    parse_arch,
    parse_ptxas_log,
    tensor_core_ops,
)
from tests.conftest import REPO, gpulab_env

PTXAS_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'matmul_kernel' for 'sm_80'
ptxas info    : Function properties for matmul_kernel
    0 bytes stack frame, 668 bytes spill stores, 700 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 432 bytes cmem[0]
"""


def test_ptxas_report_is_parsed():
    assert parse_ptxas_log(PTXAS_LOG) == {"matmul_kernel": (255, 668, 700)}
    assert parse_ptxas_log("") == {}


def test_tensor_core_families_from_ptx():
    assert tensor_core_ops("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {") == "mma"
    assert tensor_core_ops("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16") == "wgmma"
    assert tensor_core_ops("tcgen05.mma.cta_group::1.kind::f16 [%r1]") == "tcgen05"
    assert tensor_core_ops("fma.rn.f32 %f1, %f2, %f3, %f4;") == ""


def test_occupancy_from_each_limit():
    t4, h100 = ARCHS[75], ARCHS[90]
    # 4 warps of 32 registers: the T4's 1024 threads allow 8 blocks.
    assert occupancy(t4, 32, 0, 4) == (8, "threads")
    # 128 registers a thread: 4096 a warp, so 16 warps of 64K: 4 blocks of 4 warps.
    assert occupancy(h100, 128, 0, 4) == (4, "registers")
    # Registers are allocated per warp in 256s: 37 a thread is 1280 a warp, not 1184.
    assert occupancy(h100, 37, 0, 4) == (12, "registers")
    # 100 KiB of shared memory: two blocks on an H100, none on a T4 (64 KiB).
    assert occupancy(h100, 32, 100 * 1024, 4) == (2, "shared memory")
    assert occupancy(t4, 32, 100 * 1024, 4) == (0, "shared memory")


def test_arch_names():
    assert parse_arch("sm_90") == parse_arch("sm_90a") == parse_arch("9.0") == 90
    with pytest.raises(ValueError, match="sm_75"):
        parse_arch("sm_70")


KERNELS = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    @triton.jit
    def dot(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
        r = tl.arange(0, BLOCK)
        a = tl.load(a_ptr + r[:, None] * BLOCK + r[None, :])
        b = tl.load(b_ptr + r[:, None] * BLOCK + r[None, :])
        tl.store(c_ptr + r[:, None] * BLOCK + r[None, :], tl.dot(a, b))

    @triton.jit
    def broken(x_ptr, BLOCK: tl.constexpr):
        tl.store(x_ptr + tl.arange(0, BLOCK), tl.no_such_op(1))
""")


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    from gpulab.measure.compile_specs import load_module

    path = tmp_path_factory.mktemp("k") / "kernels" / "toy.py"
    path.parent.mkdir()
    path.write_text(KERNELS)
    return load_module(path, "toy_kernels")


def test_a_kernel_compiles_for_turing_and_hopper_without_a_gpu(kernels):
    from gpulab.measure.compile_info import compile_kernel

    sig = {"x_ptr": "*fp16", "y_ptr": "*fp16", "n": "i32", "BLOCK": "constexpr"}
    for arch in ("sm_75", "sm_90"):
        info = compile_kernel(
            kernels.scale, sig, {"BLOCK": 1024}, arch=arch, options={"num_warps": 4}
        )
        assert info.ok, info.error
        assert info.arch == arch and info.num_warps == 4 and info.shared == 0
        assert 0 < info.registers <= 255 and info.spills == 0, info
        assert info.blocks_per_sm > 0 and not info.uses_tensor_cores


def test_tensor_cores_per_architecture(kernels):
    # The same tl.dot: no tensor cores from Triton on Turing, mma.sync on
    # Ampere, wgmma on Hopper, tcgen05 on data-centre Blackwell.
    from gpulab.measure.compile_info import compile_kernel

    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "BLOCK": "constexpr"}
    got = {
        a: compile_kernel(kernels.dot, sig, {"BLOCK": 64}, arch=a, options={"num_warps": 4})
        for a in ("sm_80", "sm_90", "sm_100")
    }
    assert {a: i.tensor_cores for a, i in got.items()} == {
        "sm_80": "mma",
        "sm_90": "wgmma",
        "sm_100": "tcgen05",
    }, got
    assert all(i.shared > 0 for i in got.values())


def test_a_kernel_that_does_not_compile_is_a_result_not_a_crash(kernels):
    from gpulab.measure.compile_info import compile_kernel

    info = compile_kernel(
        kernels.broken, {"x_ptr": "*fp32", "BLOCK": "constexpr"}, {"BLOCK": 128}, arch="sm_80"
    )
    assert isinstance(info, CompileInfo) and not info.ok and not info.fits
    assert "no_such_op" in info.error, info.error


def _dev_compile(tmp_path, *args):
    return subprocess.run(
        [sys.executable, "-m", "gpulab", "dev", "compile", *args],
        capture_output=True,
        text=True,
        timeout=3600,
        cwd=REPO,
        env=gpulab_env(tmp_path / "ws"),
    )


def test_dev_compile_one_exercise_on_two_targets(tmp_path):
    r = _dev_compile(tmp_path, "--arch", "sm_75,sm_90", "--only", "bandwidth", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    rows = out["rows"]
    assert {(x["role"], x["arch"]) for x in rows} == {
        (role, arch) for role in ("reference", "starter") for arch in ("sm_75", "sm_90")
    }
    assert all(x["ok"] and x["registers"] and x["fits"] for x in rows), rows
    assert out["failures"] == 0


def test_the_hopper_references_in_kernels_hopper_set_up_as_jobs():
    """The Gluon kernels live in kernels/hopper/; their specs must find them
    and their exercise's reference (a job, not an error triple). The whole
    matrix that compiles them is opt-in, so this is the everyday check."""
    pytest.importorskip("triton.experimental.gluon")
    from gpulab.judge import loader
    from gpulab.measure import compile_specs

    specs = tuple(s for s in loader.compile_specs(REPO)[0] if s.file)
    assert {s.file for s in specs} == {"hopper/softmax_smem", "hopper/flash_attention_fa3"}
    out = list(compile_specs.jobs(REPO, specs))
    assert [type(j).__name__ for j in out] == ["Job", "Job"], out


def test_dev_compile_refuses_an_unknown_target(tmp_path):
    r = _dev_compile(tmp_path, "--arch", "sm_70")
    assert r.returncode == 2 and "sm_75" in r.stderr, r.stderr


def test_a_reference_that_fails_to_compile_fails_the_command(monkeypatch):
    # One spec that cannot be set up (its kernel is missing) must count.
    from gpulab.cli.commands import dev_compile
    from gpulab.judge import loader
    from gpulab.measure import compile_specs

    bad = compile_specs.Spec(
        "no_such_kernel", "x", lambda m, fn: ({}, {}, {}), exercise="bandwidth"
    )
    monkeypatch.setattr(loader, "compile_specs", lambda root, exercises=None: ((bad,), []))
    rows = dev_compile.compile_matrix([80])
    assert dev_compile.failures(rows) and "no_such_kernel" in rows[0].error


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.skipif(
    not os.environ.get("GPULAB_COMPILE_MATRIX"),
    reason="the whole matrix (~190 compiles) took 40 min on a busy 2-core "
    "machine: set GPULAB_COMPILE_MATRIX=1 to run it",
)
def test_every_reference_compiles_for_every_target_it_claims(tmp_path):
    r = _dev_compile(tmp_path, "--json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = json.loads(r.stdout)["rows"]
    names = {x["name"].split(" ")[0] for x in rows}
    for kernel in (
        "bandwidth:triad_kernel",
        "softmax:softmax_kernel",
        "matmul:matmul_kernel",
        "flash_attention:attention_kernel",
        "rope_rmsnorm:_rmsnorm_rope_fwd",
        "softmax:softmax_smem",
        "flash_attention:attention_fa3",
        "matmul:matmul_kernel_tma",
    ):
        assert kernel in names, kernel
    # Hopper-only paths only where the arch has them.
    fa3 = {x["arch"] for x in rows if x["name"].startswith("flash_attention:attention_fa3 ")}
    assert fa3 == {"sm_90"}
    assert {x["arch"] for x in rows if x["name"].startswith("bandwidth")} == set(
        f"sm_{cc}" for cc in ARCHS
    )
