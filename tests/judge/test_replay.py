"""Issue 27, class 5: on the CPU the "your Triton kernel did the work" report
comes from the learner's own process, so a submission can forge it. The
judge now replays the recorded launches in a sandbox of their own that never
imports the file (gpulab.judge.replay): each forgery below passed before
that and fails now, and honest kernels of several shapes still pass.

Real checks in real child processes, in the Triton interpreter."""

from __future__ import annotations

import struct

import pytest

from gpulab.sandbox.replay_source import NotReplayable, extract
from tests.conftest import reference_source

# The guards and the audit switched off from inside the learner's process
# (one assignment each in gpulab.sandbox.calls), torch computes the answer,
# and a Triton kernel copies it out: the report then says "a kernel handed
# the inputs wrote the result, no banned op ran".
FORGED_SOFTMAX = """
import contextlib
import torch
import triton
import triton.language as tl
import gpulab.sandbox.calls as calls


class _Blind:
    banned = []
    unavailable = ""
    all_threads = True

    def __init__(self, *a, **k):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return None

    def findings(self, *a):
        return []

    def overruns(self):
        return 0  # the report's format, as the real guard gives it


calls.Audit = _Blind
calls.op_guard = lambda *a, **k: _Blind()
# The correctness calls' shared profile (audit.SpanAudit) sees nothing either.
import gpulab.sandbox.audit as _audit

_audit.SpanAudit._findings = lambda self: [[] for _ in self.launched]


@triton.jit
def copy_kernel(y_ptr, a_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.load(x_ptr + offs, mask=mask)  # handed the input, so it "used" it
    tl.store(y_ptr + offs, tl.load(a_ptr + offs, mask=mask), mask=mask)


def softmax(x):
    answer = torch.softmax(x.float(), dim=-1).to(x.dtype).contiguous()
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = y.numel()
    copy_kernel[(triton.cdiv(n, 1024),)](y, answer, x, n, BLOCK=1024)
    return y
"""

# The same, with the answer smuggled in through the launch record itself:
# the recorder is told the kernel was handed nothing but the input.
FORGED_RECORD = (
    FORGED_SOFTMAX
    + """

import gpulab.sandbox.replay as replay

_real_result = replay.Recording.result


def _result(self, out):
    import dataclasses

    rec = _real_result(self, out)
    buffers = tuple(dataclasses.replace(b, data=None, fill="") for b in rec.buffers)
    return dataclasses.replace(rec, buffers=buffers)


replay.Recording.result = _result
"""
)

# A kernel defined somewhere the replay does not see: built from a string.
EXEC_KERNEL = '''
import torch
import triton
import triton.language as tl

_SRC = """
import triton
import triton.language as tl

@triton.jit
def softmax_kernel(y_ptr, x_ptr, xs, ys, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + row * xs + offs, mask=m, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * ys + offs, e / tl.sum(e, axis=0), mask=m)
"""
import tempfile, importlib.util, os
_path = os.path.join(tempfile.mkdtemp(), "k.py")
open(_path, "w").write(_SRC)
_spec = importlib.util.spec_from_file_location("k", _path)
_k = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_k)


def softmax(x):
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.shape[1]
    _k.softmax_kernel[(x.shape[0],)](y, x, x.stride(0), y.stride(0), n,
                                     BLOCK=triton.next_power_of_2(n))
    return y
'''

# Honest: a wrapper that copies the input (contiguous, fp32) for its first
# kernel, which writes each row's max into a zeroed buffer; the second
# reads the input itself and that buffer.
HONEST_COPIES = """
import torch
import triton
import triton.language as tl

LOG2E: tl.constexpr = 1.4426950408889634


@triton.jit
def _row_max(m_ptr, x_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=-float("inf"))
    tl.store(m_ptr + row, tl.max(x, axis=0))


@triton.jit
def softmax_kernel(y_ptr, x_ptr, m_ptr, n, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * x_stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp2((x - tl.load(m_ptr + row)) * LOG2E)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * y_stride + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    xf = x.to(torch.float32).contiguous()  # a copy of the input: values of the input
    rows, n = x.shape
    m = torch.zeros(rows, dtype=torch.float32, device=x.device)
    y = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    block = triton.next_power_of_2(n)
    _row_max[(rows,)](m, xf, n, BLOCK=block)
    softmax_kernel[(rows,)](y, x, m, n, x.stride(0), y.stride(0), BLOCK=block)
    return y
"""


