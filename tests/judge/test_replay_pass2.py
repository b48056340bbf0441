"""The replay (gpulab.judge.replay) again: forgeries of "your Triton kernel
did the work" on the CPU that passed it, found after test_replay's. Each
computes the answer outside any Triton kernel and passed a whole check.

Real checks in real child processes, in the Triton interpreter.

Once open, now closed: the two-draw rule compares launches only for the
shapes an exercise draws twice, one or two per exercise and named in its
grader (softmax: 7×1000 at row stride 1024). On every other case the
launches' numbers (scalars, fills, views, integer buffers) were compared
with nothing, so a wrapper honest on that shape that worked out the rest
in Python passed. And on the shapes drawn twice, same_copy left alone a
position whose first-draw value occurs more than once among the inputs
(fp16 inputs, or fp32 inputs cast to bf16 by the wrapper: 6545 of 7000
positions at softmax's 7×1000), so the second draw could put any input
value there: 16 such values spelt an answer worked out in Python (CODEBOOK
below), on every shape, and softmax passed with no kernel doing its work.

The fix (gpulab.judge.replay_again): every passing case is replayed a
second time on inputs only the judge has, g(x) = c·x with c a power of
two from the judge's secret seed, the recorded bytes the replay keeps
scaled value by value (a copy, cast, transpose or padding of x stays one
of g(x)), scalars and fills as recorded; the result must be the reference
of g(x). Numbers worked out from x give x's answer there. And same_copy
now lets a repeated value stand only for one of the second draw's values
at the places the first held it."""

from __future__ import annotations

import pytest

from tests.conftest import reference_source
from tests.judge.test_replay import FORGED_SOFTMAX, PY_SOFTMAX, scalar_answers, two_draws_told
from tests.judge.test_rope_rmsnorm import variant

# The guards switched off (as in test_replay), torch computes the answer,
# and its bytes go into a storage a launch is first handed as bool: the
# replay kept any bool bytes ("a mask"), and the copy kernel reads the same
# storage through a float view. The replay then copied torch's answer out.
ANSWER_AS_BOOL = FORGED_SOFTMAX.replace(
    "def copy_kernel(y_ptr, a_ptr, x_ptr, n, BLOCK: tl.constexpr):",
    "def copy_kernel(y_ptr, flag_ptr, a_ptr, x_ptr, n, BLOCK: tl.constexpr):",
).replace(
    "    copy_kernel[(triton.cdiv(n, 1024),)](y, answer, x, n, BLOCK=1024)\n",
    "    raw = torch.empty(answer.numel() * answer.element_size(), dtype=torch.uint8)\n"
    "    raw.copy_(answer.view(-1).view(torch.uint8))\n"
    "    copy_kernel[(triton.cdiv(n, 1024),)](\n"
    "        y, raw.view(torch.bool), raw.view(answer.dtype), x, n, BLOCK=1024\n"
    "    )\n",
)


def test_an_answer_in_a_buffer_first_seen_as_bool_fails(grade):
    assert "raw.view(torch.bool)" in ANSWER_AS_BOOL and "flag_ptr" in ANSWER_AS_BOOL
    r = grade("softmax", ANSWER_AS_BOOL, timing=False)
    assert r["status"] == "failed", r["summary"]
    assert "your kernels alone" in r["summary"], r["summary"]


def test_bool_bytes_are_trusted_only_as_bools():
    import torch

    from gpulab.judge.replay_bytes import trusted_bytes

    x = torch.randn(4, 4)
    assert trusted_bytes(bytes([0, 1, 1, 0]), torch.bool, [x])
    assert not trusted_bytes(torch.tensor([0.25]).numpy().tobytes(), torch.bool, [x])


