"""Known gaps of a Triton release, turned into what a learner should do."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from gpulab.course.known_gaps import hint_for, is_known_gap
from tests.conftest import installed_triton, reference_source

BF16 = (
    "triton.runtime.errors.InterpreterError: "
    "AttributeError(\"'InterpreterBuilder' object has no attribute 'get_bf16'\")"
)


def test_bf16_constants_in_triton_3_8s_interpreter():
    hint = hint_for(BF16, "3.8.0")
    assert hint and "Triton 3.8.0" in hint and "fp32" in hint and "triton>=3.9" in hint
    assert "\n" not in hint  # one line
    assert is_known_gap(BF16, "3.6.0")


def test_no_hint_where_the_gap_does_not_apply():
    # 3.9's interpreter has get_bf16: should it ever raise this, only the
    # generic "missing operation" hint applies, not the bf16 one.
    assert "bf16 constants" not in (hint_for(BF16, "3.9.0") or "")
    assert hint_for(BF16, "3.8.0", interpreter=False) is None  # not the interpreter: no gap
    assert hint_for("IndexError: list index out of range", "3.8.0") is None  # the learner's bug
    assert hint_for("", "3.8.0") is None


def test_triton_3_6s_interpreter_under_numpy_2_4():
    err = (
        "InterpreterError: TypeError('only 0-dimensional arrays can be converted to "
        "Python scalars')"
    )
    hint = hint_for(err, "3.6.0")
    assert hint and "numpy<2.4" in hint
    assert hint_for(err, "3.8.0") is None  # 3.8 works with NumPy 2.4: a real bug then


def test_any_missing_interpreter_op_gets_a_generic_hint():
    hint = hint_for(
        "AttributeError: 'InterpreterBuilder' object has no attribute 'create_fancy_op'", "3.9.0"
    )
    assert hint and "create_fancy_op" in hint and "GPU" in hint


KERNEL = textwrap.dedent("""
    import os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    import torch, triton, triton.language as tl
    from gpulab.course.known_gaps import hint_for

    @triton.jit
    def fill(y_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.full([BLOCK], 1.5, tl.bfloat16))

    y = torch.zeros(16, dtype=torch.bfloat16)
    try:
        fill[(1,)](y, BLOCK=16)
        print("ran", float(y[0]))
    except Exception as exc:
        print("hint", hint_for(f"{type(exc).__name__}: {exc}", triton.__version__))
""")


def test_the_gap_on_the_installed_triton():
    # The real interpreter: Triton 3.9 makes the constant, older releases
    # raise, and the hint then explains it.
    r = subprocess.run([sys.executable, "-c", KERNEL], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout.strip().splitlines()[-1]
    version = tuple(map(int, (installed_triton() or "0.0").split(".")))
    if version >= (3, 9):
        assert out == "ran 1.5", out
    else:
        assert out.startswith("hint ") and "bf16 constants" in out, out


def test_the_grader_skips_a_case_a_known_gap_explains(grade):
    # A triad that hits a gap of the interpreter on bf16 inputs only (raised
    # by hand here, as Triton 3.6-3.8 raise it): those cases are skipped with
    # the hint, and the other dtypes still judge the kernel.
    src = reference_source("bandwidth").replace("def triad(", "def _triad(", 1) + textwrap.dedent("""

        def triad(x, y, alpha):
            if x.dtype == torch.bfloat16:
                raise AttributeError("'InterpreterBuilder' object has no attribute 'get_fp8e4nv'")
            return _triad(x, y, alpha)
        """)
    r = grade("bandwidth", src)
    assert r["passed"], r["summary"]
    skipped = [s for s in r["skipped"] if "interpreter has no CPU version" in s]
    assert skipped and all("bf16" in s for s in skipped), r["skipped"]
    assert all(c["dtype"] != "bf16" for c in r["cases"])
