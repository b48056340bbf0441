"""The compile_once grader (lesson 06): one graph for a stream of requests.

The reference, the starter and one cheat go through real child processes
(the judge and the sandbox). The other variants run the same grader and the
same sandbox handler in this process (tests/inprocess.py: no process
boundary, nothing else left out), so each costs a compile, not two
interpreters."""

from __future__ import annotations

import pytest

from tests.conftest import reference_source, starter_source

REF = reference_source("compile_once")
STARTER = starter_source("compile_once")


# The reference's compile and its wrapper, from the compile to the return:
# the honest variants replace this block.
REF_RUN = REF[REF.index("    compiled = torch.compile(step") : REF.index("    return run\n")]


def variant(old: str, new: str, src: str = REF) -> str:
    assert old in src, f"variant anchor not found: {old!r}"
    return src.replace(old, new, 1)


def line_of(src: str, text: str) -> int:
    return next(i for i, ln in enumerate(src.splitlines(), 1) if text in ln)


@pytest.fixture
def grade_here(tmp_path):
    """Grade source text with the real grader, the sandbox's handler in-process."""
    import torch

    from tests.inprocess import grade_here as _in_process

    threads = torch.get_num_threads()

    def _grade(src: str) -> dict:
        path = tmp_path / f"compile_once_{abs(hash(src)) % 10**8}.py"
        path.write_text(src)
        return _in_process("compile_once", "compile_step", path)

    yield _grade
    torch.compiler.set_stance("default")  # a variant may have changed it
    torch._dynamo.reset()
    torch.set_num_threads(threads)


# --- through the real check path -------------------------------------------------------------


def test_starter_fails_with_each_recompile_named(grade):
    r = grade("compile_once", STARTER, shared=True)
    assert r["status"] == "failed", r["summary"]
    # The outputs are right (the starter is the original); the recompiles fail it.
    outputs = [c for c in r["cases"] if c["name"].startswith("request ")]
    assert len(outputs) == 8 and all(c["passed"] for c in outputs)
    recompiles = [c for c in r["cases"] if c["name"].startswith("recompile ")]
    assert len(recompiles) == 7, [c["name"] for c in r["cases"]]
    # The second request has the first request's shape: only the list's
    # values changed, and Dynamo's guard on them is named at its line.
    first = recompiles[0]
    assert "request 1 (4×16)" in first["name"] and "lengths[" in first["detail"], first
    assert first["line"] == line_of(STARTER, "lens = torch.tensor(lengths"), first
    assert any("size mismatch" in c["detail"] for c in recompiles[1:])
    assert "8 graphs for 8 requests" in str(r["cases"])


# --- the same grader, the sandbox's handler in this process ------------------------------------


def test_reference_passes(grade_here):
    # (`gpulab dev check` also grades it through the real check path.)
    r = grade_here(REF)
    assert r["status"] == "passed", (r["summary"], r.get("message", "")[-2000:])
    names = [c["name"] for c in r["cases"]]
    assert sum(n.startswith("request ") for n in names) == 8
    assert "compiled once" in names and "every request ran the graph" in names
    assert r["timing"] is None


def test_eager_after_the_first_recompile_fails(grade_here):
    # set_stance("eager_on_recompile") once the first graph exists: every
    # request that would recompile runs eagerly instead. Caught by counting
    # graph calls. (Set before the first call, torch 2.13 compiles nothing.)
    src = variant(
        "    return torch.compile(step, backend=backend)\n",
        "    compiled = torch.compile(step, backend=backend)\n\n"
        "    def run(*args):\n"
        "        out = compiled(*args)\n"
        '        torch.compiler.set_stance("eager_on_recompile")\n'
        "        return out\n\n"
        "    return run\n",
        STARTER,
    )
    r = grade_here(src)
    assert r["status"] == "failed", r["summary"]
    assert "did not run the compiled graph exactly once" in r["summary"], r["summary"]


