"""Cheats against every kernel step (lessons 02-05), as tests/judge/test_integrity_all.py
does for the lessons' final exercises.

A step is graded on correctness only, but its verdict still says "your
Triton kernel computed this": each cheat wraps the step's own reference, so
the answers are right and only the cheat can fail it, for the stated
reason. The wrapper alone passes (the control). All of them are graded by
the real grader and the sandbox's handlers in ONE child process
(tests/inprocess.py; a child because Triton's interpreter is chosen when
triton is first imported, and a pytest worker may have imported it
otherwise), once a run (test_steps45_grading's helpers). The boundary
itself is tested through real processes in test_integrity_all.py and
test_boundary.py.
"""

from __future__ import annotations

import pytest

from tests.judge.test_integrity_all import CHEATS as FINAL_CHEATS
from tests.judge.test_integrity_all import wrapped as _wrapped

# Its module fixtures grade or compile a batch: one worker runs the module
# (pyproject's --dist loadgroup), where a second would build it again.
pytestmark = pytest.mark.xdist_group("integrity_steps")

STEPS = {  # step -> the function the learner defines
    "softmax_row": "softmax",
    "softmax_wide": "softmax",
    "matmul_tile": "matmul",
    "matmul_kloop": "matmul",
    "attention_tile": "attention",
    "attention_online": "attention",
    "rope": "rope",
    "rmsnorm": "rmsnorm",
    "rope_rmsnorm_fwd": "rmsnorm_rope",
    "rope_rmsnorm_bwd": "rmsnorm_rope_backward",
}


def wrapped(step: str, **changes: str) -> str:
    return _wrapped(step, fn=STEPS[step], **changes)


CHEATS = {
    # The final exercises' own: scratch space in an input, answers remembered by shape.
    name: FINAL_CHEATS[name]
    for name in ("writes into an input", "returns a cached output")
}
# torch touches the answer after the kernel: the output is torch's, not the kernel's.
CHEATS["torch computes the output"] = (
    dict(after="    out = out * 1"),
    ("torch ran torch's aten::mul", "computed eagerly with aten.mul"),
)


def test_every_kernel_step_is_covered():
    from gpulab.course.content import load_course

    course = load_course()
    # The kernel lessons, 02-05 (lesson 01's step is a microbenchmark, graded apart).
    steps = {ex.exercise for ex in course.exercises if ex.is_step and "02" <= ex.number <= "05"}
    assert steps == set(STEPS)


# A step whose function returns (dx, dweight): torch touches dx.
RETURNS_TWO = {"torch computes the output": dict(after="    out = (out[0] * 1, out[1])")}


def _changes(step: str, cheat: str) -> dict:
    if step == "rope_rmsnorm_bwd":
        return RETURNS_TWO.get(cheat, CHEATS[cheat][0])
    return CHEATS[cheat][0]


def _items(tmp) -> dict:
    items = {}
    for step, fn in STEPS.items():
        variants = {f"{step}: {cheat}": wrapped(step, **_changes(step, cheat)) for cheat in CHEATS}
        variants[f"{step}: the wrapper alone"] = wrapped(step)
        for name, src in variants.items():
            path = tmp / f"variant_{len(items)}.py"
            path.write_text(src)
            items[name] = (step, fn, str(path))
    return items


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """'step: variant' -> its result, every variant graded in one child."""
    from tests.judge.test_steps45_grading import IN_PROCESS_CHILD, _once, _run

    return _once(
        tmp_path_factory,
        "integrity-steps",
        lambda tmp: _run(IN_PROCESS_CHILD, tmp, _items(tmp)),
    )


@pytest.mark.parametrize("cheat", list(CHEATS))
@pytest.mark.parametrize("step", list(STEPS))
def test_cheat_on_a_step_is_caught(graded, step, cheat):
    reasons = CHEATS[cheat][1]
    r = graded[f"{step}: {cheat}"]
    assert r["status"] == "failed", (step, cheat, r["summary"])
    assert any(why in r["summary"] for why in reasons), r["summary"]


@pytest.mark.parametrize("step", list(STEPS))
def test_the_wrapper_alone_passes(graded, step):
    r = graded[f"{step}: the wrapper alone"]
    assert r["status"] == "passed", r["summary"]
