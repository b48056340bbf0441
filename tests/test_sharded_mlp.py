"""Lesson 08's grader end to end, in real child processes: on the CPU with 8
simulated devices (and on a GPU under the gpu mark). The reference passes,
the starter fails, wrong shardings and cheats fail for the stated reason, and
without JAX the check says how to install it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO, reference_source, starter_source

needs_jax = pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax")
REF = reference_source("sharded_mlp")


def variant(old: str, new: str, src: str = REF) -> str:
    assert old in src, f"variant anchor not found: {old!r}"
    return src.replace(old, new)


def failures(r: dict) -> dict[str, str]:
    return {c["name"]: c.get("detail", "") for c in r["cases"] if not c["passed"]}


@needs_jax
def test_reference_passes(grade):
    r = grade("sharded_mlp", REF)
    assert r["passed"], (r["summary"], failures(r), r.get("output"))
    names = [c["name"] for c in r["cases"]]
    assert names[0] == "make_mesh over 8 devices"
    # 3 shapes each: data parallel, tensor parallel, and the optional shard_map step.
    assert sum(n.startswith("data parallel:") for n in names) == 3
    assert sum(n.startswith("tensor parallel (shard_map):") for n in names) == 3
    assert any("8 simulated CPU devices" in n for n in r["notes"])
    assert any("all-reduce" in n for n in r["notes"]), r["notes"]


@needs_jax
def test_starter_fails(grade):
    r = grade("sharded_mlp", starter_source("sharded_mlp"))
    assert r["status"] == "failed", r["summary"]
    bad = failures(r)
    assert "Mesh" in bad["make_mesh over 8 devices"]
    # The starter's unsharded jit computes the right values on one device:
    # it fails on its shardings, for every case.
    assert len(bad) == len(r["cases"])
    assert all("SingleDeviceSharding" in d for n, d in bad.items() if n != "make_mesh over 8 devices")


# One learner file carrying three different mistakes, one per graded function,
# so a single child run checks all three.
WRONG_SPECS = variant(
    'replicated = NamedSharding(mesh, P())  # a whole copy on every device',
    'replicated = {"w1": NamedSharding(mesh, P(None, AXIS)), "b1": NamedSharding(mesh, P(AXIS)),'
    ' "w2": NamedSharding(mesh, P()), "b2": NamedSharding(mesh, P())}',
).replace(
    "return jax.jit(mlp, in_shardings=ins, out_shardings=out)",
    "return jax.jit(mlp, in_shardings=ins, out_shardings=NamedSharding(mesh, P(AXIS)))",
).replace(
    "return jax.lax.psum(partial_y, AXIS) + params[\"b2\"]",
    "return jax.lax.psum(partial_y, AXIS)",  # forgets b2: wrong values
)

CHEATS = variant(
    "return Mesh(np.array(jax.devices()), (AXIS,))",
    "return Mesh(np.array(jax.devices()[:4]), (AXIS,))",  # half the devices
).replace(
    "    return jax.jit(mlp, in_shardings=(replicated, rows), out_shardings=rows)",
    # Right shardings at the edges, but the batch is gathered inside: every
    # device computes the whole MLP.
    "    def gathered(params, x):\n"
    "        x = jax.lax.with_sharding_constraint(x, replicated)\n"
    "        y = jax.lax.with_sharding_constraint(mlp(params, x), replicated)\n"
    "        return y\n"
    "    return jax.jit(gathered, in_shardings=(replicated, rows), out_shardings=rows)",
).replace(
    "    ins, out = _tensor_parallel_shardings(mesh)\n"
    "    return jax.jit(mlp, in_shardings=ins, out_shardings=out)",
    # Right shardings at the edges, but the weights are gathered inside and
    # the whole MLP runs on every device (no all-reduce, all the FLOPs).
    "    ins, out = _tensor_parallel_shardings(mesh)\n"
    "    rep = NamedSharding(mesh, P())\n"
    "    def gathered(params, x):\n"
    "        params = {k: jax.lax.with_sharding_constraint(v, rep) for k, v in params.items()}\n"
    "        return mlp(params, x)\n"
    "    return jax.jit(gathered, in_shardings=ins, out_shardings=out)",
).replace(
    "    return jax.jit(fn, in_shardings=ins, out_shardings=out)",
    "    jitted = jax.jit(fn, in_shardings=ins, out_shardings=out)\n"
    "    return lambda params, x: jitted(params, x)",  # not the jitted step itself
)


@needs_jax
def test_wrong_shardings_fail(grade):
    r = grade("sharded_mlp", WRONG_SPECS)
    assert r["status"] == "failed"
    bad = failures(r)
    assert "make_mesh over 8 devices" not in bad
    dp = [d for n, d in bad.items() if n.startswith("data parallel:")]
    tp = [d for n, d in bad.items() if n.startswith("tensor parallel:")]
    sm = [d for n, d in bad.items() if n.startswith("tensor parallel (shard_map):")]
    assert len(dp) == len(tp) == len(sm) == 3, bad
    assert all("w1 is sharded P(None, 'devices'), expected P()" in d for d in dp), dp
    assert all("the output y is sharded P('devices'), expected P()" in d for d in tp), tp
    assert all("outputs wrong" in d for d in sm), sm


@needs_jax
def test_unsharded_compute_fails(grade):
    r = grade("sharded_mlp", CHEATS)
    assert r["status"] == "failed"
    bad = failures(r)
    assert "expected all 8 devices" in bad["make_mesh over 8 devices"]
    dp = [d for n, d in bad.items() if n.startswith("data parallel:")]
    tp = [d for n, d in bad.items() if n.startswith("tensor parallel:")]
    assert dp and all("communicates" in d for d in dp), dp
    assert tp and all("no all-reduce" in d or "share" in d for d in tp), tp
    assert "return the jax.jit(...) step itself" in bad["tensor parallel (shard_map)"]


def test_without_jax_the_check_says_how_to_install(tmp_path, course, monkeypatch):
    """A `jax` that cannot be imported (as on a machine without it): the grader
    reports how to install it instead of crashing, and gpulab still works."""
    from gpulab.runner import run_check

    fake = tmp_path / "nojax" / "jax"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'jax'\", name='jax')\n")
    monkeypatch.setenv("PYTHONPATH", f"{fake.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    r = run_check(course.find("sharded_mlp"), REPO / "kernels" / "sharded_mlp.py",
                  device="cpu", timeout=120)
    assert r["status"] == "error"
    assert "jax" in r["summary"] and "pip install" in r["summary"], r["summary"]
    env = dict(os.environ, PYTHONPATH=f"{fake.parent}{os.pathsep}{REPO}",
               GPULAB_HOME=str(tmp_path / "ws"))
    out = subprocess.run([sys.executable, "-m", "gpulab", "list", "--json"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert any(row["exercise"] == "sharded_mlp" for row in json.loads(out.stdout)["lessons"])


@needs_jax
@pytest.mark.gpu
def test_reference_passes_on_gpu(grade):
    r = grade("sharded_mlp", REF, device="cuda", timeout=300)
    assert r["passed"], (r["summary"], failures(r), r.get("output"))
    assert not any("simulated CPU" in n for n in r["notes"]), r["notes"]


@needs_jax
@pytest.mark.gpu
def test_starter_fails_on_gpu(grade):
    r = grade("sharded_mlp", starter_source("sharded_mlp"), device="cuda", timeout=300)
    assert r["status"] == "failed", r["summary"]
