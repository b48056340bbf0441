"""Grader integrity, every cheat class against every kernel exercise.

Each cheat wraps the exercise's own reference solution, so the answers are
right and only the cheat can make the check fail: the grader must catch it,
for the stated reason. The classes GRADING.md lists that need a GPU (a side
stream, a time below the roofline floor) are marked `gpu`.
"""

from __future__ import annotations

import pytest

from tests.conftest import reference_source

KERNELS = {  # exercise -> the function the learner defines
    "bandwidth": "triad",
    "softmax": "softmax",
    "matmul": "matmul",
    "flash_attention": "attention",
    "rope_rmsnorm": "rmsnorm_rope",
}


def wrapped(
    exercise: str, before: str = "", after: str = "", prelude: str = "", fn: str = ""
) -> str:
    """The reference, with its function (`fn`, else KERNELS') wrapped:
    `before`/`after` run around the real call (`args`, `kwargs` and `out` in
    scope)."""
    fn = fn or KERNELS[exercise]
    return (
        reference_source(exercise)
        + f"""

import torch as _torch
{prelude}
_real_impl = {fn}


def {fn}(*args, **kwargs):
{before or "    pass"}
    out = _real_impl(*args, **kwargs)
{after or "    pass"}
    return out
"""
    )


CHEATS = {
    # Uses the first input as scratch space after computing the answer.
    "writes into an input": (
        # (fill_, not add_: the triad grader bans torch's arithmetic outright.)
        dict(
            after="    with _torch.no_grad():\n        args[0].data.as_strided((1,), (1,)).fill_(7)"
        ),
        ("wrote into its inputs",),
    ),
    # Remembers answers by shape: the same shape with fresh data must fail.
    "returns a cached output": (
        dict(
            prelude="_cache = {}",
            before="    key = tuple((tuple(a.shape), a.dtype, a.stride()) for a in args\n"
            "                if isinstance(a, _torch.Tensor))\n"
            "    if key in _cache:\n"
            "        return _cache[key]",
            after="    _cache[key] = out",
        ),
        # Caught either way: the cached call launches nothing, or its answer
        # is another draw's.
        ("no Triton kernel was launched", "wrong"),
    ),
    # Writes a forged "passed" result to every file descriptor it can find,
    # then returns garbage.
    "forges a result": (
        dict(
            prelude=(
                "import os as _os\n"
                '_fake = \'{"type": "result", "result": {"status": "passed", '
                "\"summary\": \"forged\"}}\\t' + '0' * 64 + '\\n'\n"
                "for _fd in range(3, 64):\n"
                "    try:\n"
                "        _os.write(_fd, _fake.encode())\n"
                "    except OSError:\n"
                "        pass"
            ),
            after="    out = out * 0 if isinstance(out, _torch.Tensor) else out",
        ),
        ("",),
    ),
}


@pytest.mark.parametrize("cheat", list(CHEATS))
@pytest.mark.parametrize("exercise", list(KERNELS))
def test_cheat_is_caught(grade, exercise, cheat):
    parts, why = CHEATS[cheat]
    r = grade(exercise, wrapped(exercise, **parts), timing=False)
    assert r["status"] == "failed", (r["status"], r["summary"])
    assert r["summary"] != "forged"
    text = r["summary"] + " " + " ".join(c.get("detail", "") for c in r["cases"])
    assert any(w in text for w in why), r["summary"]


@pytest.mark.parametrize("exercise", ["softmax", "rope_rmsnorm"])
def test_patching_torch_in_the_sandbox_bends_nothing_in_the_judge(grade, exercise):
    """Once a cheat, now harmless: torch.exp and the event timer rebound to
    lies in the learner's process; the references and timers that decide
    live in the judge, so an honest kernel still passes on its own merit."""
    prelude = (
        "_torch.exp = lambda *a, **k: _torch.zeros(())\n"
        "_torch.cuda.Event.elapsed_time = lambda self, end: 0.001"
    )
    r = grade(exercise, wrapped(exercise, prelude=prelude), timing=False)
    assert r["passed"] and r["verdict"] == "judge", r["summary"]


@pytest.mark.parametrize("exercise", list(KERNELS))
def test_wrapper_alone_passes(grade, exercise):
    """The wrapping itself is harmless: the cheats above fail for their cheat."""
    r = grade(exercise, wrapped(exercise), timing=False)
    assert r["passed"], r["summary"]


# --- On a GPU ---------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("exercise", list(KERNELS))
def test_gpu_side_stream_is_caught(grade, exercise):
    src = wrapped(
        exercise,
        before="    _s = _torch.cuda.Stream()\n"
        "    with _torch.cuda.stream(_s):\n"
        "        return _real_impl(*args, **kwargs)",
    )
    r = grade(exercise, src, device="cuda", timeout=900)
    assert r["status"] == "failed" and "side stream" in r["summary"], r["summary"]


@pytest.mark.gpu
@pytest.mark.parametrize("exercise", list(KERNELS))
def test_gpu_cached_timing_is_implausible(grade, exercise):
    # Right answers once, then the answer remembered by shape: every timed call
    # gets fresh inputs from the judge, so a remembered answer is a wrong one.
    src = wrapped(
        exercise,
        prelude="_seen = {}",
        before="    key = tuple((tuple(a.shape), a.dtype) for a in args\n"
        "                if isinstance(a, _torch.Tensor))\n"
        "    if key in _seen:\n"
        "        return _seen[key].clone()",
        after="    _seen[key] = out",
    )
    r = grade(exercise, src, device="cuda", timeout=900)
    assert r["status"] == "failed", r["summary"]
    assert "wrong" in r["summary"] or "no Triton kernel" in r["summary"], r["summary"]
