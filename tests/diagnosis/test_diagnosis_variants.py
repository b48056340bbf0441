"""Issue 21, point 3: slow-but-correct variants of every kernel exercise
(tests/fixtures/slow_kernels) get the expected top diagnosis on the CPU,
for the H200's datasheet: through the judge's and the sandbox's functions
in-process (compile facts for the case that matters most), and once
through the real `gpulab check --explain --json`. Each fixture is a correct
solution, slow for the one reason its first lines state.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SLOW = ROOT / "tests" / "fixtures" / "slow_kernels"
MANIFEST = {
    "softmax": ("softmax", "memory", "5*M*N", "2*M*N*elt"),
    "matmul": ("matmul", "compute", "2*M*N*K", "(M*K + K*N + M*N)*elt"),
    "bandwidth": ("triad", "memory", "2*N", "3*N*elt"),
    "flash_attention": (
        "attention",
        "compute",
        "4*B*H*Sq*Sk*D / (2 if causal else 1)",
        "(2*B*H*Sq*D + 2*B*H*Sk*D)*elt",
    ),
    "rope_rmsnorm": (
        "rmsnorm_rope",
        "memory",
        "7*B*S*H*D",
        "2*B*S*H*D*elt + 2*S*(D//2)*4 + D*elt",
    ),
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
        # The real Server holds the bytes the judge read at the check's start.
        self.source: bytes | None = file.read_bytes()

    def ask(self, message: Any, kind: Any) -> Any:
        """As gpulab.judge.remote.Sandbox.ask: the reply read as a `kind`."""
        from gpulab.wire.replies import read_reply

        return read_reply(self.request(message), kind)

    def request(self, message: Any) -> dict:
        from gpulab.explain.sandbox.plugin import explain_request
        from gpulab.sandbox.learner import load_module
        from gpulab.wire.explain import ExplainRequest

        msg = ExplainRequest.parse(message.to_json())
        return explain_request(self, msg, load_module).to_json()


def explain_file(exercise: str, file: Path) -> dict:
    from gpulab.explain.judge.plugin import explain
    from gpulab.judge import plugin_host

    function, kind, flops, nbytes = MANIFEST[exercise]
    from gpulab.wire.check_request import CheckRequest

    request = CheckRequest(
        exercise=exercise,
        function=function,
        file=str(file),
        kind=kind,
        flops=flops,
        bytes=nbytes,
        explain=True,
        explain_budget_s=0,
        # The GPU the H200 runs of scripts/research/explain_gpu.py check these on.
        explain_gpu="H200",
    )
    saved = os.environ.pop("TRITON_INTERPRET", None)
    try:
        return explain(
            request, {"status": "passed"}, "cpu", _InProcessSandbox(file), graders=plugin_host
        )
    finally:
        if saved is not None:
            os.environ["TRITON_INTERPRET"] = saved


# (fixture, exercise, expected top kind, a number its evidence must quote).
# The same list as scripts/research/explain_gpu.py's VARIANTS, which checks
# them on an H200 with timing; test_variants_match_the_gpu_script keeps them
# in step.
VARIANTS = [
    ("softmax_one_program.py", "softmax", "too_few_programs", "grid of 1 program"),
    ("softmax_three_pass.py", "softmax", "extra_bytes", "x_ptr at 3 places"),
    ("softmax_one_warp.py", "softmax", "register_spills", "spilled"),
    ("bandwidth_small_blocks.py", "bandwidth", "low_occupancy", "192 bytes a program"),
    ("bandwidth_few_programs.py", "bandwidth", "too_few_programs", "grid of 64 programs"),
    ("matmul_no_dot.py", "matmul", "no_tensor_cores", "no mma/wgmma"),
    # No grouped order costs L2 hits, measurable only on a GPU (DRAM bytes);
    # on the CPU the wave's footprint against the L2 is what is derived.
    ("matmul_row_major.py", "matmul", "extra_bytes", "panels of A and 64 of B"),
    ("matmul_small_tiles.py", "matmul", "wrong_roof", "8 FLOP per byte"),
    ("matmul_spills.py", "matmul", "register_spills", "spilled"),
    ("flash_attention_no_dot.py", "flash_attention", "no_tensor_cores", "no mma/wgmma"),
    (
        "flash_attention_one_program_per_head.py",
        "flash_attention",
        "too_few_programs",
        "grid of 16 programs",
    ),
    ("flash_attention_spills.py", "flash_attention", "register_spills", "spilled"),
    ("rope_rmsnorm_unfused.py", "rope_rmsnorm", "extra_bytes", "read back by _rope"),
    ("rope_rmsnorm_one_head.py", "rope_rmsnorm", "low_occupancy", "516 bytes a program"),
]


@pytest.mark.parametrize("fixture, exercise, top, quote", VARIANTS)
def test_slow_variant_top_diagnosis(fixture: str, exercise: str, top: str, quote: str) -> None:
    out = explain_file(exercise, SLOW / fixture)
    assert out["explain"]["error"] == ""
    kinds = [d["kind"] for d in out["diagnosis"]]
    assert kinds and kinds[0] == top, (kinds, out["diagnosis"][:2])
    first = out["diagnosis"][0]
    assert quote in first["evidence"], first["evidence"]
    assert any(ch.isdigit() for ch in first["evidence"])  # evidence is numbers
    assert "lesson 0" in first["advice"], first["advice"]
    lesson = (ROOT / "lessons" / first["lesson"] / "lesson.md").read_text()
    assert f"## {first['section']}\n" in lesson


def test_every_kernel_exercise_has_variants() -> None:
    from gpulab.explain.kinds import explained

    assert {v[1] for v in VARIANTS} == set(explained())
    on_disk = {p.name for p in SLOW.glob("*.py")}
    assert on_disk == {v[0] for v in VARIANTS}, on_disk ^ {v[0] for v in VARIANTS}


def test_variants_match_the_gpu_script() -> None:
    sys.path.insert(0, str(ROOT / "scripts" / "research"))
    try:
        import explain_gpu
    finally:
        sys.path.pop(0)
    gpu = {(f, ex, top) for f, ex, top in explain_gpu.VARIANTS if top is not None}
    assert gpu == {(f, ex, top) for f, ex, top, _ in VARIANTS}


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
