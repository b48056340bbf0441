"""The graph_breaks grader (lesson 06), end to end through real child
processes on the CPU: the reference passes, the starter fails with each of its
five breaks named at its line, and each wrong or cheating variant fails for the
stated reason. A GPU test checks the timing of the compile modes."""

from __future__ import annotations

import pytest

from tests.conftest import reference_source, starter_source

REF = reference_source("graph_breaks")
STARTER = starter_source("graph_breaks")


def variant(old: str, new: str, src: str = REF) -> str:
    assert old in src, f"variant anchor not found: {old!r}"
    return src.replace(old, new, 1)


def line_of(src: str, text: str) -> int:
    return next(i for i, ln in enumerate(src.splitlines(), 1) if text in ln)


def test_reference_passes(grade):
    r = grade("graph_breaks", REF, shared=True)
    assert r["passed"], r
    names = [c["name"] for c in r["cases"]]
    # Outputs on both sides of the data-dependent branch, two Dynamo traces,
    # and the compiled comparison.
    assert any("not rescaled" in n for n in names) and any("RMS 8: rescaled" in n for n in names)
    dyn = [c for c in r["cases"] if c["name"].startswith("Dynamo")]
    assert len(dyn) == 2 and all(c["graph_breaks"] == 0 and c["ops"] > 20 for c in dyn)
    assert any(n.startswith("compiled (aot_eager)") for n in names)
    assert r["timing"] is None and r["duration_s"] < 60


def test_starter_fails_with_each_break_at_its_line(grade):
    r = grade("graph_breaks", STARTER, shared=True)
    assert r["status"] == "failed"
    # The outputs match (the starter *is* the original); the breaks fail it.
    outputs = [c for c in r["cases"] if "shape" in c]
    assert len(outputs) == 7 and all(c["passed"] for c in outputs)
    breaks = {c["line"]: c["detail"] for c in r["cases"] if c["name"].startswith("graph break")}
    expected = {
        'print(f"step:': "I/O",
        "if rms > CAP:": "branch on a tensor",
        "temp = scores.std().item()": ".item()",
        "enumerate(lengths.tolist())": "Python numbers",
        "np.partition(": "NumPy",
    }
    for code, kind in expected.items():
        line = line_of(STARTER, code)
        assert line in breaks, (code, breaks)
        assert kind in breaks[line], (code, breaks[line])
    # Each line is reported once, though two inputs are traced.
    assert len([c for c in r["cases"] if c["name"].startswith("graph break")]) == len(breaks)


# Honest rewrites in other styles: each must pass.
HONEST = {
    # The branch as torch's own control flow. The op guard once refused every
    # higher-order op ("no rule registered for HigherOrderOperator cond").
    "torch.cond": variant(
        "    x = x * torch.where(rms > CAP, CAP / rms, 1.0)\n",
        "    x = torch.cond(rms > CAP, lambda x, r: x * (CAP / r), lambda x, r: x.clone(), (x, rms))\n",
    ),
    # Other spellings of the same four fixes: a clamped scale, torch.clamp,
    # the mask compared the other way round, kthvalue for the k-th largest.
    "other spellings": variant(
        "    hi = torch.topk(h.detach().flatten(), k).values[-1]\n",
        "    hi = torch.kthvalue(h.detach().flatten(), h.numel() - k + 1).values\n",
        variant(
            "    mask = torch.arange(S, device=x.device)[None, :] >= lengths[:, None]\n",
            "    mask = lengths.unsqueeze(1) <= torch.arange(S, device=x.device).unsqueeze(0)\n",
            variant(
                "scores = scores / scores.std().clamp_min(1.0)",
                "scores = scores / torch.clamp(scores.std(), min=1.0)",
                variant(
                    "    x = x * torch.where(rms > CAP, CAP / rms, 1.0)\n",
                    "    x = x * (CAP / rms).clamp(max=1.0)\n",
                ),
            ),
        ),
    ),
}


