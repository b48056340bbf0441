"""Grader for lesson 08: a two-layer MLP sharded over a 1-D JAX mesh.

Contract (exercises/sharded_mlp.py): `make_mesh()` returns a 1-D Mesh over
every device with the axis "devices"; `data_parallel(mesh)` and
`tensor_parallel(mesh)` return `jax.jit`-compiled forward passes of
`mlp(params, x)` with in/out shardings:

    data parallel     x P("devices", None), params replicated, y P("devices", None)
    tensor parallel   x replicated, w1 P(None, "devices"), b1 P("devices"),
                      w2 P("devices", None), b2 replicated, y replicated

Each is graded on fresh inputs (secret-seeded) against a float64 reference,
on the shardings the compiled step takes and returns, and on the compiled
program itself: data parallel may not communicate in the forward pass,
tensor parallel must all-reduce, and each device may do only its share of
the matmul FLOPs, so a step that gathers everything and computes the whole
MLP on every device fails. `tensor_parallel_shard_map(mesh)` is graded the
same way when the learner's file defines it (optional).

On the CPU the grader simulates 8 devices; on a GPU machine it uses every
GPU JAX sees (1 is fine: the shardings are still checked by name).
"""

from __future__ import annotations

import os
import re
from typing import Any

# JAX grabs 75% of GPU memory at start-up by default; a check needs little.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402 - without JAX the harness reports how to install it
import numpy as np  # noqa: E402

from gpulab.grading.learner import LearnerError, call  # noqa: E402

AXIS = "devices"
SIMULATED = 8
COLLECTIVE = re.compile(r"(\w+\[[\d,]*\])?\S* (all-reduce|all-gather|reduce-scatter|all-to-all|"
                        r"collective-permute)(?:-start)?\(")


def configure(ctx) -> list[str]:
    """Set JAX up before any backend starts; returns notes for the learner."""
    notes = []
    try:
        jax.config.update("jax_num_cpu_devices", SIMULATED)
    except (AttributeError, KeyError, ValueError, RuntimeError):
        # Older JAX: the XLA flag, read when the CPU backend starts.
        flag = f"--xla_force_host_platform_device_count={SIMULATED}"
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()
    if ctx.device == "cpu":
        jax.config.update("jax_platforms", "cpu")
    # fp32 matmuls in full fp32 (not TF32 on a GPU), so the tolerance can stay tight.
    jax.config.update("jax_default_matmul_precision", "highest")
    backend = jax.default_backend()
    n = jax.device_count()
    if ctx.device == "cuda" and backend != "gpu":
        notes.append("JAX sees no GPU here (a CPU-only jaxlib?): pip install -U 'jax[cuda12]'. "
                     f"Graded on {n} simulated CPU devices instead.")
    elif backend == "cpu":
        notes.append(f"Ran on {n} simulated CPU devices (JAX's host platform); the same "
                     "code runs unchanged on GPUs.")
    else:
        notes.append(f"Ran on {n} {backend.upper()} device(s): {jax.devices()[0].device_kind}.")
    if n == 1:
        notes.append("With one device nothing is split: the shardings are checked by name, "
                     "and the FLOP and collective checks wait for more devices.")
    return notes


# --- expected shardings -----------------------------------------------------------

EXPECTED = {
    "data parallel": {"x": (AXIS, None), "w1": (), "b1": (), "w2": (), "b2": (), "y": (AXIS, None)},
    "tensor parallel": {"x": (), "w1": (None, AXIS), "b1": (AXIS,), "w2": (AXIS, None), "b2": (),
                        "y": ()},
}
EXPECTED["tensor parallel (shard_map)"] = EXPECTED["tensor parallel"]


def _spec_tuple(spec: Any, ndim: int) -> tuple:
    parts = list(spec)[:ndim] + [None] * (ndim - len(spec))
    out = []
    for p in parts:
        if isinstance(p, (tuple, list)):
            p = tuple(p)
            p = None if not p else (p[0] if len(p) == 1 else p)
        out.append(p)
    return tuple(out)


def _show(spec: tuple) -> str:
    spec = list(spec)
    while spec and spec[-1] is None:
        spec.pop()
    return "P(" + ", ".join(repr(p) for p in spec) + ")"


