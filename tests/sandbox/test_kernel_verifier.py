"""Issue 44: the CPU verifier of the kernel language (gpulab.sandbox.kernel_check,
kernel_file and replay_source). On the CPU the judge's replay runs the text
extract() keeps of a file in Triton's interpreter, which runs a kernel's body
as Python: every name and every attribute step must resolve to what a
Triton kernel may use, whatever expression it starts from.

Honest files in the styles learners write are kept, and the kept text, run
as the replay runs it, computes what the file's own kernel computes. Cheats
that reach a module through something other than an attribute step (`L =
tl`, `(tl,)[0]`, a default, a helper's return value), an attribute a kernel
never needs (`.handle.data`, `__dict__`) or a name a kernel may not use are
refused with a named line; most of them were kept before."""

from __future__ import annotations

import importlib.util
import inspect
import re
import tempfile
import textwrap

import pytest

from gpulab.sandbox.replay_source import NotReplayable, extract
from tests.conftest import reference_source

HEAD = "import torch\nimport triton\nimport triton.language as tl\n"

# --- honest files: kept, and the kept text computes what the file does -------------
#
# Each: the source, the kernel to launch, and how: `launch(kernel, x, y, kept)`
# with x = 16 float32 values, y the output; `kept` says the launch is the
# replay's (a plain triton.jit: autotune's and heuristics' constexprs given
# as the record gives them).


def _simple(k, x, y, kept):
    k[(1,)](x, y, x.numel(), BLOCK=16)


