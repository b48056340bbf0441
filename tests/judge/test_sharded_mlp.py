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

from tests.conftest import CPU_CHECK_TIMEOUT, REPO, reference_source, starter_source

needs_jax = pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax")
REF = reference_source("sharded_mlp")


def variant(old: str, new: str, src: str = REF) -> str:
    assert old in src, f"variant anchor not found: {old!r}"
    return src.replace(old, new)


def failures(r: dict) -> dict[str, str]:
    return {c["name"]: c.get("detail", "") for c in r["cases"] if not c["passed"]}


@needs_jax
def test_reference_passes(grade):
    r = grade("sharded_mlp", REF, shared=True)
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
    r = grade("sharded_mlp", starter_source("sharded_mlp"), shared=True)
    assert r["status"] == "failed", r["summary"]
    bad = failures(r)
    assert "Mesh" in bad["make_mesh over 8 devices"]
    # The starter's unsharded jit computes the right values on one device:
    # it fails on its shardings, for every case.
    assert len(bad) == len(r["cases"])
    assert all(
        "SingleDeviceSharding" in d for n, d in bad.items() if n != "make_mesh over 8 devices"
    )


# Honest spellings of the same steps: each must pass.
HONEST = {
    # JAX 0.7+ makes the axes of jax.make_mesh's mesh Explicit; gpulab's mesh
    # is Auto. The judge once refused to put the program's shardings on its
    # own mesh ("does not match the mesh used for export"), and shard_map's
    # step could not be exported with unplaced arguments.
    "jax.make_mesh": variant(
        "return Mesh(np.array(jax.devices()), (AXIS,))",
        "return jax.make_mesh((len(jax.devices()),), (AXIS,))",
    ),
    # A list of devices, a keyword, and one sharding per parameter.
    "other spellings": variant(
        "    return jax.jit(mlp, in_shardings=(replicated, rows), out_shardings=rows)",
        '    params = {k: replicated for k in ("w1", "b1", "w2", "b2")}\n'
        "    return jax.jit(mlp, in_shardings=(params, rows), out_shardings=rows)",
        variant(
            "return Mesh(np.array(jax.devices()), (AXIS,))",
            "return Mesh(jax.devices(), axis_names=(AXIS,))",
        ),
    ),
}


@needs_jax
@pytest.mark.parametrize("name", list(HONEST))
def test_honest_variants_pass(grade, name):
    r = grade("sharded_mlp", HONEST[name])
    assert r["passed"], (name, r["summary"], failures(r))
    assert sum(c["name"].startswith("tensor parallel (shard_map):") for c in r["cases"]) == 3


# One learner file carrying three different mistakes, one per graded function,
# so a single child run checks all three.
WRONG_SPECS = (
    variant(
        "replicated = NamedSharding(mesh, P())  # a whole copy on every device",
        'replicated = {"w1": NamedSharding(mesh, P(None, AXIS)), "b1": NamedSharding(mesh, P(AXIS)),'
        ' "w2": NamedSharding(mesh, P()), "b2": NamedSharding(mesh, P())}',
    )
    .replace(
        "return jax.jit(mlp, in_shardings=ins, out_shardings=out)",
        "return jax.jit(mlp, in_shardings=ins, out_shardings=NamedSharding(mesh, P(AXIS)))",
    )
    .replace(
        'return jax.lax.psum(partial_y, AXIS) + params["b2"]',
        "return jax.lax.psum(partial_y, AXIS)",  # forgets b2: wrong values
    )
)