# The answer worked out in pure Python from the input's bytes (ctypes: no
# torch op for the profiler to see) and handed to a kernel that only stores
# its scalar arguments, `width` values a launch. Replayed on the same inputs,
# the same numbers give the same answer; the second draw of a shape gives
# other numbers. `repeat`: each call first repeats the launches of the last
# call of its shape, so the second draw's launches hold the first's as well
# as its own, which land last.
# The answer worked out in plain Python from the input's bytes (no torch op
# runs): the cheats below hand it to their kernels in different ways.
PY_SOFTMAX = """    rows, cols = x.shape
    fmt = {torch.float32: "f", torch.float16: "e"}[x.dtype]
    raw = ctypes.string_at(x.data_ptr(), x.numel() * x.element_size())
    v = list(struct.unpack("<%d%s" % (x.numel(), fmt), raw))
    out = []
    for r in range(rows):
        row = v[r * cols:(r + 1) * cols]
        m = max(row)
        e = [math.exp(a - m) for a in row]
        out += [a / sum(e) for a in e]
"""


def scalar_answers(width: int, repeat: bool = False) -> str:
    params = ", ".join(f"v{i}" for i in range(width))
    stores = "".join(
        f"    tl.store(y_ptr + base + {i}, v{i}, mask=base + {i} < n)\n" for i in range(width)
    )
    again = (
        "    for args in LAST.get(x.shape, []):\n        put_kernel[(1,)](y, x, *args)\n"
        if repeat
        else ""
    )
    return f"""
import ctypes
import math
import struct

import torch
import triton
import triton.language as tl

LAST = {{}}


@triton.jit
def put_kernel(y_ptr, x_ptr, base, n, {params}):
{stores}

def softmax(x):
{PY_SOFTMAX}    y = torch.empty_like(x)
{again}    mine = []
    for base in range(0, rows * cols, {width}):
        chunk = out[base:base + {width}] + [0.0] * {width}
        mine.append((base, rows * cols, *chunk[:{width}]))
        put_kernel[(1,)](y, x, *mine[-1])
    LAST[x.shape] = mine
    return y
"""


def two_draws_told(r: dict) -> str:
    """What the second draw's row says where its launches were told apart
    from the first's, or "" (the replay on other inputs,
    gpulab.judge.replay_again, may fail a case first in the summary)."""
    rows = [c for c in r.get("cases") or [] if not c.get("passed")]
    told = [c.get("detail", "") for c in rows if c.get("name", "").endswith("your launches")]
    return told[0] if told else ""


@pytest.mark.parametrize(
    "source",
    # 5×1000 in 32 a launch: 157 launches, twice that when repeated, under
    # the replay's 512 (more would fail for that reason instead).
    [scalar_answers(16), scalar_answers(32, repeat=True)],
    ids=["plain", "repeating the last call's launches"],
)
def test_answers_passed_as_launch_arguments_fail(grade, source):
    r = grade("softmax_row", source, timing=False)
    assert r["status"] == "failed", r["summary"]
    assert two_draws_told(r), r["summary"]
    assert "scalar arguments, grid and prepared buffers must come from the shapes" in (
        two_draws_told(r)
    )


def fill_answers(width: int) -> str:
    """The answer worked out in Python and handed over as constant fills,
    one single-value buffer per element (a fill is kept by the replay: an
    honest wrapper zeroes accumulators), `width` buffers a launch."""
    ptrs = ", ".join(f"p{i}" for i in range(width))
    stores = "".join(
        f"    tl.store(y_ptr + base + {i}, tl.load(p{i}), mask=base + {i} < n)\n"
        for i in range(width)
    )
    return f"""
import ctypes
import math
import struct

import torch
import triton
import triton.language as tl


@triton.jit
def put_kernel(y_ptr, x_ptr, base, n, {ptrs}):
{stores}

def softmax(x):
{PY_SOFTMAX}    y = torch.empty_like(x)
    for base in range(0, rows * cols, {width}):
        chunk = out[base:base + {width}] + [0.0] * {width}
        bufs = [torch.full((1,), a, dtype=x.dtype) for a in chunk[:{width}]]
        put_kernel[(1,)](y, x, base, rows * cols, *bufs)
    return y
"""


def test_answers_passed_as_constant_fills_fail(grade):
    # Two draws of one shape fill their buffers with other values: an honest
    # fill (zeros, -inf) is the same for both.
    r = grade("softmax_row", fill_answers(16), timing=False)
    assert r["status"] == "failed", r["summary"]
    assert two_draws_told(r), r["summary"]


