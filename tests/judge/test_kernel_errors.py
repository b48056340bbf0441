"""An error inside a Triton kernel is reported at its line in the kernel, not
at the launch line: in the interpreter (CPU) and from the compiler (GPU; its
front end runs here without one, so the real CompilationError is tested)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO, reference_source


def test_a_kernel_typo_is_reported_at_the_kernel_line_on_the_cpu(grade):
    """lesson 02's reference with tl.max misspelt: the summary names its line."""
    src = reference_source("softmax").replace("tl.max(", "tl.maxx(", 1)
    kernel_line = next(i for i, line in enumerate(src.splitlines(), 1) if "tl.maxx(" in line)
    r = grade("softmax", src, timing=False)
    assert not r["passed"]
    assert f"line {kernel_line}, in " in r["summary"], r["summary"]
    assert "has no attribute 'maxx'" in r["summary"]
    assert "Traceback (your code only):\n" in r["message"]  # header on its own line
    assert f'", line {kernel_line}, in softmax_kernel' in r["message"], r["message"]


COMPILE = """
import sys
sys.path.insert(0, {repo!r})
sys.path.insert(0, {folder!r})
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import kern
from gpulab.sandbox.learner import format_learner_traceback
sig = {{"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}}
try:
    triton.compile(ASTSource(kern.softmax_kernel, sig, constexprs={{"BLOCK": 16}}),
                   target=GPUTarget("cuda", 90, 32))
except Exception as exc:
    print(format_learner_traceback(exc, kern.__file__))
else:
    print("compiled?!")
"""

KERNEL = """
import triton
import triton.language as tl


@triton.jit
def row_max(x):
    return tl.maxx(x, axis=0)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=-float("inf"))
    m = {call}
    tl.store(y_ptr + offs, x - m, mask=offs < n)
"""


@pytest.mark.parametrize(
    "call", ["tl.maxx(x, axis=0)", "row_max(x)"], ids=["in the kernel", "in a @jit helper"]
)
def test_a_compilation_error_names_the_kernel_line(tmp_path, call):
    pytest.importorskip("triton")
    (tmp_path / "kern.py").write_text(textwrap.dedent(KERNEL.format(call=call)))
    code = COMPILE.format(repo=str(REPO), folder=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path
    ).stdout
    lines = (tmp_path / "kern.py").read_text().splitlines()
    want = [i for i, line in enumerate(lines, 1) if "tl.maxx(" in line]
    want = want[-1] if call.startswith("tl.") else want[0]  # the kernel's, or the helper's
    last = out.strip().splitlines()[-1]
    assert f"kern.py line {want}, in " in last, out
    assert "AttributeError: module 'triton.language' has no attribute 'maxx'" in last, out
    assert f'File "{Path(tmp_path / "kern.py")}", line {want}' in out, out