def _sharding_problem(name: str, sharding: Any, want: tuple, ndim: int, mesh: Any) -> str:
    from jax.sharding import NamedSharding, PartitionSpec

    want = _spec_tuple(want, ndim)
    if isinstance(sharding, NamedSharding):
        got = _spec_tuple(sharding.spec, ndim)
        if got != want:
            return f"{name} is sharded {_show(got)}, expected {_show(want)}"
        if set(sharding.mesh.devices.flat) != set(mesh.devices.flat):
            return f"{name} lives on a mesh of other devices than the mesh you were given"
        return ""
    if mesh.devices.size > 1 and sharding is not None and sharding.is_equivalent_to(
            NamedSharding(mesh, PartitionSpec(*want)), ndim):
        return ""
    kind = type(sharding).__name__
    return (f"{name} has a {kind}, not NamedSharding(mesh, {_show(want)}): give jax.jit "
            "in_shardings/out_shardings")


# --- cases ----------------------------------------------------------------------------

def shapes(n: int) -> list[tuple[int, int, int, int]]:
    """(batch, d_in, hidden, d_out): batch and hidden split n ways, the rest deliberately not."""
    return [(n, 5, 2 * n, 3), (4 * n, 37, 16 * n, 19), (32 * n, 96, 64 * n, 48)]


def make_inputs(seed: int, b: int, d: int, h: int, o: int) -> tuple[dict, np.ndarray]:
    rng = np.random.default_rng(seed)
    f32 = np.float32
    params = {"w1": (rng.standard_normal((d, h)) / np.sqrt(d)).astype(f32),
              "b1": rng.standard_normal(h).astype(f32) * f32(0.1),
              "w2": (rng.standard_normal((h, o)) / np.sqrt(h)).astype(f32),
              "b2": rng.standard_normal(o).astype(f32) * f32(0.1)}
    return params, rng.standard_normal((b, d)).astype(f32)


def reference(params: dict, x: np.ndarray) -> np.ndarray:
    p = {k: v.astype(np.float64) for k, v in params.items()}
    return np.maximum(x.astype(np.float64) @ p["w1"] + p["b1"], 0) @ p["w2"] + p["b2"]


def _flops(compiled: Any) -> float | None:
    try:
        cost = compiled.cost_analysis()
    except Exception:  # noqa: BLE001 - not every backend reports costs
        return None
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else None
    return float(cost["flops"]) if isinstance(cost, dict) and "flops" in cost else None


def _values_problem(y: Any, want: np.ndarray, case: dict) -> str:
    if not isinstance(y, jax.Array):
        return f"returned {type(y).__name__}, expected a jax.Array"
    if tuple(y.shape) != want.shape:
        return f"returned shape {tuple(y.shape)}, expected {want.shape}"
    if y.dtype != np.float32:
        return f"returned dtype {y.dtype}, expected float32"
    got = np.asarray(y, dtype=np.float64)
    if not np.all(np.isfinite(got)):
        return "the output has NaN or inf"
    err = np.abs(got - want)
    case["max_abs"] = float(err.max())
    case["max_rel"] = float((err / np.maximum(np.abs(want), 1e-6)).max())
    tol = 1e-4 * (1 + np.abs(want))
    bad = err > tol
    if bad.any():
        idx = [tuple(int(i) for i in ix) for ix in np.argwhere(bad)[:3]]
        return (f"{int(bad.sum())} of {bad.size} outputs wrong (max abs err {err.max():.3g}); "
                f"first at {idx}")
    return ""