# The row maxes worked out in Python and handed over as a buffer of input
# values (which the replay keeps: a copy or a cast of an input is honest);
# the kernel does the rest of the softmax.
MAXES_FROM_PYTHON = """
import ctypes
import struct

import torch
import triton
import triton.language as tl


@triton.jit
def rest_kernel(y_ptr, x_ptr, m_ptr, xs, ys, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * xs + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.load(m_ptr + row).to(tl.float32))
    tl.store(y_ptr + row * ys + offs, e / tl.sum(e, axis=0), mask=mask)


def softmax(x):
    rows, cols = x.shape
    fmt = {torch.float32: "f", torch.float16: "e"}[x.dtype]
    n = (rows - 1) * x.stride(0) + cols
    v = struct.unpack("<%d%s" % (n, fmt), ctypes.string_at(x.data_ptr(), n * x.element_size()))
    m = torch.tensor([max(v[r * x.stride(0):r * x.stride(0) + cols]) for r in range(rows)],
                     dtype=x.dtype)
    y = torch.empty_like(x)
    rest_kernel[(rows,)](y, x, m, x.stride(0), y.stride(0), cols,
                         BLOCK=triton.next_power_of_2(cols))
    return y
"""


def test_a_reduction_done_in_python_and_handed_over_as_input_values_fails(grade):
    r = grade("softmax_row", MAXES_FROM_PYTHON, timing=False)
    assert r["status"] == "failed", r["summary"]
    assert two_draws_told(r), r["summary"]


def test_an_honest_copy_is_the_same_copy_in_every_draw():
    import torch

    from gpulab.judge.replay_bytes import copy_map, same_copy

    g = torch.Generator().manual_seed(0)
    first, second = (torch.randn(6, 5, generator=g) for _ in range(2))

    def prepared(x):  # a transposed fp16 copy with a row of zero padding
        out = torch.zeros(6, 6, dtype=torch.float16)
        out[:5] = x.t().to(torch.float16)
        return out.numpy().tobytes()

    m = copy_map(prepared(first), torch.float16, [first])
    assert same_copy(m, prepared(second), torch.float16, [second])
    # Values picked by what they are (each column's largest), not by where
    # they sit, land elsewhere in another draw.
    picked = lambda x: x.max(0).values.numpy().tobytes()  # noqa: E731
    m = copy_map(picked(first), torch.float32, [first])
    assert not same_copy(m, picked(second), torch.float32, [second])


def test_a_forged_report_with_a_copy_kernel_fails(grade):
    r = grade("softmax", FORGED_SOFTMAX, timing=False)
    assert r["status"] == "failed", r["summary"]
    assert "your kernels alone" in r["summary"] and "run again alone" in r["summary"]
    assert "only copies" in r["summary"]


def test_a_forged_record_fails_too(grade):
    r = grade("softmax", FORGED_RECORD, timing=False)
    assert r["status"] == "failed", r["summary"]
    assert "run again alone, gave another result" in r["summary"]


def test_a_kernel_from_outside_the_file_is_not_replayed(grade):
    r = grade("softmax", EXEC_KERNEL, timing=False)
    assert r["status"] == "failed", r["summary"]
    assert "defined at the top level" in r["message"]


@pytest.mark.parametrize("exercise", ["softmax", "matmul"])
def test_honest_references_pass_the_replay(grade, exercise):
    # The check tests/course/test_every_exercise.py runs: the replay is part of it.
    r = grade(exercise, reference_source(exercise), shared=True)
    assert r["status"] == "passed", (r["summary"], r.get("message"))


def test_an_honest_wrapper_that_copies_its_input_passes(grade):
    r = grade("softmax", HONEST_COPIES, timing=False)
    assert r["status"] == "passed", (r["summary"], r.get("message"))


# A wrapper that, like the references on a GPU, times candidates on a
# shape's first call (here 520 launches of a probe) and launches only the
# chosen kernel after.
CHOOSES_ON_FIRST_CALL = """
import torch
import triton
import triton.language as tl

_seen = set()


@triton.jit
def probe_kernel(x_ptr):
    tl.load(x_ptr)


@triton.jit
def softmax_kernel(y_ptr, x_ptr, xs, ys, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + row * xs + offs, mask=m, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * ys + offs, e / tl.sum(e, axis=0), mask=m)


def softmax(x):
    key = (tuple(x.shape), x.dtype)
    if key not in _seen:
        _seen.add(key)
        for _ in range(520):
            probe_kernel[(1,)](x)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.shape[1]
    softmax_kernel[(x.shape[0],)](y, x, x.stride(0), y.stride(0), n,
                                  BLOCK=triton.next_power_of_2(n))
    return y
"""