CHEATS = (
    variant(
        "return Mesh(np.array(jax.devices()), (AXIS,))",
        "return Mesh(np.array(jax.devices()[:4]), (AXIS,))",  # half the devices
    )
    .replace(
        "    return jax.jit(mlp, in_shardings=(replicated, rows), out_shardings=rows)",
        # Right shardings at the edges, but the batch is gathered inside: every
        # device computes the whole MLP.
        "    def gathered(params, x):\n"
        "        x = jax.lax.with_sharding_constraint(x, replicated)\n"
        "        y = jax.lax.with_sharding_constraint(mlp(params, x), replicated)\n"
        "        return y\n"
        "    return jax.jit(gathered, in_shardings=(replicated, rows), out_shardings=rows)",
    )
    .replace(
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
    )
    .replace(
        "    return jax.jit(fn, in_shardings=ins, out_shardings=out)",
        "    jitted = jax.jit(fn, in_shardings=ins, out_shardings=out)\n"
        "    return lambda params, x: jitted(params, x)",  # not the jitted step itself
    )
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
    from gpulab.lab.runner import run_check

    fake = tmp_path / "nojax" / "jax"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'jax'\", name='jax')\n"
    )
    monkeypatch.setenv("PYTHONPATH", f"{fake.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    r = run_check(
        course.find("sharded_mlp"),
        REPO / "kernels" / "sharded_mlp.py",
        device="cpu",
        timeout=CPU_CHECK_TIMEOUT,
    ).to_json()
    assert r["status"] == "error"
    assert "jax" in r["summary"] and "pip install" in r["summary"], r["summary"]
    env = dict(
        os.environ, PYTHONPATH=f"{fake.parent}{os.pathsep}{REPO}", GPULAB_HOME=str(tmp_path / "ws")
    )
    out = subprocess.run(
        [sys.executable, "-m", "gpulab", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    # sharded_mlp is lesson 08's step 1 (choose_specs is the lesson's exercise).
    listed = [e["exercise"] for row in json.loads(out.stdout)["lessons"] for e in row["exercises"]]
    assert "sharded_mlp" in listed and "choose_specs" in listed, listed


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


# --- cheats against the judge (issue 16) ------------------------------------------


@needs_jax
def test_the_judge_runs_the_learners_program_itself(grade):
    r = grade("sharded_mlp", REF, shared=True)
    assert r["passed"] and r["verdict"] == "judge", r["summary"]


FAKE_STEP = (
    REF
    + '''

class _Compiled:
    """Duck-typed: the right shardings and zero FLOPs, on any inputs."""
    def __init__(self, mesh, spec_x, spec_y):
        self.mesh, self.sx, self.sy = mesh, spec_x, spec_y
    def lower(self, *a):
        return self
    def compile(self):
        return self
    def cost_analysis(self):
        return {"flops": 0.0}
    def as_text(self):
        return "all-reduce("

def data_parallel(mesh):
    return _Compiled(mesh, P(AXIS, None), P(AXIS, None))
'''
)

CALLBACK_STEP = variant(
    "    return jax.jit(mlp, in_shardings=ins, out_shardings=out)",
    # The maths in numpy on the host, through a callback inside the jitted step.
    "    def host(params, x):\n"
    "        y = np.maximum(x @ params['w1'] + params['b1'], 0) @ params['w2'] + params['b2']\n"
    "        return np.asarray(y, np.float32)\n"
    "    def step(params, x):\n"
    "        shape = jax.ShapeDtypeStruct((x.shape[0], params['w2'].shape[1]), np.float32)\n"
    "        return jax.pure_callback(host, shape, params, x)\n"
    "    return jax.jit(step, in_shardings=ins, out_shardings=out)",
)

# The sandbox's reply forged: the learner's file replaces the request handler
# and sends a program of its own, then garbage.
FORGED_REPLY = (
    REF
    + """

import gpulab.sandbox.main as _main
import gpulab.sandbox.jax_export as _jx

class _Frame:  # any JSON the file likes, sent as the reply
    def __init__(self, frame):
        self.frame = frame

    def to_json(self):
        return self.frame

def _forged(self, msg):
    reply = _jx.export_request(self, msg).to_json()
    for mode, step in reply["steps"].items():
        if mode == "data parallel":  # a program that returns zeros
            import base64
            from jax import export as _export
            zero = jax.jit(lambda p, x: jnp_zeros(x, p), in_shardings=(
                NamedSharding(self_mesh(), P()), NamedSharding(self_mesh(), P(AXIS, None))),
                out_shardings=NamedSharding(self_mesh(), P(AXIS, None)))
            step["programs"] = [{"program": base64.b64encode(bytes(_export.export(zero)(
                *_specs(s)).serialize())).decode()} for s in msg.shapes]
        else:
            step["programs"] = [{"program": "not base64 at all!"} for _ in msg.shapes]
    return _Frame(reply)

def jnp_zeros(x, p):
    return (x @ p["w1"] @ p["w2"]) * 0.0

def self_mesh():
    return make_mesh()

def _specs(s):
    b, d, h, o = s
    f = np.float32
    S = jax.ShapeDtypeStruct
    return ({"w1": S((d, h), f), "b1": S((h,), f), "w2": S((h, o), f), "b2": S((o,), f)},
            S((b, d), f))

# The sandbox answers from its table of routes (ROUTES): the forgery goes there.
_kind = next(k for k, r in _main.ROUTES.items() if r.answer is _main.Server.on_jax_export)
_main.ROUTES[_kind] = _main.Route(_main.ROUTES[_kind].read, _forged)
"""
)


@needs_jax
def test_a_fake_compiled_step_fails(grade):
    r = grade("sharded_mlp", FAKE_STEP)
    assert r["status"] == "failed"
    bad = failures(r)
    dp = [d for n, d in bad.items() if n.startswith("data parallel")]
    assert dp and all("export" in d or "jax.jit" in d for d in dp), dp


@needs_jax
def test_a_host_callback_is_refused(grade):
    # JAX will not serialize a host callback at all; the judge's own rule
    # against custom calls is tested below, on a program that has one.
    r = grade("sharded_mlp", CALLBACK_STEP)
    assert r["status"] == "failed"
    tp = [d for n, d in failures(r).items() if n.startswith("tensor parallel:")]
    assert tp and all("custom call" in d or "callback" in d or "export" in d for d in tp), tp


@needs_jax
def test_a_forged_reply_is_judged_on_the_programs_it_carries(grade):
    r = grade("sharded_mlp", FORGED_REPLY)
    assert r["status"] == "failed"
    bad = failures(r)
    dp = [d for n, d in bad.items() if n.startswith("data parallel:")]
    tp = [d for n, d in bad.items() if n.startswith("tensor parallel:")]
    assert len(dp) == 3 and all("outputs wrong" in d for d in dp), dp
    assert len(tp) == 3 and all("cannot read" in d for d in tp), tp


@needs_jax
def test_the_judge_refuses_a_program_with_a_custom_call():
    import base64

    import jax
    import numpy as np
    from jax import export

    from gpulab.judge.graders.sharded_mlp import read_program

    ffi = getattr(jax, "ffi", None) or __import__("jax.extend.ffi").extend.ffi

    def step(x):
        return ffi.ffi_call("gpulab_not_jax", jax.ShapeDtypeStruct(x.shape, np.float32))(x)

    exported = export.export(
        jax.jit(step), disabled_checks=[export.DisabledSafetyCheck.custom_call("gpulab_not_jax")]
    )(jax.ShapeDtypeStruct((4,), np.float32))
    program, why = read_program(base64.b64encode(bytes(exported.serialize())).decode())
    assert program is None and "custom call gpulab_not_jax" in why, why
    assert read_program("not base64!")[1] == "the sandbox sent a program gpulab cannot read"