HONEST = {
    "constexpr defined below the kernel": (
        HEAD
        + """
@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * SCALE, mask=offs < n)


SCALE = tl.constexpr(3.0)
""",
        _simple,
    ),
    "f-string in tl.static_assert, assert, static_range": (
        HEAD
        + """
@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK % 8 == 0, f"BLOCK={BLOCK} must be a multiple of 8")
    assert BLOCK >= 8, f"BLOCK is {BLOCK}"
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in tl.static_range(3):
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, acc, mask=offs < n)
""",
        _simple,
    ),
    "try-import, and a different alias": (
        # (Triton 3.9's interpreter reads a constexpr annotation by its text:
        # `language.constexpr` is not one there, `constexpr` is.)
        """
try:
    import triton
    import triton.language as language
    from triton.language import constexpr
except ImportError:  # a machine without Triton
    triton = None
    language = constexpr = None
import torch


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: constexpr):
    offs = language.arange(0, BLOCK)
    x = language.load(x_ptr + offs, mask=offs < n)
    language.store(y_ptr + offs, language.exp(x), mask=offs < n)
""",
        _simple,
    ),
    "kernel = triton.jit(body) and triton.jit(**kw)(body)": (
        HEAD
        + """
def _double(v):
    return v * 2


def body(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, double(tl.load(x_ptr + offs, mask=offs < n)) + 1, mask=offs < n)


double = triton.jit(debug=False)(_double)
kernel = triton.jit(body)
""",
        lambda k, x, y, kept: _simple(k, x, y, kept),
    ),
    "autotune and heuristics, helpers, a dtype constant": (
        HEAD
        + """
OUT = tl.float32


@triton.jit
def _square(v):
    return v * v


@triton.jit
def _shift(v, by: tl.constexpr):
    return _square(v) + by


@triton.autotune(
    # One config: the interpreter cannot time several (no GPU driver).
    configs=[triton.Config({"BLOCK": b}, num_warps=1) for b in (16,)],
    key=["n"],
)
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(x_ptr + offs)
    else:
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, _shift(x, 1.5).to(OUT), mask=offs < n)
""",
        lambda k, x, y, kept: (
            k[(1,)](x, y, x.numel(), BLOCK=16, EVEN=True)
            if kept
            else k[lambda meta: (triton_cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())
        ),
    ),
    "tl.reduce and tl.associative_scan with JIT combine functions": (
        HEAD
        + """
@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    total = tl.reduce(x, 0, _add)
    running = tl.associative_scan(x, 0, combine_fn=_add)
    tl.store(y_ptr + offs, running + total, mask=offs < n)
""",
        _simple,
    ),
    "from triton import language as tl; objects imported by name": (
        """
from math import pi

import torch
import triton
from triton import language as tl
from triton.language import float32 as f32


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n).to(f32) - pi, mask=offs < n)
""",
        _simple,
    ),
    "math constants, tl.constexpr defaults, unpacked constants": (
        """
import math

import torch
import triton
import triton.language as tl

LOG2E = 1.0 / math.log(2)
HALF = tl.constexpr(triton.next_power_of_2(13) // 2)
BLOCK_DEFAULT: tl.constexpr = 16
LO, HI = -2.0, 2.0


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr = BLOCK_DEFAULT, SHIFT: tl.constexpr = HALF):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = tl.exp2(x * LOG2E) + SHIFT + math.pi
    tl.store(y_ptr + offs, tl.clamp(y, LO, HI * 100), mask=offs < n)
""",
        lambda k, x, y, kept: k[(1,)](x, y, x.numel()),
    ),
    "strides as a tuple, subscripts, keyword arguments, a descriptor": (
        HEAD
        + """
@triton.jit
def k(x_ptr, y_ptr, shape, strides, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < shape[0]
    x = tl.load(x_ptr + offs * strides[0], mask=m, other=0.0, eviction_policy="evict_last")
    desc = tl.make_tensor_descriptor(x_ptr, shape=[BLOCK], strides=[1], block_shape=[BLOCK])
    first = desc.load([0])
    tl.store(y_ptr + offs, x + first, mask=m)
""",
        lambda k, x, y, kept: k[(1,)](x, y, (8,), (2,), BLOCK=16),
    ),
}


def triton_cdiv(a, b):
    return -(-a // b)


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_honest_styles_are_kept_and_compute_what_the_file_does(tmp_path):
    """Each style was refused before (constexpr below, f-string, try-import,
    triton.jit(body), from-imports, math constants, unpacked constants...)
    or kept wrong; now each is kept whole and, run as the replay runs it,
    gives the file's own result. In a fresh interpreter process, as the
    sandbox runs (in a pytest worker where triton.language was imported for
    a GPU first, tl.zeros and its kin are compiled-only functions)."""
    from tests.judge.test_replay_record import in_interpreter

    in_interpreter("tests.sandbox.test_kernel_verifier:honest_styles", tmp_path)


def honest_styles(tmp_path):
    tempfile.tempdir = str(tmp_path)  # the replay's kernels.py files
    import torch

    from gpulab.sandbox.replay_run import kernels

    x = torch.linspace(-1.0, 1.0, 16, dtype=torch.float32)
    for i, (style, (source, launch)) in enumerate(HONEST.items()):
        kept = extract(source)
        assert not kept.problems and kept.kernels, (style, kept.problems)
        path = tmp_path / f"honest_{i}.py"
        path.write_text(source)
        mine = _load(path, f"honest_{i}")
        name = "kernel" if hasattr(mine, "kernel") else "k"
        want, got = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
        launch(getattr(mine, name), x, want, False)
        replayed = kernels(kept.text, kept.modules, list(kept.kernels))
        # The replay launches a kernel by its def's name (`body`, not `kernel`).
        fn = getattr(mine, name)
        while not inspect.isfunction(fn):  # autotune's, heuristics' and jit's wrappers
            fn = fn.fn
        launch(replayed[fn.__name__], x, got, True)
        assert not want.isnan().all(), style
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True, msg=style)


def test_language_functions_imported_by_name_are_kept():
    # `from triton.language import load`: a GPU compiles it; Triton 3.9's
    # interpreter does not (it patches triton.language's attributes, not the
    # file's names), so this is the check of the text alone.
    source = (
        "import triton\nfrom triton.language import load, store as put, constexpr\n\n"
        "@triton.jit\ndef k(x_ptr, y_ptr, BLOCK: constexpr):\n"
        "    put(y_ptr, load(x_ptr))\n"
    )
    kept = extract(source)
    assert kept.kernels == ("k",), kept.problems
    assert kept.modules["put"] == "triton.language.store"
    assert kept.modules["load"] == "triton.language.load"


def test_every_kept_text_of_the_course_runs_in_the_replays_namespace(tmp_path):
    # The references' and starters' kept text, made into JIT functions as the
    # replay makes them: nothing they name is missing from what it binds.
    from tests.judge.test_replay_record import in_interpreter

    in_interpreter("tests.sandbox.test_kernel_verifier:course_kept_text", tmp_path)


def course_kept_text(tmp_path):
    tempfile.tempdir = str(tmp_path)
    from gpulab.sandbox.replay_run import kernels
    from tests.conftest import REPO

    for path in [
        *sorted((REPO / "kernels").glob("*.py")),
        *sorted((REPO / "exercises").glob("*.py")),
    ]:
        source = path.read_text()
        if "@triton.jit" in source:
            kept = extract(source)
            made = kernels(kept.text, kept.modules, list(kept.kernels))
            assert set(made) == set(kept.kernels), path.name


# --- cheats: refused, with the line that did it -----------------------------------
#
# Each: a file, and what the problems must say. `top`: top-level lines
# between the imports and the kernel `k`; `after`: lines below it.


def _kernel(body: str, top: str = "", after: str = "") -> str:
    kernel = "\n\n@triton.jit\ndef k(x_ptr, y_ptr, n):\n" + textwrap.indent(body, "    ") + "\n"
    return HEAD + top + kernel + after


CHEATS = {
    # A module bound by assignment, then walked: `tl.core.builtins` is
    # Python's builtins module (exec, __import__).
    "L = tl": (
        _kernel("L.core.builtins.exec('import os')", top="L = tl\n"),
        "bind a module with `import`",
    ),
    "T = triton": (
        _kernel("T.language.core.builtins.print(1)", top="T = triton\n"),
        "bind a module with `import`",
    ),
    "(tl,)[0].core": (_kernel("(tl,)[0].core.builtins.exec('1')"), "`tl` is a module"),
    "[tl][0]": (_kernel("[tl][0].core.builtins.exec('1')"), "`tl` is a module"),
    "(tl if 1 else tl).core": (_kernel("(tl if 1 else tl).core.builtins"), "`tl` is a module"),
    "walrus": (_kernel("(m := tl)\nm.core"), "NamedExpr"),
    "a parameter's default": (
        HEAD + "\n\n@triton.jit\ndef k(x_ptr, m=tl):\n    m.core.builtins.exec('1')\n",
        "`tl` is a module",
    ),
    "a helper that returns tl": (
        HEAD
        + "\n\n@triton.jit\ndef k(x_ptr):\n    h().core.builtins.exec('1')\n"
        + "\n\n@triton.jit\ndef h():\n    return tl\n",
        "`tl` is a module",
    ),
    "tl.math.__dict__": (_kernel("d = tl.math.__dict__"), "`.__dict__`"),
    "x.handle.data": (_kernel("d = x_ptr.handle.data"), "`.data`"),
    "x.type.__class__": (_kernel("c = x_ptr.type.__class__"), "`.__class__`"),
    "getattr(tl, 'core')": (_kernel("c = getattr(tl, 'core')"), "`getattr`"),
    "tl.tensor.__init__": (_kernel("f = tl.tensor.__init__"), "`.__init__`"),
    "__builtins__": (_kernel("b = __builtins__"), "`__builtins__`"),
    "__import__": (_kernel("os = __import__('os')"), "`__import__`"),
    "exec": (_kernel("exec('1')"), "`exec`"),
    "eval": (_kernel("v = eval('1')"), "`eval`"),
    "open": (_kernel("f = open('/etc/passwd')"), "`open`"),
    "C = tl.core at the top level": (
        _kernel("C.builtins.exec('1')", top="C = tl.core\n"),
        "`C`",
    ),
    "from triton.language import core": (
        "from triton.language import core\n" + _kernel("core.builtins.exec('1')"),
        "`core`",
    ),
    "an annotation": (
        HEAD + "\n\n@triton.jit\ndef k(x_ptr, n: (tl,)[0].core.builtins.exec('1')):\n    pass\n",
        "`tl` is a module",
    ),
    "a string annotation Triton writes into code": (
        HEAD + "\n\n@triton.jit\ndef k(x_ptr, n: 'fp32\", print(1), \"'):\n    pass\n",
        "not a Triton type",
    ),
    "a decorator's argument": (
        HEAD + "\n\n@triton.jit(debug=tl.core.builtins)\ndef k(x_ptr):\n    pass\n",
        "`tl.core`",
    ),
    "a decorator that is not triton's": (
        HEAD + "import functools\n\n@functools.lru_cache\n@triton.jit\ndef k(x_ptr):\n    pass\n",
        "`functools.lru_cache` is not triton.jit",
    ),
    "an f-string {tl.core}": (_kernel("tl.static_print(f'{tl.core}')"), "`tl.core`"),
    "an f-string {tl}": (_kernel("tl.static_print(f'{tl!r}')"), "`tl` is a module"),
    "str.format": (_kernel("s = '{0.__class__}'.format(x_ptr)"), "`.format`"),
    "an attribute of a JIT function": (
        _kernel("s = h.src", after="\n\n@triton.jit\ndef h():\n    pass\n"),
        "`.src`",
    ),
    "a JIT function as a value": (
        _kernel("f = h", after="\n\n@triton.jit\ndef h():\n    pass\n"),
        "`h` is a JIT function",
    ),
    "an attribute stored": (_kernel("tl.load = print"), "assign only to names"),
    "a Python function": (
        _kernel("helper(x_ptr)", after="\n\ndef helper(v):\n    return v\n"),
        "a Python function",
    ),
    "DEVICE": (
        _kernel("x = DEVICE", top="DEVICE = torch.device('cpu')\n"),
        "`DEVICE`, which is not a number, a string or tl.constexpr(...)",
    ),
    "a name bound twice": (
        _kernel("x = BLOCK", top="BLOCK = 16\nBLOCK = 32\n"),
        "bound more than once",
    ),
    "a name a function rebinds": (
        _kernel(
            "x = BLOCK",
            top="BLOCK = 16\n",
            after="\n\ndef grow():\n    global BLOCK\n    BLOCK = 32\n",
        ),
        "bound more than once",
    ),
    "a constant on a line shared": (_kernel("x = ONE", top="ONE = 1; import os\n"), "shares"),
    "a kernel that calls a refused one": (
        _kernel("h()", after="\n\n@triton.jit\ndef h():\n    x = tl.core\n"),
        "uses `h`",
    ),
    "the replay's own name": (
        HEAD + "\n\n@triton.jit\ndef _gpulab_jit(x_ptr):\n    pass\n",
        "gpulab's replay",
    ),
    "starred keyword arguments": (_kernel("tl.store(**{'pointer': x_ptr})"), "`**`"),
    # Triton's interpreter runs a kernel from the last line of its source
    # that begins with `def `: here one inside a string, so it would run the
    # lines below it, which this check reads as the string's text.
    "a def line inside a string": (
        _kernel(
            's = """\ndef k(x_ptr, y_ptr, n):\n    tl.core.builtins.exec("1")\n    t = \'\'\'"""'
            "\nu = '''\n#'''"
        ),
        "begins with `def`",
    ),
    "a module passed to tl.constexpr": (_kernel("tl.constexpr(tl).value.core"), "`tl` is a module"),
}


@pytest.mark.parametrize("cheat", list(CHEATS))
def test_cheats_are_refused_with_a_named_line(cheat):
    source, says = CHEATS[cheat]
    kept = extract(source)
    assert "k" not in kept.kernels and kept.problems, kept
    why = " ".join(kept.problems.values())
    assert says in why, why
    for problem in kept.problems.values():
        line = int(problem.split(":", 1)[0].removeprefix("line "))
        assert 1 <= line <= len(source.splitlines()), problem
    assert "builtins" not in kept.text and "exec" not in kept.text


def test_a_line_trick_does_not_carry_text_past_the_check():
    # \x0c and \u2028 in a comment: str.splitlines() breaks there, Python does
    # not. The kept text is copied by Python's lines and re-parsed.
    for trick in ("\x0c", "\u2028", "\x1c", "\x85"):
        payload = f"# note{trick}X = __import__('os')\n"
        source = _kernel("x = ONE", top=f"{payload}ONE = 1\n")
        kept = extract(source)
        assert kept.kernels == ("k",), (repr(trick), kept.problems)
        assert "__import__" not in kept.text
        at = re.split(r"\r\n|\r|\n", source).index("ONE = 1")
        assert kept.text.split("\n")[at] == "ONE = 1", repr(trick)


def test_a_file_with_a_nul_byte_is_named():
    with pytest.raises(NotReplayable, match="does not parse"):
        extract("X = 1\x00\n")


# --- end to end: a real CPU check ------------------------------------------------

# softmax_row in the styles the check refused (issue 44): a try-import, a
# body made a kernel by a call, constants below it (a math constant, an
# annotated tl.constexpr), an f-string in tl.static_assert, a JIT helper.
HONEST_SOFTMAX_ROW = """
import math

try:
    import triton
    import triton.language as tl
except ImportError:  # a machine without Triton
    triton = tl = None
import torch


def softmax_row_body(y_ptr, x_ptr, n_cols, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK >= 16, f"BLOCK={BLOCK} is too small")
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=NEG_INF).to(tl.float32)
    num = tl.exp2(_centred(x) * LOG2E)
    y = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * n_cols + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _centred(x):
    return x - tl.max(x, axis=0)


softmax_row_kernel = triton.jit(softmax_row_body)
LOG2E = 1.0 / math.log(2)
NEG_INF: tl.constexpr = float("-inf")
BLOCK = 1024


def softmax(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    softmax_row_kernel[(n_rows,)](y, x, n_cols, BLOCK=BLOCK)
    return y
"""


def test_an_honest_file_in_the_styles_refused_before_passes(grade):
    assert not extract(HONEST_SOFTMAX_ROW).problems
    r = grade("softmax_row", HONEST_SOFTMAX_ROW, timing=False)
    assert r["status"] == "passed", (r["summary"], r.get("message"))


# The alias: `L = tl`, then tl.core.builtins (Python's builtins
# module) from inside the reference's kernel. The learner's process may run
# it; the replay's must not, and the check says which line. (The replay ran
# it, and the check passed.)
ALIAS_CHEAT = (
    reference_source("softmax_row")
    .replace("import triton.language as tl\n", "import triton.language as tl\n\nL = tl\n")
    .replace(
        "    offs = tl.arange(0, BLOCK)\n",
        "    L.core.builtins.exec('pass')\n    offs = tl.arange(0, BLOCK)\n",
    )
)


def test_a_module_bound_by_assignment_fails_the_check_with_its_line(grade):
    assert "L.core.builtins" in ALIAS_CHEAT and "\nL = tl\n" in ALIAS_CHEAT
    line = ALIAS_CHEAT.splitlines().index("    L.core.builtins.exec('pass')") + 1
    r = grade("softmax_row", ALIAS_CHEAT, timing=False)
    assert r["status"] == "failed", r["summary"]
    assert f"line {line}: the kernel uses `L`, a module bound by assignment" in r["message"]


def test_a_jit_function_handed_around_shows_no_python():
    # A JIT function can reach a kernel as a value (tl.constexpr(f).value, a
    # parameter): of its members only `type` (a constexpr_type) is also a
    # member of Triton's value classes; `fn`, `src`, `run`, `rewrite`... are not.
    pytest.importorskip("triton")
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    from gpulab.sandbox.kernel_allow import runtime_attributes

    members = set(dir(JITFunction)) | set(dir(InterpretedFunction)) | {"fn", "kwargs", "rewriter"}
    assert runtime_attributes() & members <= {"type"}
    assert not runtime_attributes() & {"handle", "data", "base", "format"}
