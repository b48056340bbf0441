"""Issue 21: `gpulab check EX --explain` says what limits the kernel.

Slow-but-correct variants (tests/fixtures/slow_kernels) must get the
expected top diagnosis on the CPU, for the datasheet GPU: through the judge
and sandbox functions in-process (compile facts for one kernel each), and
once through the real `gpulab check --explain --json`. The rules also run on
hand-made facts, one per kind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpulab.diagnosis import KINDS, diagnose
from gpulab.diagnosis.kinds import where

ROOT = Path(__file__).resolve().parent.parent
SLOW = ROOT / "tests" / "fixtures" / "slow_kernels"
MANIFEST = {
    "softmax": ("softmax", "memory", "5*M*N", "2*M*N*elt"),
    "matmul": ("matmul", "compute", "2*M*N*K", "(M*K + K*N + M*N)*elt"),
}


@pytest.fixture(autouse=True)
def _private_triton_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The real sandbox gets a private TRITON_CACHE_DIR, beside which the
    # compile facts are cached. In-process, without one, they were cached in
    # the working directory, the repo: every later run (on any Triton) read
    # the facts of the first instead of compiling.
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))


class _InProcessSandbox:
    """The sandbox's request handler called directly (same code, no process)."""

    def __init__(self, file: Path) -> None:
        self.device, self.file, self.module = "cpu", str(file), None

    def request(self, msg: dict) -> dict:
        from gpulab.diagnosis.sandbox_side import explain_request

        return explain_request(self, msg)


def explain_file(exercise: str, file: Path) -> dict:
    from gpulab.diagnosis.judge_side import explain

    function, kind, flops, nbytes = MANIFEST[exercise]
    request = {
        "exercise": exercise,
        "function": function,
        "kind": kind,
        "flops": flops,
        "bytes": nbytes,
        "explain": True,
        "explain_budget_s": 0,
    }
    saved = os.environ.pop("TRITON_INTERPRET", None)
    try:
        return explain(request, {"status": "passed"}, "cpu", _InProcessSandbox(file))
    finally:
        if saved is not None:
            os.environ["TRITON_INTERPRET"] = saved


@pytest.mark.parametrize(
    "fixture, exercise, top",
    [
        ("softmax_one_program.py", "softmax", "too_few_programs"),
        ("softmax_three_pass.py", "softmax", "extra_bytes"),
        ("softmax_one_warp.py", "softmax", "register_spills"),
        ("matmul_no_dot.py", "matmul", "no_tensor_cores"),
    ],
)
def test_slow_variant_top_diagnosis(fixture: str, exercise: str, top: str) -> None:
    out = explain_file(exercise, SLOW / fixture)
    assert out["explain"]["error"] == ""
    kinds = [d["kind"] for d in out["diagnosis"]]
    assert kinds and kinds[0] == top, (kinds, out["diagnosis"][:2])
    first = out["diagnosis"][0]
    assert first["evidence"] and first["advice"] and "lesson" in first["advice"]


def test_reference_softmax_has_no_serious_finding() -> None:
    out = explain_file("softmax", ROOT / "kernels" / "softmax.py")
    serious = [d for d in out["diagnosis"] if d["severity"] >= 0.3]
    assert not serious, serious