HONEST = {
    # mark_dynamic on the dimensions that vary; temperature as a 0-d tensor.
    "mark_dynamic": variant(
        REF_RUN,
        "    compiled = torch.compile(step, backend=backend)\n\n"
        "    def run(x, lengths, temperature):\n"
        "        lengths = torch.tensor(lengths, device=x.device)\n"
        "        temperature = torch.tensor(temperature, device=x.device)\n"
        "        torch._dynamo.mark_dynamic(x, 0, min=2, max=8)\n"
        "        torch._dynamo.mark_dynamic(x, 1, min=2, max=64)\n"
        "        torch._dynamo.mark_dynamic(lengths, 0)\n"
        "        return compiled(x, lengths, temperature)\n",
    ),
    # Static shapes: every request padded to the largest (8×64) and sliced back.
    "padded to one shape": variant(
        REF_RUN,
        "    compiled = torch.compile(step, backend=backend, dynamic=False, fullgraph=True)\n\n"
        "    def run(x, lengths, temperature):\n"
        "        B, S, D = x.shape\n"
        "        xp = x.new_zeros(8, 64, D)\n"
        "        xp[:B, :S] = x\n"
        "        lp = torch.zeros(8, dtype=torch.long, device=x.device)\n"
        "        lp[:B] = torch.tensor(lengths, device=x.device)\n"
        "        t = torch.full((), temperature, device=x.device)\n"
        "        return compiled(xp, lp, t)[:B, :S]\n",
    ),
    # A module with the bias precomputed and sliced; the module compiled
    # with dynamic=True and the float left a Python float. The buffer is
    # longer than any S: sliced to exactly its length, Dynamo's guard
    # `x.size()[1] != 64` fails at S = 64 (a real recompile).
    "module with a sliced buffer": """
import math

import torch

S_MAX = 128


class Readout(torch.nn.Module):
    def __init__(self, slope=0.125):
        super().__init__()
        pos = torch.arange(S_MAX, dtype=torch.float32)
        self.register_buffer("bias", -slope * (pos[None, :] - pos[:, None]).abs())

    def forward(self, x, lengths, temperature):
        B, S, D = x.shape
        valid = torch.arange(S, device=x.device).unsqueeze(0) < lengths.unsqueeze(1)
        scores = torch.bmm(x, x.transpose(1, 2)) / (temperature * math.sqrt(D))
        scores = scores + self.bias[:S, :S]
        scores = torch.where(valid[:, None, :], scores, float("-inf"))
        return torch.einsum("bqk,bkd->bqd", scores.softmax(-1), x) * valid.unsqueeze(-1)


def compile_step(backend):
    model = None

    def run(x, lengths, temperature):
        nonlocal model
        if model is None:
            model = torch.compile(Readout().to(x.device), backend=backend, dynamic=True)
        return model(x, torch.as_tensor(lengths, device=x.device), temperature)

    return run
""",
    # Automatic dynamic shapes left to work, but the first request's sizes
    # marked dynamic so no second trace is needed; a helper does the bias.
    "helpers and maybe_mark_dynamic": variant(
        REF_RUN,
        "    compiled = torch.compile(step, backend=backend)\n\n"
        "    def run(x, lengths, temperature):\n"
        "        for dim in (0, 1):\n"
        "            torch._dynamo.maybe_mark_dynamic(x, dim)\n"
        "        as_tensor = lambda v, **kw: torch.tensor(v, device=x.device, **kw)\n"
        "        lengths = as_tensor(lengths)\n"
        "        torch._dynamo.maybe_mark_dynamic(lengths, 0)\n"
        "        return compiled(x, lengths, as_tensor(temperature, dtype=torch.float32))\n",
    ),
}


@pytest.mark.parametrize("name", list(HONEST))
def test_honest_variants_pass(grade_here, name):
    r = grade_here(HONEST[name])
    assert r["status"] == "passed", (name, r["summary"], r.get("message", "")[-2000:])