def view_answers(width: int) -> str:
    """The answer worked out in plain Python (no torch op runs), each
    value's float32 bits spelt out as the offsets of two one-byte views
    into a zeroed buffer; the kernel casts each pointer to an integer,
    takes away the buffer's start and stores the float those bits make.
    A zero fill repeats in every draw, and the views were not one of the
    numbers two draws of a shape compared."""
    params = ", ".join(f"h{i}, l{i}" for i in range(width))
    stores = "".join(
        f"    b = (h{i}.to(tl.int64) - z) * 65536 + (l{i}.to(tl.int64) - z)\n"
        f"    v = b.to(tl.int32).to(tl.float32, bitcast=True).to(y_ptr.dtype.element_ty)\n"
        f"    tl.store(y_ptr + base + {i}, v, mask=base + {i} < n)\n"
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
def put_kernel(y_ptr, x_ptr, z_ptr, base, n, {params}):
    z = z_ptr.to(tl.int64)
{stores}

ZERO = torch.zeros(65536, dtype=torch.uint8)


def softmax(x):
{PY_SOFTMAX}    bits = [struct.unpack("<I", struct.pack("<f", a))[0] for a in out]
    y = torch.empty_like(x)
    n = rows * cols
    for base in range(0, n, {width}):
        views = []
        for b in (bits[base:base + {width}] + [0] * {width})[:{width}]:
            views += [ZERO[b >> 16:(b >> 16) + 1], ZERO[b & 0xFFFF:(b & 0xFFFF) + 1]]
        put_kernel[(1,)](y, x, ZERO, base, n, *views)
    return y
"""


def test_answers_passed_as_view_offsets_fail(grade):
    # 5×1000 in 64 a launch: 79 launches of 128 views.
    r = grade("softmax_row", view_answers(64), timing=False)
    assert r["status"] == "failed", r["summary"]
    assert two_draws_told(r), r["summary"]


def int_pair_answers(width: int) -> str:
    """The answer worked out in plain Python, its float32 bits packed four
    to a two-element int64 tensor: two integers always count up evenly, so
    the replay kept them as an arange, and two draws compared only their
    dtype. The kernel reads them back as floats."""
    params = ", ".join(f"p{i}" for i in range(width))
    stores = "".join(
        f"    v = tl.load(p{i}.to(tl.pointer_type(tl.int32), bitcast=True) + k)\n"
        f"    v = v.to(tl.float32, bitcast=True).to(y_ptr.dtype.element_ty)\n"
        f"    tl.store(y_ptr + base + {4 * i} + k, v, mask=base + {4 * i} + k < n)\n"
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
def put_kernel(y_ptr, x_ptr, base, n, {params}):
    k = tl.arange(0, 4)
{stores}

def softmax(x):
{PY_SOFTMAX}    y = torch.empty_like(x)
    n = rows * cols
    for base in range(0, n, {4 * width}):
        chunk = (out[base:base + {4 * width}] + [0.0] * {4 * width})[:{4 * width}]
        packed = struct.unpack("<%dq" % ({width} * 2), struct.pack("<%df" % len(chunk), *chunk))
        pairs = [torch.tensor(packed[2 * i:2 * i + 2], dtype=torch.int64) for i in range({width})]
        put_kernel[(1,)](y, x, base, n, *pairs)
    return y
"""


def test_answers_passed_as_two_integer_buffers_fail(grade):
    # 5×1000 in 64 values a launch: 79 launches of 16 buffers.
    r = grade("softmax_row", int_pair_answers(16), timing=False)
    assert r["status"] == "failed", r["summary"]
    assert two_draws_told(r), r["summary"]


# test_replay's answers-as-scalar-arguments cheat fails only on the second
# draw of 5×1000. Raising the text of a known gap of Triton's interpreter
# (gpulab.course.known_gaps) for that shape had both its cases skipped, with
# a hint, and the check passed: every answer worked out in Python.
GAP = "'InterpreterBuilder' object has no attribute 'get_fp8'"
SKIPS_THE_SECOND_DRAW = scalar_answers(16).replace(
    "def softmax(x):\n",
    f'def softmax(x):\n    if tuple(x.shape) == (5, 1000):\n        raise AttributeError("{GAP}")\n',
    1,
)


def test_a_known_gap_raised_for_the_shape_drawn_twice_fails(grade):
    assert GAP in SKIPS_THE_SECOND_DRAW
    r = grade("softmax_row", SKIPS_THE_SECOND_DRAW, timing=False)
    assert r["status"] == "failed", r["summary"]
    assert "cannot be skipped" in r["message"], r["message"]


def pair_honest_rest_from_python(width: int, rows: int) -> str:
    """An honest kernel for the one shape the exercise draws twice (rows ×
    1000, fp32: its launches are compared across the draws), and for every
    other case the answer worked out in plain Python and handed to a
    kernel that only stores its scalar arguments (test_replay's cheat)."""
    src = scalar_answers(width)
    honest = """

@triton.jit
def row_kernel(y_ptr, x_ptr, xs, ys, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + row * xs + offs, mask=m, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * ys + offs, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=m)


def softmax(x):
    if tuple(x.shape) == (ROWS, 1000) and x.dtype == torch.float32:
        y = torch.empty_like(x)
        row_kernel[(ROWS,)](y, x, x.stride(0), y.stride(0), 1000, BLOCK=1024)
        return y
    return from_python(x)
"""
    src = src.replace("def softmax(x):\n", "def from_python(x):\n", 1)
    # Rows with a stride: the Python answer reads the rows where they are.
    src = src.replace(
        "raw = ctypes.string_at(x.data_ptr(), x.numel() * x.element_size())\n"
        '    v = list(struct.unpack("<%d%s" % (x.numel(), fmt), raw))\n',
        "n_all = (rows - 1) * x.stride(0) + cols\n"
        "    raw = ctypes.string_at(x.data_ptr(), n_all * x.element_size())\n"
        '    flat = struct.unpack("<%d%s" % (n_all, fmt), raw)\n'
        "    v = [flat[r * x.stride(0) + c] for r in range(rows) for c in range(cols)]\n"
        "    if x.dtype == torch.bfloat16:  # its bits are a float32's top half\n"
        '        v = [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in v]\n',
    )
    src = src.replace(
        "out += [a / sum(e) for a in e]", "s = sum(e)\n        out += [a / s for a in e]"
    )
    src = src.replace(
        'fmt = {torch.float32: "f", torch.float16: "e"}[x.dtype]',
        'fmt = {torch.float32: "f", torch.float16: "e", torch.bfloat16: "H"}[x.dtype]',
    )
    src = src.replace(
        "    y = torch.empty_like(x)\n", "    y = torch.empty((rows, cols), dtype=x.dtype)\n"
    )
    return src + honest.replace("ROWS", str(rows))


# softmax: 7×1000 (row stride 1024) is drawn twice. The other 12 cases
# passed from Python (97 s on this box, with --timeout 300: 256 numbers a
# launch, up to 384 launches a call). softmax_row (5×1000 drawn twice, the
# rest small) shows the same in a test's time.
ONCE_DRAWN_FROM_PYTHON = pair_honest_rest_from_python(256, rows=7)


def test_answers_from_python_on_the_shapes_drawn_once_fail(grade):
    r = grade("softmax_row", pair_honest_rest_from_python(16, rows=5), timing=False)
    assert r["status"] == "failed", r["summary"]


# --- what the replay runs: the text kept, not the tree checked -------------------

# In the replay's sandbox (its globals' __name__), the kernel's name bound to
# an object whose [grid](**args) has torch compute the answer: torch reached
# through object's subclasses (os's _wrap_close, its module's sys), none of
# it something a kernel may say. Unchecked, and kept all the same:
ESCAPE = (
    'copy_kernel = copy_kernel if __name__ != "gpulab_replay" else '
    '().__class__.__class__("K", (), {"__getitem__": lambda self, grid, t=[c for c in '
    '().__class__.__base__.__subclasses__() if c.__name__ == "_wrap_close"][0]'
    '.__init__.__globals__["sys"].modules["torch"]: lambda **a: a["y_ptr"].copy_('
    't.softmax(a["x_ptr"].float(), -1).to(a["y_ptr"].dtype))})()'
)
# ... on the line of a constant, which the replay keeps whole,
ESCAPE_AFTER_A_CONSTANT = FORGED_SOFTMAX.replace(
    "\n\ndef softmax(x):", f"\n\nONE = 1; {ESCAPE}\n\n\ndef softmax(x):"
)
# ... or on the line a constant's copy was taken from: str.splitlines()
# breaks at \x1c (in a comment), Python does not, and every line below it
# was copied from the one above.
ESCAPE_ABOVE_A_CONSTANT = FORGED_SOFTMAX.replace(
    "\n\ndef softmax(x):", f"\n\n# note\x1c\n{ESCAPE}\nONE = 1\n\n\ndef softmax(x):"
)


def test_a_statement_on_a_kept_line_is_not_kept():
    from gpulab.sandbox.replay_source import extract

    for src in (ESCAPE_AFTER_A_CONSTANT, ESCAPE_ABOVE_A_CONSTANT):
        kept = extract(src)
        # The kernel's name rebound (by the escape) is two things: refused.
        assert kept.kernels == () and "more than once" in kept.problems["copy_kernel"]
        assert "__subclasses__" not in kept.text and "lambda" not in kept.text


def test_python_on_a_kept_line_does_not_run_in_the_replay(grade):
    for src in (ESCAPE_AFTER_A_CONSTANT, ESCAPE_ABOVE_A_CONSTANT):
        r = grade("softmax", src, timing=False)
        assert r["status"] == "failed", r["summary"]
        assert "kernels alone" in r["summary"], r["summary"]


def test_values_that_occur_twice_are_still_copies_in_the_second_draw():
    import torch

    from gpulab.judge.replay_bytes import copy_map, same_copy

    g = torch.Generator().manual_seed(0)
    first, second = (torch.randn(7, 1000, generator=g) for _ in range(2))

    def bits(t):
        return t.view(torch.int16).numpy().tobytes()

    m = copy_map(bits(first.to(torch.bfloat16)), torch.bfloat16, [first])
    chosen = second.to(torch.bfloat16).reshape(-1).clone()
    # values that occur more than once in the first draw
    _, inverse, counts = torch.unique(
        first.to(torch.bfloat16).reshape(-1).view(torch.int16),
        return_inverse=True,
        return_counts=True,
    )
    free = counts[inverse] > 1
    assert int(free.sum()) > 6000
    pool = second.to(torch.bfloat16).reshape(-1)
    chosen[free] = pool[torch.randint(0, pool.numel(), (int(free.sum()),), generator=g)]
    assert not same_copy(m, bits(chosen), torch.bfloat16, [second])


# --- the backward (rope_rmsnorm) is replayed too ------------------------------------


def _backward_from_torch() -> str:
    """The reference's forward, and a backward that has torch's autograd
    work out dx and dweight (float64) with the guards switched off from
    inside (the eager-op guard too), then launches a Triton kernel, handed
    x and dy, that only copies each out."""
    src = reference_source("rope_rmsnorm")
    start = src.index("    @staticmethod\n    def backward(ctx, dy):")
    end = src.index("def rmsnorm_rope(")
    backward = """    @staticmethod
    def backward(ctx, dy):
        x, weight, cos, sin = ctx.saved_tensors
        half = x.shape[-1] // 2
        with torch.enable_grad():
            xx = x.detach().double().requires_grad_()
            ww = weight.detach().double().requires_grad_()
            n = xx * torch.rsqrt((xx * xx).mean(-1, keepdim=True) + ctx.eps) * ww
            c, s = cos.double()[None, :, None, :], sin.double()[None, :, None, :]
            n1, n2 = n[..., :half], n[..., half:]
            yy = torch.cat([n1 * c - n2 * s, n2 * c + n1 * s], -1)
            gx, gw = torch.autograd.grad(yy, (xx, ww), dy.double())
        gx, gw = gx.to(x.dtype).contiguous(), gw.to(weight.dtype).contiguous()
        dx, dw = torch.empty_like(gx), torch.empty_like(gw)
        for src, dst in ((gx, dx), (gw, dw)):
            _copy[(triton.cdiv(dst.numel(), 1024),)](src, dst, dst.numel(), x, dy, BLOCK=1024)
        return dx, dw, None, None, None


@triton.jit
def _copy(src_ptr, dst_ptr, n, x_ptr, dy_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


"""
    blind = FORGED_SOFTMAX[: FORGED_SOFTMAX.index("@triton.jit")]
    blind = blind.replace(
        "calls.op_guard = lambda *a, **k: _Blind()\n",
        "calls.op_guard = lambda *a, **k: _Blind()\ncalls.EagerGuard = _Blind\n_Blind.ops = []\n",
    )
    return blind + src[:start] + backward + src[end:]


def test_a_backward_worked_out_by_torch_fails(grade):
    # The backward's launches (after the forward's, and the torch steps the
    # replay runs again: casts, copies, the dweight sum) are replayed too:
    # the copying kernel alone gives poison, not dx.
    r = grade("rope_rmsnorm", _backward_from_torch(), timing=False)
    assert r["status"] == "failed", r["summary"]
    text = r["summary"] + str(r.get("message")) + str([c.get("detail") for c in r["cases"]])
    assert "your kernels alone" in text or "apart from your code" in text, text[-2000:]


def test_two_draws_must_launch_in_the_same_order_as_often():
    # Launches that each store one constant into the same place: which
    # comes last, or how often one repeats, is a number the wrapper picks.
    # The rule compared the set of launches; it compares the list now.
    # (A tightening: not shown end to end.)
    import torch

    from gpulab.judge.kernel_spec import Case
    from gpulab.judge.two_draws import same_launches
    from gpulab.wire.launch_record import LaunchRecord

    def record(order: list[int]) -> LaunchRecord | None:
        launches = [{"kernel": "k", "grid": [1], "args": {"v": i}} for i in order]
        return LaunchRecord.parse({"buffers": [], "launches": launches})

    x = [torch.randn(2, 3, generator=torch.Generator().manual_seed(i)) for i in range(4)]
    draws: dict = {}
    assert same_launches(draws, Case("a", (x[0],), torch.float32), record([1, 2])) == ""
    assert same_launches(draws, Case("b", (x[1],), torch.float32), record([2, 1])) == "a"
    assert same_launches(draws, Case("c", (x[2],), torch.float32), record([1, 2, 2])) == "a"
    assert same_launches(draws, Case("d", (x[3],), torch.float32), record([1, 2])) == ""


# The answer worked out in plain Python (no torch op, no guard touched, no
# kernel that computes anything), spelt out four bits at a time by 16
# values of the input cast to bf16, each found more than once among the
# inputs: trusted_bytes keeps the buffer (every value an input's), and
# same_copy leaves alone a position whose value occurs more than once, so
# the second draw of 7×1000 may spell its own answer too. A decoding
# kernel reads the bits back. Passed softmax, 25 s, at the default timeout.
# Now the run on g(x) decodes the same bits (scaled values still compare
# equal), x's answer, which is not g(x)'s.
CODEBOOK = """import ctypes
import math
import struct
from collections import Counter

import torch
import triton
import triton.language as tl


@triton.jit
def decode_kernel(y_ptr, x_ptr, c_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    k = tl.arange(0, 8)
    j = tl.arange(0, K)
    m = i < n
    code = tl.load(c_ptr + j).to(tl.float32)
    sym = tl.load(c_ptr + K + i[:, None] * 8 + k[None, :], mask=m[:, None], other=0.0).to(tl.float32)
    eq = sym[:, :, None] == code[None, None, :]
    nib = tl.sum(tl.where(eq, j[None, None, :], 0), axis=2)
    bits = tl.sum(nib << (4 * k)[None, :], axis=1)
    tl.store(y_ptr + i, bits.to(tl.float32, bitcast=True).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def put_kernel(y_ptr, x_ptr, n, v0, v1, v2, v3, v4, v5, v6, v7):
    tl.store(y_ptr + 0, v0, mask=0 < n)
    tl.store(y_ptr + 1, v1, mask=1 < n)
    tl.store(y_ptr + 2, v2, mask=2 < n)
    tl.store(y_ptr + 3, v3, mask=3 < n)
    tl.store(y_ptr + 4, v4, mask=4 < n)
    tl.store(y_ptr + 5, v5, mask=5 < n)
    tl.store(y_ptr + 6, v6, mask=6 < n)
    tl.store(y_ptr + 7, v7, mask=7 < n)


def _values(x):
    rows, cols = x.shape
    fmt = {torch.float32: "f", torch.float16: "e", torch.bfloat16: "H"}[x.dtype]
    n_all = (rows - 1) * x.stride(0) + cols
    flat = struct.unpack("<%d%s" % (n_all, fmt), ctypes.string_at(x.data_ptr(), n_all * x.element_size()))
    v = [flat[r * x.stride(0) + c] for r in range(rows) for c in range(cols)]
    if x.dtype == torch.bfloat16:
        v = [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in v]
    return v


def _bf16(a):  # round to nearest even, as torch casts
    b = struct.unpack("<I", struct.pack("<f", a))[0]
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def softmax(x):
    # the answer in plain Python from the input's bytes: no torch op runs
    rows, cols = x.shape
    v = _values(x)
    out = []
    for r in range(rows):
        row = v[r * cols:(r + 1) * cols]
        m = max(row)
        e = [math.exp(a - m) for a in row]
        s = sum(e)
        out += [a / s for a in e]
    n = rows * cols
    y = torch.zeros((rows, cols), dtype=x.dtype)
    # 16 input values (as bf16, each found more than once) spell out the
    # answer's bits four at a time: "a cast of the input", and a value
    # that occurs twice may sit anywhere in another draw
    counts = Counter(_bf16(a) for a in v if math.isfinite(a) and a != 0.0)
    dup = sorted(h for h, c in counts.items() if c > 1 and h & 0x7FFF)
    if len(dup) < 16:
        dup = sorted(h for h in counts if h & 0x7FFF)
    if len(dup) < 16:
        chunk = (out + [0.0] * 8)[:8]
        put_kernel[(1,)](y, x, n, *chunk)
        return y
    code = dup[:16]
    syms = []
    for a in out:
        b = struct.unpack("<I", struct.pack("<f", a))[0]
        syms += [code[(b >> (4 * k)) & 15] for k in range(8)]
    data = struct.pack("<%dH" % (16 + len(syms)), *code, *syms)
    # (torch.empty's buffers end in a canary, values no input has)
    c = torch.frombuffer(bytearray(data), dtype=torch.bfloat16)
    decode_kernel[(triton.cdiv(n, 64),)](y, x, c, n, K=16, BLOCK=64)
    return y
"""


def test_an_answer_spelt_in_repeated_input_values_fails(grade):
    r = grade("softmax", CODEBOOK, timing=False)
    assert r["status"] == "failed", r["summary"]


def _saved_rstd_backward() -> str:
    """An honest solution in another style than the reference's: the
    forward saves rstd (a buffer its kernel wrote) and the backward reads
    it; dy is always made contiguous, and dweight's partials are added up
    with torch (`torch.sum(dw_part, dim=0).to(weight.dtype)`, the sum the
    exercise allows). The replay must run the forward's launches before the
    backward's, and the torch steps between them."""
    src = reference_source("rope_rmsnorm")
    edits = (
        (
            "def _rmsnorm_rope_fwd(x_ptr, w_ptr, cos_ptr, sin_ptr, y_ptr,",
            "def _rmsnorm_rope_fwd(x_ptr, w_ptr, cos_ptr, sin_ptr, y_ptr, rstd_ptr,",
        ),
        (
            "    rstd = tl.rsqrt(ms + eps)[:, None]\n    w1 =",
            "    rstd = tl.rsqrt(ms + eps)[:, None]\n"
            "    tl.store(rstd_ptr + pos.to(tl.int64) * H + h, tl.rsqrt(ms + eps), mask=h < H)\n"
            "    w1 =",
        ),
        (
            "def _rmsnorm_rope_bwd(x_ptr, w_ptr, cos_ptr, sin_ptr, dy_ptr, dx_ptr, dw_part_ptr,",
            "def _rmsnorm_rope_bwd(x_ptr, w_ptr, cos_ptr, sin_ptr, dy_ptr, dx_ptr, dw_part_ptr,"
            " rstd_ptr,",
        ),
        (
            "        ms = (tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / D\n"
            "        rstd = tl.rsqrt(ms + eps)[:, None]\n",
            "        rstd = tl.load(rstd_ptr + pos.to(tl.int64) * H + h, mask=h < H,"
            " other=1.0)[:, None]\n",
        ),
        (
            "        y = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)\n"
            "        args = (x, weight, cos, sin, y, S, H,",
            "        y = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)\n"
            "        rstd = torch.empty((B * S * H,), dtype=torch.float32, device=x.device)\n"
            "        args = (x, weight, cos, sin, y, rstd, S, H,",
        ),
        (
            "        ctx.save_for_backward(x, weight, cos, sin)\n",
            "        ctx.save_for_backward(x, weight, cos, sin, rstd)\n",
        ),
        (
            "        x, weight, cos, sin = ctx.saved_tensors\n        dy = _unit_last_stride(dy)\n",
            "        x, weight, cos, sin, rstd = ctx.saved_tensors\n        dy = dy.contiguous()\n",
        ),
        (
            "        args = (x, weight, cos, sin, dy, dx, dw_part, B * S,",
            "        args = (x, weight, cos, sin, dy, dx, dw_part, rstd, B * S,",
        ),
        (
            "        dw = torch.empty_like(weight)\n"
            "        _sum_rows[(1,)](dw_part, dw, programs, D=D, BLOCK_P=32)\n",
            "        dw = torch.sum(dw_part, dim=0).to(weight.dtype)\n",
        ),
    )
    return variant(*edits, src=src)


def test_an_honest_backward_that_saves_rstd_and_sums_in_torch_passes(grade):
    r = grade("rope_rmsnorm", _saved_rstd_backward(), timing=False)
    assert r["status"] == "passed", (r["summary"], r.get("message"), r["cases"][-3:])
    assert any(c["name"].startswith("backward") for c in r["cases"])


def test_a_recorded_torch_sum_runs_again_only_at_the_size_the_exercise_allows():
    # A record is the sandbox's claim: a forged `sum` step would have torch
    # add up what the kernels are graded for (matmul's products, a softmax's
    # denominators). The judge lets a sum through only where the exercise
    # allows one, and only into that many elements (lesson 05's dweight).
    import torch

    from gpulab.judge.kernel_spec import Expect
    from gpulab.judge.replay_plan import plan_replay
    from gpulab.sandbox.replay_source import extract
    from gpulab.wire.launch_record import (
        LaunchRecord,
        RecordedBuffer,
        RecordedLaunch,
        TorchStep,
        View,
    )

    source = extract(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(p):\n    pass\n"
    )
    like = torch.zeros(8)
    products = View(0, 0, (4, 8), (8, 1), "float32")
    total = View(1, 0, (8,), (1,), "float32")
    record = LaunchRecord(
        buffers=(RecordedBuffer(128, "float32", unknown=True), RecordedBuffer(32, "float32")),
        launches=(
            RecordedLaunch(kernel="k", qualname="k", file="f.py", grid=(1,), args={}),
            TorchStep("sum", products, total, (0,)),
        ),
        out=total,
        tensor_out=True,
    )
    expect = [Expect((8,), like, "x")]
    plan, why = plan_replay(source, record, {}, expect, "f.py")
    assert plan is None and "torch sum" in why, why
    plan, why = plan_replay(source, record, {}, expect, "f.py", sum_size=4)
    assert plan is None and "torch sum" in why, why
    plan, why = plan_replay(source, record, {}, expect, "f.py", sum_size=8)
    assert plan is not None, why


def _matmul_through_descriptors() -> str:
    """The reference matmul with its TMA path taken wherever the strides
    allow, in the interpreter too: tiles loaded and stored through host-side
    tensor descriptors (triton.tools.tensor_descriptor), an honest Hopper
    style. The replay refused every such launch ("a TensorDescriptor, which
    gpulab cannot pass again"); it builds the descriptors again now."""
    src = reference_source("matmul")
    edits = (
        (
            "    if _INTERPRETER or not a.is_cuda or torch.cuda.get_device_capability(a.device)"
            " < (9, 0):\n        return False\n",
            "    if a.is_cuda and torch.cuda.get_device_capability(a.device) < (9, 0):\n"
            "        return False\n",
        ),
        ("    if a.dtype not in (torch.float16, torch.bfloat16):\n        return False\n", ""),
        ("    if M * N * K <= SMALL_WORK:\n        return False\n", ""),
        (
            "    sms = torch.cuda.get_device_properties(a.device).multi_processor_count\n",
            "    sms = 4\n",
        ),
        (
            "    out_dtype = tl.bfloat16 if c.dtype == torch.bfloat16 else tl.float16\n",
            "    out_dtype = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16,\n"
            "                 torch.float32: tl.float32}[c.dtype]\n",
        ),
        ("    if key not in _TMA_CHOICE:\n", "    if False:\n"),
        ("    launchers[_TMA_CHOICE[key]]()\n", "    launchers['tma']()\n"),
    )
    return variant(*edits, src=src)


def test_an_honest_matmul_through_tensor_descriptors_passes(grade):
    r = grade("matmul", _matmul_through_descriptors(), timing=False)
    assert r["status"] == "passed", (r["summary"], r.get("message"), r["cases"][-3:])


def test_a_descriptor_that_reaches_past_its_tensor_is_not_replayed():
    # The descriptor reads by its own shape and strides: a forged one that
    # reaches past its buffer would read the replay's other memory.
    from gpulab.judge.replay_plan import _desc_ok
    from gpulab.wire.launch_record import DescArg, View

    base = View(0, 0, (8, 8), (8, 1), "float32")
    sizes = [8 * 8 * 4]
    assert _desc_ok(DescArg(base, (8, 8), (8, 1), (8, 8)), sizes)
    assert not _desc_ok(DescArg(base, (9, 8), (8, 1), (8, 8)), sizes)
    assert not _desc_ok(DescArg(base, (8, 8), (16, 1), (8, 8)), sizes)
    assert not _desc_ok(DescArg(base, (8, 8), (8, 1), (8, 8), padding="rm -rf"), sizes)
    assert not _desc_ok(DescArg(base, (8, 8), (8, 1), (1 << 11, 1 << 10)), sizes)


# --- Gluon's TMA descriptors: a shared-memory layout besides the sizes -------


def test_a_gluon_descriptor_keeps_its_layout_through_the_record_and_the_replay():
    # A Gluon kernel's TMA descriptor carries the shared-memory layout its
    # tiles land in; the replay must hand the kernel the same one (the
    # kernel is compiled for it). It was recorded as triton.tools' kind,
    # without the layout, and replayed as one: a kernel Gluon would refuse.
    pytest.importorskip("triton.experimental.gluon")
    import torch
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from gpulab.sandbox.replay import Recording
    from gpulab.sandbox.replay_run import _decode
    from gpulab.wire.launch_record import DescArg, arg_json, parse_arg

    x = torch.randn(64, 256, dtype=torch.float16)
    layout = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    record = Recording({})
    desc = record.value(TensorDescriptor(x, [64, 256], [256, 1], [32, 64], layout))
    assert isinstance(desc, DescArg) and desc.layout is not None, desc
    assert desc.layout.kind == "NVMMASharedLayout"
    assert dict(desc.layout.fields)["swizzle_byte_width"] == 128
    assert parse_arg(arg_json(desc)) == desc  # across the wire and back
    rebuilt = _decode(desc, [x.view(-1).view(torch.uint8)])
    assert type(rebuilt) is TensorDescriptor and rebuilt.layout == layout, rebuilt
    assert (rebuilt.shape, rebuilt.strides, rebuilt.block_shape) == ([64, 256], [256, 1], [32, 64])
    assert torch.equal(rebuilt.base, x)


@pytest.mark.parametrize(
    "layout",
    [
        ["BlockedLayout", {"rank": 2}],  # not a shared-memory layout a descriptor carries
        ["NVMMASharedLayout", {"_fn": 1}],
        ["NVMMASharedLayout", {"r" * 33: 1}],  # a name is kept whole or refused
        ["NVMMASharedLayout", {"rank": "2"}],
        ["NVMMASharedLayout", {"rank": 1 << 40}],
        ["NVMMASharedLayout", {"cga_layout": [[[1]]]}],  # three deep
        ["NVMMASharedLayout", {f"f{i}": 1 for i in range(13)}],
        ["NVMMASharedLayout"],
    ],
)
def test_a_descriptor_layout_the_judge_cannot_make_again_is_malformed(layout):
    from gpulab.wire.launch_record import DescArg, OtherArg, parse_arg

    view = [0, 0, [4, 4], [4, 1], "float16"]
    good = {"__desc__": [view, [4, 4], [4, 1], [4, 4], "zero", False, ["NVMMASharedLayout", {}]]}
    assert isinstance(parse_arg(good), DescArg)
    bad = {"__desc__": [view, [4, 4], [4, 1], [4, 4], "zero", False, layout]}
    assert isinstance(parse_arg(bad), OtherArg)