def check_step(ctx, mode: str, step: Any, mesh: Any, shape: tuple, data: tuple) -> dict:
    """One case: values, shardings in and out, and what the compiled step does."""
    b, d, h, o = shape
    n = mesh.devices.size
    params, x, expected = data
    name = f"{mode}: {b}×{d}→{h}→{o}"
    case = {"name": name, "passed": False, "shape": f"{b}×{d}→{h}→{o}", "dtype": "fp32"}
    try:
        compiled = call(lambda: step.lower(params, x).compile(), ctx.file)
        # The compiled executable is the step itself; calling it (rather than
        # `step`) saves compiling every case twice.
        y = call(compiled, ctx.file, params, x)
        jax.block_until_ready(y)
    except LearnerError as exc:
        case["detail"] = f"compiling or running it failed: {exc.summary}"
        return case
    problem = _values_problem(y, expected, case)
    want = EXPECTED[mode]
    if not problem:
        try:
            in_params, in_x = compiled.input_shardings[0]
        except (TypeError, ValueError):
            in_params, in_x = {}, None
        problem = _sharding_problem("x", in_x, want["x"], 2, mesh)
        for k in ("w1", "b1", "w2", "b2"):
            problem = problem or _sharding_problem(
                k, in_params.get(k) if isinstance(in_params, dict) else None,
                want[k], params[k].ndim, mesh)
        problem = problem or _sharding_problem("the output y", y.sharding, want["y"], 2, mesh)
    text = compiled.as_text() if not problem else ""
    found = COLLECTIVE.findall(text or "")
    if not problem and n > 1:
        ops = sorted({op for _, op in found})
        if mode == "data parallel" and ops:
            problem = (f"the step communicates ({', '.join(ops)}); data parallel needs no "
                       "communication in the forward pass: keep the batch split end to end")
        if mode != "data parallel" and not {"all-reduce", "reduce-scatter"} & set(ops):
            problem = ("no all-reduce in the compiled step: with the hidden dimension split, "
                       "each device holds a partial sum of y that must be added up")
    flops = _flops(compiled) if not problem and n > 1 and shape == shapes(n)[-1] else None
    if flops is not None:
        total = 2 * b * h * (d + o)
        share = total / n * 1.1 + 4 * b * (h + o)
        if flops > share:
            problem = (f"each device does {flops:.3g} FLOPs, about {flops / total:.0%} of the "
                       f"whole MLP's {total:.3g}; split over {n} devices its share is "
                       f"{total / n:.3g}: something gathers the work onto every device")
    case["passed"] = not problem
    case["detail"] = problem
    if not problem and n > 1 and mode != "data parallel":
        case["collectives"] = [f"{op} {shp}" for shp, op in found]
    return case


def _mesh_case(ctx, mesh: Any) -> str:
    from jax.sharding import Mesh

    devices = jax.devices()
    if not isinstance(mesh, Mesh):
        return f"make_mesh returned {type(mesh).__name__}, expected a jax.sharding.Mesh"
    if tuple(mesh.axis_names) != (AXIS,):
        return f"the mesh's axes are {tuple(mesh.axis_names)}, expected ('{AXIS}',)"
    if mesh.devices.shape != (len(devices),) or set(mesh.devices.flat) != set(devices):
        return (f"the mesh has shape {mesh.devices.shape} over {mesh.devices.size} devices; "
                f"expected all {len(devices)} devices in one row")
    return ""


def grade(ctx) -> None:
    ctx.notes.extend(configure(ctx))
    from jax.sharding import Mesh

    # Inputs and float64 answers exist before the learner's file is imported.
    n = jax.device_count()
    modes = ("data parallel", "tensor parallel", "tensor parallel (shard_map)")
    data = {}
    for i, mode in enumerate(modes):
        for j, shape in enumerate(shapes(n)):
            params, x = make_inputs(ctx.seed(10 * i + j + 1), *shape)
            data[mode, shape] = (params, x, reference(params, x))
    module = ctx.module()
    fns = {"make_mesh": ctx.function("make_mesh"),
           "data parallel": ctx.function("data_parallel"),
           "tensor parallel": ctx.function("tensor_parallel")}
    if callable(getattr(module, "tensor_parallel_shard_map", None)):
        fns["tensor parallel (shard_map)"] = module.tensor_parallel_shard_map
    try:
        mesh = call(fns.pop("make_mesh"), ctx.file)
        problem = _mesh_case(ctx, mesh)
    except LearnerError as exc:
        mesh, problem = None, exc.summary
    ctx.add_case({"name": f"make_mesh over {jax.device_count()} devices", "passed": not problem,
                  "detail": problem})
    if problem:
        mesh = Mesh(np.array(jax.devices()), (AXIS,))
        ctx.notes.append("make_mesh failed, so the steps below were given gpulab's own mesh.")
    for mode, fn in fns.items():
        try:
            step = call(fn, ctx.file, mesh)
        except LearnerError as exc:
            ctx.add_case({"name": mode, "passed": False, "detail": exc.summary})
            continue
        if not hasattr(step, "lower"):
            ctx.add_case({"name": mode, "passed": False, "detail":
                          f"returned {type(step).__name__}; return the jax.jit(...) step itself "
                          "(with in_shardings and out_shardings)"})
            continue
        for j, shape in enumerate(shapes(n)):
            case = check_step(ctx, mode, step, mesh, shape, data[mode, shape])
            notes = case.pop("collectives", None)
            ctx.add_case(case)
            if notes and j == len(shapes(n)) - 1:
                ctx.notes.append(f"{mode}, {case['shape']}: per call "
                                 + ", ".join(notes) + " (per-device shapes)")
