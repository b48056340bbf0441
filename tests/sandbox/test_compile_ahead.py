"""The compile-ahead (gpulab.sandbox.ahead, issue 32): a check records the
specialisations its kernels compiled with; the next check of the edited
file compiles them in forked workers before its first case, and its graded
launches then compile nothing themselves.

This box has no GPU, so child Pythons run it against Triton's real CUDA
compiler (ptxas ships with Triton) for an sm_90 target, behind a stand-in
driver that says which device and target there are: only what the
hardware lacks is faked. A kernel's `warmup` stands for its first launch
(it compiles exactly as a launch does, and launches nothing). The GPU path
as a whole is measured on the H200 (BENCHMARKS.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpulab.sandbox import ahead

REPO = Path(__file__).resolve().parents[2]

LEARNER = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _rows(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * n_cols + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, 0)
    e = tl.exp(x)
    tl.store(out_ptr + row * n_cols + offs, e / tl.sum(e, 0) * SCALE, mask=mask)


@triton.autotune(
    configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)],
    key=["n"],
)
@triton.jit
def _scale(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(in_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def first_launches():
    """What a check's graded calls compile: three row widths, and the
    autotuned kernel for two sizes."""
    for n, dt in [(7, torch.float32), (1000, torch.float32), (100, torch.float16)]:
        x = torch.zeros(4, n, dtype=dt)
        _rows.warmup(x, x, n, BLOCK=triton.next_power_of_2(n), grid=(4,))
    for n in (21, 2000):
        x = torch.zeros(n)
        _scale.warmup(x, x, n, grid=(1,))
'''

SCRIPT = """
import json, os, sys
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import CUDABackend
from triton.runtime import driver

PARENT = os.getpid()

def cuda():  # as torch is: CUDA may not be asked in a forked child
    if os.getpid() != PARENT:
        raise RuntimeError("Cannot re-initialize CUDA in forked subprocess")

class StandIn:  # what the hardware lacks: a CUDA device to ask
    def get_current_device(self): cuda(); return 0
    def get_current_stream(self, device=None): cuda(); return 0
    def get_current_target(self): cuda(); return GPUTarget("cuda", 90, 32)
    def get_active_torch_device(self): return torch.device("cpu")
driver.set_active(StandIn())

folder, check = sys.argv[1], sys.argv[2]
sys.path.insert(0, folder)
import learner
from gpulab.sandbox import ahead
from pathlib import Path

made = []
real = CUDABackend.make_ttir
CUDABackend.make_ttir = staticmethod(lambda *a, **k: made.append(1) or real(*a, **k))
record = ahead.Record(Path(os.environ["TRITON_CACHE_DIR"]) / ahead.RECORD)
record.start()
specs = ahead.matched(ahead.kernels_of(learner), record.previous)
done, workers = ahead.compile_apart(specs, workers=2)
loaded = ahead.load(specs, done)
ahead_here = len(made)
learner.first_launches()
print(json.dumps({"specs": len(specs), "done": len(done), "workers": workers,
                  "loaded": loaded, "compiled_ahead_here": ahead_here,
                  "compiled_by_launches": len(made) - ahead_here,
                  "recorded": sorted((k, len(v)) for k, v in record.seen.items())}))
"""


def check(folder: Path, scale: str) -> dict:
    (folder / "learner.py").write_text(textwrap.dedent(LEARNER).replace("SCALE", scale))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=str(REPO), TRITON_CACHE_DIR=str(folder / "cache"))
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(folder), scale],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_an_edited_files_kernels_compile_ahead_and_its_launches_compile_nothing(tmp_path):
    first = check(tmp_path, "1.0")
    # Nothing recorded yet: the launches compile everything, and are recorded.
    # _rows: three widths (BLOCK 8, 1024, 128 in fp16); _scale: both configs
    # for n = 21 and for 2000 (a multiple of 16: Triton specialises on that).
    assert first["specs"] == 0 and first["compiled_by_launches"] == 7, first
    assert first["recorded"] == [["_rows", 3], ["_scale", 4]], first
    # An edit: the kernel's source changes, so the cache misses.
    second = check(tmp_path, "1.5")
    assert second["specs"] == 7 and second["workers"] == 2, second
    assert second["done"] == 7 and second["loaded"] == 7, second
    assert second["compiled_ahead_here"] == 0, "the sandbox compiled what the workers had"
    assert second["compiled_by_launches"] == 0, "a launch compiled what was compiled ahead"


def test_a_record_that_is_not_ours_is_ignored(tmp_path):
    path = tmp_path / ahead.RECORD
    for text in ["{", "[]", json.dumps({"version": "triton 0.0", "kernels": {"k": ["{}"]}})]:
        path.write_text(text)
        assert ahead.read_record(path) == {}
    path.write_text(json.dumps({"version": ahead._version(), "kernels": {"k": ["{}", 3, None]}}))
    assert ahead.read_record(path) == {"k": ["{}"]}
    path.write_text(" " * (ahead.MAX_RECORD_BYTES + 1))
    assert ahead.read_record(path) == {}
    # A recorded kernel the file no longer has, and data that is not JSON: skipped.
    assert ahead.matched({}, {"gone": ["{}"]}) == []
    assert ahead.matched({"k": object()}, {"k": ["not json"]}) == []


@pytest.mark.gpu
def test_gpu_a_check_after_an_edit_compiles_ahead_and_passes(tmp_path):
    """Through the judge on a GPU: the second check of an edited reference
    compiles the first check's kernels ahead, and grades the same."""
    import shutil

    from gpulab.course.content import load_course
    from gpulab.judge.policy import cache_dir
    from gpulab.lab import runner

    lesson = load_course().find("softmax")
    path = tmp_path / "exercises" / "softmax.py"
    path.parent.mkdir(parents=True)
    text = lesson.reference_path.read_text()
    path.write_text(text)
    first = runner.run_check(
        lesson, path, timing=False, device="cuda", workspace=str(tmp_path)
    ).to_json()
    assert first["status"] == "passed", first.get("summary")
    cache = cache_dir(runner.check_request(lesson, path, workspace=str(tmp_path)), tmp_path)
    assert (cache / ahead.RECORD).is_file()
    for entry in cache.iterdir():  # what an edit's compiles would miss
        if entry.name != ahead.RECORD:
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    path.write_text(text + "\n# an edit\n")
    second = runner.run_check(
        lesson, path, timing=False, device="cuda", workspace=str(tmp_path)
    ).to_json()
    assert second["status"] == "passed", second.get("summary")
    done = second["compiled_ahead"][0]
    assert done["kernels"] > 0 and done["compiled"] == done["kernels"], done