@pytest.mark.parametrize("name", list(HONEST))
def test_honest_variants_pass(grade, name):
    r = grade("graph_breaks", HONEST[name])
    assert r["passed"], (name, r["summary"], r.get("message", "")[-2000:])


def test_guards_pass_higher_order_ops_and_see_inside():
    """torch.cond under the op guard: it runs, and the ops in its branches are
    still seen (here a banned softmax), by both of the guard's modes."""
    import torch

    from gpulab.sandbox.guards import op_guard

    x = torch.linspace(-1.0, 2.0, 32).reshape(4, 8)  # sum > 0: the softmax branch
    with op_guard([torch.softmax], ["softmax", "_softmax"]) as v:
        y = torch.cond(x.sum() > 0, lambda t: torch.softmax(t, -1), lambda t: t.clone(), (x,))
    assert torch.equal(y, torch.softmax(x, -1))
    assert "torch.softmax" in v.banned and "aten.softmax" in v.banned, v.banned


def test_learner_messages_never_name_the_graders_objects():
    from gpulab.sandbox.learner import scrub_internals

    raw = (
        "no rule registered for HigherOrderOperator cond and mode "
        "<gpulab.sandbox.guards._DispatchGuard object at 0x7f6c517dc9d0>."
    )
    assert scrub_internals(raw) == (
        "no rule registered for HigherOrderOperator cond and mode gpulab's guard."
    )


