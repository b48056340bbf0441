"""The lessons' runnable code blocks run, and their kernels compile for a GPU.

A block fenced as ```python run is a whole program a learner may paste and
run: each is written to a file and run with the Triton interpreter on the
CPU (`TRITON_INTERPRET=1`, as `gpulab check` runs kernels here), where its own
asserts check its results. The interpreter accepts code the GPU compiler
refuses (lesson 01 says so), so each block is then run again with the
interpreter off, its launches recorded and skipped
(gpulab.explain.sandbox.trace, as `gpulab check --explain` does on a CPU), and
every kernel it launched is compiled for sm_80 and sm_90 (Triton ships the
compiler; no GPU needed).

Cost: one child process for all the blocks in the interpreter, one for the
compiles (about 1 s a kernel and target on the 2-core CPU).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LESSONS = sorted((REPO / "lessons").glob("*/lesson.md"))
FENCE = re.compile(r"^```(\S*)([^\n]*)\n(.*?)^```\s*$", re.M | re.S)


def runnable_blocks(text: str) -> list[tuple[int, str]]:
    """(1-based line of the opening fence, code) of each ```python run block."""
    out = []
    for m in FENCE.finditer(text):
        if m.group(1) == "python" and "run" in m.group(2).split():
            out.append((text.count("\n", 0, m.start()) + 1, m.group(3)))
    return out


def installed(code: str) -> bool:
    """Whether the libraries a block imports are installed (JAX is optional)."""
    import importlib.util

    names = re.findall(r"^(?:import|from) (\w+)", code, re.M)
    return all(importlib.util.find_spec(n) is not None for n in names)


def write_blocks(tmp_path: Path) -> dict[str, str]:
    """Each runnable block as its own file: {file: "lesson.md:line"}."""
    files = {}
    for path in LESSONS:
        for line, code in runnable_blocks(path.read_text(encoding="utf-8")):
            if not installed(code):
                continue
            name = f"l{path.parent.name[:2]}_line{line}.py"
            (tmp_path / name).write_text(code, encoding="utf-8")
            files[str(tmp_path / name)] = f"{path.relative_to(REPO)}:{line}"
    return files


# Runs each file in a fresh namespace in this child; prints one JSON line a file.
INTERPRET = """
import json, runpy, sys, traceback
for f in sys.argv[1:]:
    try:
        runpy.run_path(f, run_name="__main__")
        print(json.dumps({"file": f, "ok": True}))
    except BaseException:
        print(json.dumps({"file": f, "ok": False, "error": traceback.format_exc(limit=3)}))
"""

# Interpreter off: record each launch and skip it, then compile what was launched.
COMPILE = """
import json, runpy, sys, traceback
from gpulab.explain.sandbox.trace import LaunchTracer
from gpulab.measure.compile_info import compile_kernel
for f in sys.argv[1:]:
    with LaunchTracer(dry=True) as tracer:
        try:
            runpy.run_path(f, run_name="__main__")
        except Exception:
            pass  # the skipped launches wrote nothing: the block's asserts fail
    if not tracer.launches:
        print(json.dumps({"file": f, "kernel": "-", "arch": "-", "ok": False,
                          "error": "no Triton launch recorded"}))
    seen = set()
    for la in tracer.launches:
        key = (la["kernel"], json.dumps(la["signature"]), repr(la["constexprs"]),
               la["num_warps"], la["num_stages"])
        if key in seen:
            continue
        seen.add(key)
        for arch in ("sm_80", "sm_90"):
            info = compile_kernel(la["fn"], la["signature"], la["constexprs"], arch=arch,
                                  options={"num_warps": la["num_warps"],
                                           "num_stages": la["num_stages"]},
                                  divisible=la["divisible"])
            print(json.dumps({"file": f, "kernel": la["kernel"], "arch": arch,
                              "ok": info.ok, "error": info.error}))
"""


def run_child(code: str, files: list[str], interpret: bool) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run(
        [sys.executable, "-c", code, *files],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=REPO,
    )
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert rows, f"the child printed nothing (rc {r.returncode}):\n{r.stderr[-3000:]}"
    return rows


def test_runnable_blocks_are_found():
    text = (
        "a\n\n```python run\nx = 1\n```\n\n```python\nnot run\n```\n\n```python run\ny = 2\n```\n"
    )
    assert runnable_blocks(text) == [(3, "x = 1\n"), (11, "y = 2\n")]


def test_lesson_01_to_03_each_have_a_runnable_block():
    for path in LESSONS[:3]:
        assert runnable_blocks(path.read_text(encoding="utf-8")), path.parent.name
    # and lesson 08's mesh, which JAX 0.9 changed (make_mesh's explicit axes)
    assert runnable_blocks(LESSONS[7].read_text(encoding="utf-8")), LESSONS[7].parent.name


def test_runnable_blocks_run_in_the_interpreter_and_compile_for_a_gpu(tmp_path):
    pytest.importorskip("triton")
    files = write_blocks(tmp_path)
    rows = run_child(INTERPRET, list(files), interpret=True)
    failed = [f"{files[r['file']]}: {r['error']}" for r in rows if not r["ok"]]
    assert len(rows) == len(files) and not failed, "\n".join(failed)
    # Triton's kernels only: the other blocks (JAX) launch none.
    kernels = [f for f in files if "import triton" in Path(f).read_text(encoding="utf-8")]
    rows = run_child(COMPILE, kernels, interpret=False)
    failed = [
        f"{files[r['file']]}: {r['kernel']} for {r['arch']}: {r['error']}"
        for r in rows
        if not r["ok"]
    ]
    assert not failed, "\n".join(failed)
    assert {r["file"] for r in rows} == set(kernels)


def test_the_interpreter_accepts_what_the_compiler_refuses(tmp_path):
    """Lesson 01's example: an `if` on a loaded block runs in the interpreter
    and stops the compiler, with the message the lesson quotes."""
    pytest.importorskip("triton")
    lesson = (REPO / "lessons/01_gpu_architecture_tour/lesson.md").read_text(encoding="utf-8")
    quoted = "Boolean value of Tensor with more than one value is ambiguous"
    assert quoted in " ".join(lesson.split())
    src = tmp_path / "if_block.py"
    src.write_text(
        "import torch\nimport triton\nimport triton.language as tl\n\n\n"
        "@triton.jit\ndef k(out_ptr, x_ptr, B: tl.constexpr):\n"
        "    offs = tl.arange(0, B)\n    x = tl.load(x_ptr + offs)\n"
        "    if x > 0:\n        x = x * 2\n    tl.store(out_ptr + offs, x)\n\n\n"
        "x = torch.ones(16)\nout = torch.zeros(16)\nk[(1,)](out, x, B=16)\n"
        "assert torch.equal(out, x * 2)\n",
        encoding="utf-8",
    )
    (ran,) = run_child(INTERPRET, [str(src)], interpret=True)
    assert ran["ok"], ran
    compiled = run_child(COMPILE, [str(src)], interpret=False)
    assert compiled and not any(r["ok"] for r in compiled)
    assert all(quoted in r["error"] for r in compiled), compiled