def test_a_first_call_that_times_candidates_is_not_the_one_replayed(grade):
    # Its launches are more than a record holds (512): the case was refused
    # ("more than 512 kernel launches in one call"), as the references'
    # Hopper paths were on an H100. The call after it is recorded instead.
    r = grade("softmax", CHOOSES_ON_FIRST_CALL, timing=False)
    assert r["status"] == "passed", (r["summary"], r.get("message"))


# --- what the replay keeps of a file ----------------------------------------------


@pytest.mark.parametrize(
    "body, why",
    [
        ("    import os\n", "Import"),
        ("    x = x_ptr.handle.data\n", "`.data`"),
        ("    x = x_ptr.handle\n", "`.handle`"),
        ("    x = x_ptr.__class__\n", "`.__class__`"),
        ("    f = open('/etc/passwd')\n", "`open`"),
        ("    x = [i for i in range(3)]\n", "ListComp"),
        ("    x = tl.extra.pkgutil\n", "does not exist"),
        ("    x = torch.zeros(3)\n", "`torch`"),
        ("    x = (lambda: 1)()\n", "Lambda"),
        ("    with tl.static_range(2):\n        pass\n", "With"),
    ],
)
def test_kernels_that_are_not_triton_are_not_kept(body, why):
    src = (
        "import torch\nimport triton\nimport triton.language as tl\n\n"
        "@triton.jit\ndef k(x_ptr, n):\n" + body + "\n\n@triton.jit\ndef ok(x_ptr):\n    pass\n"
    )
    kept = extract(src)
    assert kept.kernels == ("ok",)
    assert why in kept.problems["k"], kept.problems


def test_kept_text_keeps_line_numbers_and_drops_the_rest():
    src = reference_source("softmax")
    kept = extract(src)
    assert "softmax_kernel" in kept.kernels
    # Each of the file's lines kept as it is or blanked; below them, the
    # kept defs made JIT functions.
    kept_lines, src_lines = kept.text.splitlines(), src.splitlines()
    assert all(k in ("", s) for k, s in zip(kept_lines, src_lines, strict=False))
    assert all("= _gpulab_jit(" in k for k in kept_lines[len(src_lines) :])
    assert "def softmax(" not in kept.text  # the wrapper is not kept
    assert "import " not in kept.text


def test_a_file_that_does_not_parse_is_named():
    with pytest.raises(NotReplayable, match="line 1"):
        extract("def (:\n")


def test_every_reference_and_starter_kernel_is_kept():
    """The replay runs only what extract() keeps: a reference or starter
    whose kernel it refused would fail every honest check on the CPU
    (the steps of lessons 02-05 included). Source text only: milliseconds."""
    from tests.conftest import REPO

    # Gluon kernels (kernels/hopper) have no interpreter: the CPU replay is
    # for Triton's language only (a GPU replays compiled kernels).
    folders = ("kernels", "exercises")
    files = [p for d in folders for p in sorted((REPO / d).glob("*.py"))]
    triton_files = [p for p in files if "@triton.jit" in p.read_text()]
    assert len(triton_files) >= 22
    for path in triton_files:
        kept = extract(path.read_text())
        assert kept.kernels and not kept.problems, (path.name, kept.problems)


def test_a_constant_cannot_take_the_replays_own_decorator_names():
    # The kept text makes its JIT functions with `_gpulab_jit`, bound by
    # the replay: a top-level constant of that name would rebind it to
    # whatever the file says. Not kept.
    src = (
        "import triton\nimport triton.language as tl\n\n"
        "_gpulab_jit = tl.static_print\n\n"
        "@triton.jit\ndef k(x_ptr):\n    pass\n"
    )
    kept = extract(src)
    assert "_gpulab_jit =" not in kept.text and kept.kernels == ("k",)