WRONG = {
    # dynamic=True alone: the list's length and the bias cache still pin B and S.
    "dynamic=True only": (
        variant(
            "torch.compile(step, backend=backend)",
            "torch.compile(step, backend=backend, dynamic=True)",
            STARTER,
        ),
        "guard failed",
    ),
    # No compile at all: nothing to count.
    "eager": (
        variant("    return torch.compile(step, backend=backend)\n", "    return step\n", STARTER),
        "no graph was compiled with the check's backend",
    ),
    # Its own backend instead of the check's.
    "own backend": (
        variant(
            "torch.compile(step, backend=backend, dynamic=True)",
            'torch.compile(step, backend="eager", dynamic=True)',
        ),
        "no graph was compiled with the check's backend",
    ),
    # The first request compiled, every later one run eagerly.
    "compiled once, then eager": (
        variant(
            "    def run(x, lengths, temperature):\n",
            "    seen = []\n\n    def run(x, lengths, temperature):\n"
            "        if seen:\n"
            "            return step(x, torch.tensor(lengths, device=x.device), temperature)\n"
            "        seen.append(1)\n",
        ),
        "did not run the compiled graph exactly once",
    ),
    # A print in the step: a graph break, two graphs from the first request.
    "graph break": (
        variant("    B, S, D = x.shape\n", "    B, S, D = x.shape\n    print('batch', B)\n"),
        "graph break at request 0",
    ),
    # The padded rows no longer zeroed: the output changes.
    "output changed": (
        variant("    return out * valid[..., None]\n", "    return out\n"),
        "output differs from the original step",
    ),
    # Scales x in place and undoes it in the arithmetic: right output, x changed.
    "mutates input": (
        variant(
            "    def run(x, lengths, temperature):\n",
            "    def run(x, lengths, temperature):\n        x.mul_(2.0)\n        x = x / 2\n",
        ),
        "wrote into its inputs",
    ),
    # recompile_limit lowered while the stream runs (Dynamo would give up and
    # run the step eagerly after one graph).
    "config changed": (
        variant(
            "    compiled = torch.compile(",
            "    torch._dynamo.config.recompile_limit = 1\n    compiled = torch.compile(",
        ),
        "changes torch._dynamo.config while it runs",
    ),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_variants_fail(grade_here, name):
    src, expected = WRONG[name]
    r = grade_here(src)
    assert r["status"] == "failed", (name, r["summary"])
    text = r["summary"] + " " + r.get("message", "") + " " + str(r["cases"])
    assert expected in text, (name, text[:3000])


def test_config_at_import_is_undone_and_named(grade_here):
    # Dynamic shapes by config instead of by argument: undone, so the step is
    # traced static and recompiles on the first new size.
    src = variant("backend=backend, dynamic=True)", "backend=backend)")
    src = variant(
        "import torch\n",
        "import torch\n\ntorch._dynamo.config.assume_static_by_default = False\n",
        src,
    )
    r = grade_here(src)
    assert r["status"] == "failed", r["summary"]
    assert any("assume_static_by_default" in n for n in r["notes"]), r["notes"]
    # Static: the first new size recompiles (the reference hands the list
    # and the float over as tensors, so request 1, the same shape, does not).
    assert "recompile 1 at request 2 (2×16)" in r["summary"], r["summary"]
    assert "size mismatch" in r["summary"], r["summary"]


def test_a_failing_request_is_the_learners_error(grade_here):
    src = variant(
        "    B, S, D = x.shape\n", "    B, S, D = x.shape\n    assert S < 40, 'too long'\n"
    )
    r = grade_here(src)
    assert r["status"] == "failed" and "request 3 failed" in r["summary"], r["summary"]
    assert "too long" in r["summary"] + r.get("message", "")


def test_compile_step_returning_no_callable_fails(grade_here):
    src = variant("    return run\n", "    return None\n")
    r = grade_here(src)
    assert r["status"] == "failed" and "not a callable" in r["summary"], r["summary"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["reference", "mark_dynamic"])
def test_gpu_compiles_once_with_inductor(grade, name):
    # On a GPU the check's backend is Inductor, which could add guards of its own.
    r = grade(
        "compile_once", REF if name == "reference" else HONEST[name], device="cuda", timeout=600
    )
    assert r["passed"], (name, r["summary"], r.get("message", "")[-3000:])