def test_cli_explain_json_on_cpu(tmp_path: Path) -> None:
    """The real path: lab -> judge -> sandbox, on the CPU."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpulab",
            "--workspace",
            str(tmp_path / "ws"),
            "check",
            "softmax",
            "--file",
            str(SLOW / "softmax_one_program.py"),
            "--explain",
            "--json",
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=ROOT,
    )
    result = json.loads(proc.stdout)
    assert result["status"] == "passed", result.get("summary")
    assert result["diagnosis"][0]["kind"] == "too_few_programs", result.get("explain")
    assert "grid of 1 program on 132 SMs" in result["diagnosis"][0]["evidence"]
    assert "advice" in result["explain"]["advisory"]


# --- the rules on hand-made facts ---------------------------------------------------

H100 = {
    "name": "H100 SXM",
    "sms": 132,
    "bandwidth": 3.35e12,
    "l2_mb": 50,
    "flops": {"fp32": 67e12, "fp16": 989e12, "bf16": 989e12},
    "arch": "sm_90",
}


def _facts(kind="memory", exercise="softmax", launches=None, compiled=None, **case):
    c = {
        "name": "c",
        "dtype": "fp16",
        "bytes": 2 * 8192 * 4096 * 2,
        "flops": 5 * 8192 * 4096,
        "work": 2 * 8192 * 4096 * 2,
        "launches": launches or [],
        **case,
    }
    return {
        "exercise": exercise,
        "kind": kind,
        "gpu": H100,
        "cases": [c],
        "compiled": compiled or {},
    }


def _info(**kw):
    base = {
        "ok": True,
        "arch": "sm_90",
        "label": "k",
        "registers": 32,
        "spill_stores": 0,
        "spill_loads": 0,
        "shared": 0,
        "num_warps": 4,
        "blocks_per_sm": 16,
        "limited_by": "threads",
        "occupancy": 1.0,
        "fits": True,
        "tensor_cores": "",
        "loads": {"x_ptr": 1},
        "atomics": 0,
        "loops": 0,
        "dot": False,
        "grouped": False,
    }
    return {**base, **kw}


def _launch(programs=8192, **kw):
    return {
        "kernel": "k",
        "key": "K",
        "programs": programs,
        "grid": [programs],
        "num_warps": 4,
        "constexprs": {"BLOCK": 4096},
        **kw,
    }


@pytest.mark.parametrize(
    "facts, top",
    [
        (_facts(launches=[_launch()], compiled={"K": _info()}), None),
        (
            _facts(launches=[_launch(programs=1)], compiled={"K": _info(loops=1)}),
            "too_few_programs",
        ),
        (
            _facts(
                launches=[_launch()],
                compiled={"K": _info(spill_stores=700, spill_loads=700, registers=255)},
            ),
            "register_spills",
        ),
        (
            _facts(
                launches=[_launch()],
                compiled={"K": _info(occupancy=0.06, blocks_per_sm=4, num_warps=1)},
            ),
            "low_occupancy",
        ),
        (_facts(launches=[_launch()], compiled={"K": _info(loads={"x_ptr": 3})}), "extra_bytes"),
        (
            _facts(launches=[_launch(programs=140)], compiled={"K": _info(blocks_per_sm=1)}),
            "tail_wave",
        ),
        (
            _facts(
                launches=[_launch(programs=64) for _ in range(20)],
                compiled={"K": _info()},
                bytes=4096,
                work=4096,
            ),
            "launch_bound",
        ),
        (_facts(launches=[_launch()], compiled={"K": _info(atomics=2)}), "serialised_reduction"),
        (
            _facts(
                kind="compute",
                exercise="matmul",
                launches=[_launch()],
                compiled={"K": _info(dot=True)},
                flops=2 * 4096**3,
            ),
            "no_tensor_cores",
        ),
        (
            _facts(
                kind="compute",
                exercise="flash_attention",
                launches=[_launch()],
                compiled={"K": _info(dot=True, tensor_cores="wgmma")},
                flops=4 * 2**30 * 64,
                bytes=2**26,
                exps=2**32,
            ),
            "wrong_roof",
        ),
    ],
)
def test_rules_top_kind(facts: dict, top: str | None) -> None:
    found = diagnose(facts)
    assert (found[0]["kind"] if found else None) == top, found
    assert [d["severity"] for d in found] == sorted((d["severity"] for d in found), reverse=True)


def test_every_kind_points_at_a_real_lesson_section() -> None:
    for kind in KINDS:
        for exercise in ("softmax", "matmul", "flash_attention", "rope_rmsnorm", "bandwidth"):
            w = where(kind, exercise)
            text = (ROOT / "lessons" / w["lesson"] / "lesson.md").read_text()
            assert f"## {w['section']}\n" in text, (kind, exercise, w)


def test_ttir_counts_three_passes() -> None:
    from gpulab.diagnosis.ttir import analyse

    ttir = """tt.func public @k(%y_ptr: !tt.ptr<f32> loc(1), %x_ptr: !tt.ptr<f32> loc(2)) {
    %a = tt.addptr %x_ptr, %c : !tt.ptr<f32>, i32
    %b = tt.splat %a : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %v = tt.load %b, %m : tensor<1024x!tt.ptr<f32>>
    %w = tt.load %b, %m : tensor<1024x!tt.ptr<f32>>
    %q = tt.splat %y_ptr : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %r = "tt.atomic_rmw"(%q, %v) : (tensor<1024x!tt.ptr<f32>>) -> tensor<1024xf32>
    """
    got = analyse(ttir)
    assert got["loads"] == {"x_ptr": 2} and got["atomics"] == 1
