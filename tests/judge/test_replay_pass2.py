"""The replay (gpulab.judge.replay) again: forgeries of "your Triton kernel
did the work" on the CPU that passed it, found after test_replay's. Each
computes the answer outside any Triton kernel and passed a whole check.

Real checks in real child processes, in the Triton interpreter."""

from __future__ import annotations

from tests.judge.test_replay import FORGED_SOFTMAX, PY_SOFTMAX, scalar_answers

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

    from gpulab.judge.replay import trusted_bytes

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
    assert "second draw, your launches" in r["summary"], r["summary"]


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
    assert "second draw, your launches" in r["summary"], r["summary"]


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