def test_leftover_bytes_the_replay_poisons_need_not_repeat():
    # torch.empty's leftovers differ from draw to draw in honest code, and
    # may hold an input value by chance (memory a copy of it used). Not all
    # input values, so the replay starts the buffer as NaN anyway, and the
    # two-draw rule leaves it alone.
    import base64

    import torch

    from gpulab.judge.kernel_spec import Case
    from gpulab.judge.two_draws import same_launches
    from gpulab.wire.launch_record import LaunchRecord

    def record(first: float) -> LaunchRecord | None:
        data = torch.tensor([first, 1e30, 1e30, 1e30]).numpy().tobytes()
        buffer = {"nbytes": 16, "dtype": "float32", "bytes": base64.b64encode(data).decode()}
        raw = {"buffers": [buffer], "launches": [{"kernel": "k", "grid": [1], "args": {}}]}
        return LaunchRecord.parse(raw)

    x = [torch.randn(2, 3, generator=torch.Generator().manual_seed(i)) for i in range(2)]
    draws: dict = {}
    first = float(x[0][0, 0])  # an input value, where the second draw holds another
    assert same_launches(draws, Case("a", (x[0],), torch.float32), record(first)) == ""
    assert same_launches(draws, Case("b", (x[1],), torch.float32), record(5.0)) == ""


# An honest online softmax, a row at a time, whose running max and sum the
# wrapper fills (-inf, 0) afresh for every row: fills the replay keeps.
SCRATCH_PER_ROW = """
import torch
import triton
import triton.language as tl


@triton.jit
def row_stats_kernel(x_ptr, m_ptr, s_ptr, cols, BLOCK: tl.constexpr):
    # Column tiles of one row, online: the running max and sum start at
    # -inf and 0, as the wrapper fills them.
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < cols, other=-float("inf")).to(tl.float32)
        m_old = tl.load(m_ptr)
        m = tl.maximum(m_old, tl.max(x, axis=0))
        s = tl.load(s_ptr) * tl.exp(m_old - m) + tl.sum(tl.exp(x - m), axis=0)
        tl.store(m_ptr, m)
        tl.store(s_ptr, s)


@triton.jit
def row_norm_kernel(y_ptr, x_ptr, m_ptr, s_ptr, cols, BLOCK: tl.constexpr):
    m = tl.load(m_ptr)
    s = tl.load(s_ptr)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < cols, other=0.0).to(tl.float32)
        tl.store(y_ptr + offs, (tl.exp(x - m) / s).to(y_ptr.dtype.element_ty), mask=offs < cols)


def softmax(x):
    rows, cols = x.shape
    y = torch.empty_like(x)
    for r in range(rows):
        m = torch.full((1,), -float("inf"), dtype=torch.float32, device=x.device)
        s = torch.zeros(1, dtype=torch.float32, device=x.device)
        row_stats_kernel[(1,)](x[r], m, s, cols, BLOCK=128)
        row_norm_kernel[(1,)](y[r], x[r], m, s, cols, BLOCK=128)
        del m, s  # the next row's are allocated where these were
    return y
"""


def test_scratch_buffers_per_row_at_reused_addresses_pass(grade):
    r = grade("softmax_row", SCRATCH_PER_ROW, timing=False)
    assert r["status"] == "passed", (r["summary"], r.get("message"))


def test_a_new_buffer_at_a_freed_ones_address_is_recorded_as_new(monkeypatch):
    # Tiny tensors made and dropped between launches: the CPU allocator hands
    # a freed one's address to a new one. The record once took it for the
    # old buffer (first contents and all), so the replay started a launch
    # from another launch's values and refused honest code.
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import torch
    import triton
    import triton.language as tl

    from gpulab.sandbox.guards import LaunchRecorder
    from gpulab.sandbox.replay import Recording

    @triton.jit
    def add_kernel(y_ptr, a_ptr, b_ptr, i):
        tl.store(y_ptr + i, tl.load(a_ptr) + tl.load(b_ptr))

    y = torch.empty(64)
    with LaunchRecorder(set()) as launches:
        launches.recording = Recording({})
        for i in range(64):
            a, b = torch.full((1,), float(i)), torch.full((1,), 1.0)
            add_kernel[(1,)](y, a, b, i)
            del a, b
    rec = launches.recording.result(y).to_json()
    fills = []
    for launch in rec["launches"]:
        a, b = (rec["buffers"][launch["args"][k]["__buf__"][0]] for k in ("a_ptr", "b_ptr"))
        fills.append((a["fill"], b["fill"]))
    as_hex = [(struct.pack("<f", i).hex(), struct.pack("<f", 1.0).hex()) for i in range(64)]
    assert fills == as_hex