WRONG = {
    # One break left: a print after the first ops (explain would count it too).
    "one break left": (
        variant("    B, S, D = x.shape\n", "    B, S, D = x.shape\n    print('shape', B, S, D)\n"),
        "graph break at line",
    ),
    # The rescale applied always: the branch's other side changes the output.
    "outputs changed": (
        variant("x = x * torch.where(rms > CAP, CAP / rms, 1.0)", "x = x * (CAP / rms)"),
        "output differs from the original step",
    ),
    # The original code, excluded from tracing instead of fixed.
    "disabled": (
        variant(
            "def step(x, lengths, p):", "@torch.compiler.disable\ndef step(x, lengths, p):", STARTER
        ),
        "torch.compiler.disable",
    ),
    # The original code hidden in a custom op: one opaque node, no break.
    "custom op": (
        STARTER.replace("def step(x, lengths, p):", "def _orig(x, lengths, p):")
        + """

@torch.library.custom_op("cheat::block", mutates_args=())
def _block(x: torch.Tensor, lengths: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor,
           wv: torch.Tensor, wo: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor,
           norm1: torch.Tensor, norm2: torch.Tensor) -> torch.Tensor:
    return _orig(x, lengths, dict(wq=wq, wk=wk, wv=wv, wo=wo, w1=w1, w2=w2,
                                  norm1=norm1, norm2=norm2))


@_block.register_fake
def _(x, *args):
    return torch.empty_like(x)


def step(x, lengths, p):
    return _block(x, lengths, *(p[k] for k in ("wq", "wk", "wv", "wo", "w1", "w2",
                                                "norm1", "norm2")))
""",
        "opaque calls",
    ),
    # A different, wrong path only when Dynamo traces: eager outputs match,
    # compiled ones must too, on both sides of the branch.
    "differs when compiled": (
        variant(
            "    x = x * torch.where(rms > CAP, CAP / rms, 1.0)",
            "    x = x * (CAP / rms) if torch.compiler.is_compiling() else "
            "x * torch.where(rms > CAP, CAP / rms, 1.0)",
        ),
        "compiled (aot_eager)",
    ),
    # Writes into its input.
    "mutates input": (
        variant("    B, S, D = x.shape\n", "    B, S, D = x.shape\n    x.mul_(2.0)\n"),
        "wrote into its inputs",
    ),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_variants_fail(grade, name):
    src, expected = WRONG[name]
    r = grade("graph_breaks", src)
    assert r["status"] == "failed", (name, r["summary"])
    text = r["summary"] + " " + r.get("message", "")
    assert expected in text, (name, text)


def test_config_change_is_undone(grade):
    # capture_scalar_outputs would let .item() into the graph; the check runs
    # with Dynamo's defaults and says so.
    src = variant(
        "import torch\n",
        "import torch\nimport torch._dynamo\ntorch._dynamo.config.capture_scalar_outputs = True\n",
    )
    src = variant(
        "scores = scores / scores.std().clamp_min(1.0)",
        "scores = scores / max(scores.std().item(), 1.0)",
        src,
    )
    r = grade("graph_breaks", src)
    assert r["status"] == "failed"
    assert any("capture_scalar_outputs" in n for n in r["notes"])
    assert any(".item()" in c.get("detail", "") for c in r["cases"])


@pytest.mark.gpu
def test_gpu_times_eager_and_compile_modes(grade):
    r = grade("graph_breaks", REF, device="cuda", timeout=600)
    assert r["passed"], (r["summary"], r.get("message", "")[-3000:], r.get("cases"))
    assert any(c["name"].startswith("compiled (inductor)") for c in r["cases"])
    rows = r["timing"]["cases"]
    names = {row["name"] for row in rows}
    assert names == {
        "original step (eager)",
        "your step (eager)",
        "torch.compile default",
        "torch.compile reduce-overhead",
    }
    for shape in {row["shape"].split(" ")[0] for row in rows}:
        by = {row["name"]: row for row in rows if row["shape"].startswith(shape + " ")}
        # Fusion: the compiled step launches fewer kernels than the eager one.
        assert by["torch.compile default"]["kernels"] < by["your step (eager)"]["kernels"]
        assert all(row["ms"] > 0 and row["speedup"] > 0 for row in by.values())
    assert "reduce-overhead" in r["summary"]


def test_config_changed_inside_the_step_fails(grade):
    # Set while the step runs (during tracing too), not at import.
    src = variant(
        "    B, S, D = x.shape\n",
        "    B, S, D = x.shape\n"
        "    import torch._dynamo.config as _dc\n"
        "    _dc.capture_scalar_outputs = True\n",
    )
    src = variant(
        "scores = scores / scores.std().clamp_min(1.0)",
        "scores = scores / max(scores.std().item(), 1.0)",
        src,
    )
    r = grade("graph_breaks", src)
    assert r["status"] == "failed", r["summary"]
    assert "capture_scalar_outputs" in r["summary"], r["summary"]


def test_an_op_packet_is_graded_not_a_crash(grade):
    # torch.ops.aten.X (a packet, no overload) is honest torch code.
    anchor = "scores = scores / scores.std().clamp_min(1.0)"
    src = variant(anchor, anchor + "\n    scores = torch.ops.aten.add(scores, 0.0)")
    r = grade("graph_breaks", src)
    assert r["status"] in ("passed", "failed"), r["summary"]
    assert "opaque" not in r["summary"], r["summary"]


def test_a_custom_op_in_the_aten_namespace_is_opaque(grade):
    src = REF.replace(
        "def step(",
        """import torch.library as _lib
_L = _lib.Library("aten", "FRAGMENT")
_L.define("gpulab_step_cheat(Tensor x) -> Tensor")
_L.impl("gpulab_step_cheat", lambda x: x.clone(), "CompositeExplicitAutograd")
_L.impl("gpulab_step_cheat", lambda x: x.clone(), "Meta")


def step(""",
        1,
    )
    anchor = "scores = scores / scores.std().clamp_min(1.0)"
    src = variant(anchor, anchor + "\n    scores = torch.ops.aten.gpulab_step_cheat(scores)", src)
    r = grade("graph_breaks", src)
    assert r["status"] == "failed", r["summary"]
    assert "opaque" in r["summary"] and "gpulab_step_cheat" in r["summary"], r["summary"]


def test_the_outputs_are_judged_not_self_reported(grade):
    r = grade("graph_breaks", REF, shared=True)
    assert r["passed"] and r["verdict"] == "judge", r.get("verdict")
