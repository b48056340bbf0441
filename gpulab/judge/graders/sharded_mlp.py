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

The learner's code runs in the sandbox, which exports each step as a
program (`jax.export`, shapes only: gpulab.sandbox.jax_export). This grader,
in the judge, compiles and runs those programs on its own inputs: the
values, shardings, collectives and FLOPs are all read here, from the
program, never from a report of the learner's process. A program may use no
custom call but the sharding markers JAX itself writes (a Python callback
would run the learner's code, which does not exist here).

On the CPU the grader simulates 8 devices; on a GPU machine it uses every
GPU JAX sees (1 is fine: the shardings are still checked by name).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict

import jax  # without JAX, the harness reports how to install it
import numpy as np

from gpulab.judge.case_row import CaseFields, case_row
from gpulab.sandbox.jax_export import AXIS, EXPECTED, OPTIONAL, configure
from gpulab.wire.benches import Exported, ExportRequest
from gpulab.wire.replies import Raised
from gpulab.wire.status import StageKind

if TYPE_CHECKING:
    from gpulab.judge.context import GradeContext
    from gpulab.wire.result import CaseRow

# A layer's weights and biases by name (w1, b1, w2, b2), float32.
Params = dict[str, np.ndarray]


class Shardings(TypedDict, total=False):
    """The learner's program's sharding of each input and of y, by name: a
    JAX sharding, or None where the program names none (or none is read)."""

    w1: object
    b1: object
    w2: object
    b2: object
    x: object
    y: object


# A partition spec as a plain tuple: a mesh axis's name (or a tuple of them) a dimension.
SpecTuple = tuple[Any, ...]

COLLECTIVE = re.compile(
    r"(\w+\[[\d,]*\])?\S* (all-reduce|all-gather|reduce-scatter|all-to-all|"
    r"collective-permute)(?:-start)?\("
)
# The custom calls JAX writes itself for shardings and shard_map (JAX 0.6's
# text form; newer JAX writes Shardy ops instead). Anything else (a Python
# callback above all) is refused.
SAFE_CUSTOM_CALLS = {
    "Sharding",
    "SPMDFullToShardShape",
    "SPMDShardToFullShape",
    "annotate_device_placement",
}
CUSTOM_CALL = re.compile(r"custom_call\s*@([\w.$-]+)|call_target_name\s*=\s*\"([^\"]*)\"")


def notes_for(device: str) -> list[str]:
    """What the learner should know about the devices the check ran on."""
    notes = []
    backend = jax.default_backend()
    n = jax.device_count()
    if device == "cuda" and backend != "gpu":
        notes.append(
            "JAX sees no GPU here (a CPU-only jaxlib?): pip install -U 'jax[cuda12]'. "
            f"Graded on {n} simulated CPU devices instead."
        )
    elif backend == "cpu":
        notes.append(
            f"Ran on {n} simulated CPU devices (JAX's host platform); the same "
            "code runs unchanged on GPUs."
        )
    else:
        notes.append(f"Ran on {n} {backend.upper()} device(s): {jax.devices()[0].device_kind}.")
    if n == 1:
        notes.append(
            "With one device nothing is split: the shardings are checked by name, "
            "and the FLOP and collective checks wait for more devices."
        )
    return notes


def _spec_tuple(spec: Any, ndim: int) -> SpecTuple:
    parts = list(spec)[:ndim] + [None] * (ndim - len(spec))
    out = []
    for p in parts:
        if isinstance(p, (tuple, list)):
            p = tuple(p)
            p = None if not p else (p[0] if len(p) == 1 else p)
        out.append(p)
    return tuple(out)


def _show(spec: SpecTuple) -> str:
    parts = list(spec)
    while parts and parts[-1] is None:
        parts.pop()
    return "P(" + ", ".join(repr(p) for p in parts) + ")"


def _partition_spec(*parts: Any) -> Any:
    from jax.sharding import PartitionSpec

    make: Callable[..., Any] = PartitionSpec  # its __init__ is unannotated in some JAX
    return make(*parts)


def _sharding_problem(name: str, sharding: Any, want: SpecTuple, ndim: int, mesh: Any) -> str:
    from jax.sharding import NamedSharding

    want = _spec_tuple(want, ndim)
    if sharding is None:
        return (
            f"{name} has no sharding of its own (a SingleDeviceSharding), not "
            f"NamedSharding(mesh, {_show(want)}): give jax.jit in_shardings/out_shardings"
        )
    if isinstance(sharding, NamedSharding):
        got = _spec_tuple(sharding.spec, ndim)
        if mesh.devices.size == 1 and not any(got):
            return ""  # one device: a split and a copy are the same program
        if got != want:
            return f"{name} is sharded {_show(got)}, expected {_show(want)}"
        if set(sharding.mesh.devices.flat) != set(mesh.devices.flat):
            return f"{name} lives on a mesh of other devices than the mesh you were given"
        return ""
    if (
        mesh.devices.size > 1
        and sharding is not None
        and sharding.is_equivalent_to(NamedSharding(mesh, _partition_spec(*want)), ndim)
    ):
        return ""
    kind = type(sharding).__name__
    return (
        f"{name} has a {kind}, not NamedSharding(mesh, {_show(want)}): give jax.jit "
        "in_shardings/out_shardings"
    )


# --- cases ----------------------------------------------------------------------------


def shapes(n: int) -> list[tuple[int, int, int, int]]:
    """(batch, d_in, hidden, d_out): batch and hidden split n ways, the rest deliberately not."""
    return [(n, 5, 2 * n, 3), (4 * n, 37, 16 * n, 19), (32 * n, 96, 64 * n, 48)]


def make_inputs(seed: int, b: int, d: int, h: int, o: int) -> tuple[Params, np.ndarray]:
    rng = np.random.default_rng(seed)
    f32 = np.float32
    params = {
        "w1": (rng.standard_normal((d, h)) / np.sqrt(d)).astype(f32),
        "b1": rng.standard_normal(h).astype(f32) * f32(0.1),
        "w2": (rng.standard_normal((h, o)) / np.sqrt(h)).astype(f32),
        "b2": rng.standard_normal(o).astype(f32) * f32(0.1),
    }
    return params, rng.standard_normal((b, d)).astype(f32)


def reference(params: Params, x: np.ndarray) -> np.ndarray:
    p = {k: v.astype(np.float64) for k, v in params.items()}
    y: np.ndarray = np.maximum(x.astype(np.float64) @ p["w1"] + p["b1"], 0) @ p["w2"] + p["b2"]
    return y


def _flops(compiled: Any) -> float | None:
    try:
        cost = compiled.cost_analysis()
    except Exception:  # noqa: BLE001 - not every backend reports costs
        return None
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else None
    return float(cost["flops"]) if isinstance(cost, dict) and "flops" in cost else None


def _values_problem(y: Any, want: np.ndarray, case: CaseFields) -> str:
    if not isinstance(y, jax.Array):
        return f"returned {type(y).__name__}, expected a jax.Array"
    if tuple(y.shape) != want.shape:
        return f"returned shape {tuple(y.shape)}, expected {want.shape}"
    if y.dtype != np.float32:
        return f"returned dtype {y.dtype}, expected float32"
    got = np.asarray(y, dtype=np.float64)
    if not np.all(np.isfinite(got)):
        # Shown as such in the error columns, never as a 0.
        case["max_abs"] = case["max_rel"] = float("nan") if np.isnan(got).any() else float("inf")
        return "the output has NaN or inf"
    err = np.abs(got - want)
    case["max_abs"] = float(err.max())
    case["max_rel"] = float((err / np.maximum(np.abs(want), 1e-6)).max())
    tol = 1e-4 * (1 + np.abs(want))
    bad = err > tol
    if bad.any():
        idx = [tuple(int(i) for i in ix) for ix in np.argwhere(bad)[:3]]
        return (
            f"{int(bad.sum())} of {bad.size} outputs wrong (max abs err {err.max():.3g}); "
            f"first at {idx}"
        )
    return ""


def read_program(encoded: Any) -> tuple[Any, str]:
    """The sandbox's program, deserialized here; (None, why) if it is not
    one gpulab will run."""
    from jax import export

    try:
        exported = export.deserialize(bytearray(base64.b64decode(encoded, validate=True)))
        text = exported.mlir_module()
    except Exception:  # noqa: BLE001 - whatever the sandbox sent
        return None, "the sandbox sent a program gpulab cannot read"
    targets = [a or b for a, b in CUSTOM_CALL.findall(text)]
    bad = sorted({t for t in targets if t not in SAFE_CUSTOM_CALLS})
    if bad or text.count("custom_call") > len(targets):
        return None, (
            f"the step calls out of JAX (custom call {bad[0] if bad else '?'}): "
            "callbacks and custom kernels can't be graded here; use jax.numpy"
        )
    return exported, ""


def mesh_like_export(exported: Any, mesh: Any) -> Any:
    """gpulab's mesh, with the axis types the program was exported under.

    JAX 0.7 and later give a mesh's axes a type: `jax.make_mesh` makes them
    Explicit (0.10), `Mesh(...)` Auto, and a program's shardings only go onto
    a mesh whose types match ("NamedSharding new mesh ... does not match the
    mesh used for export"). Older JAX has no types, and the mesh is returned
    as it is; so it is wherever the types cannot be read or set."""
    named = [
        s
        for s in (
            *(getattr(exported, "_in_named_shardings", None) or ()),
            *(getattr(exported, "_out_named_shardings", None) or ()),
        )
        if s is not None
    ]
    types = getattr(getattr(named[0], "mesh", None), "axis_types", None) if named else None
    if not types or tuple(types) == tuple(getattr(mesh, "axis_types", None) or ()):
        return mesh
    if len(types) != len(mesh.axis_names):
        return mesh  # another mesh's program: _run names the problem
    from jax.sharding import Mesh

    try:
        return Mesh(mesh.devices, mesh.axis_names, axis_types=tuple(types))
    except (TypeError, ValueError):
        return mesh


def _run(
    exported: Any, mesh: Any, params: Params, x: np.ndarray
) -> tuple[Any, Any, Shardings, str]:
    """Compile the learner's program here and run it on gpulab's inputs.
    Returns (the compiled step, y, its shardings by name, a problem)."""
    from jax.sharding import NamedSharding

    n = mesh.devices.size
    mesh = mesh_like_export(exported, mesh)
    tree = jax.tree_util.tree_structure(((params, x), {}))
    if exported.in_tree != tree:
        return None, None, Shardings(), "the step takes other arguments than (params, x)"
    if exported.nr_devices not in (1, n):
        return (
            None,
            None,
            Shardings(),
            (
                f"the step was compiled for {exported.nr_devices} devices; "
                f"the mesh you were given has {n}"
            ),
        )
    ins = list(exported.in_shardings_jax(mesh))
    outs = list(exported.out_shardings_jax(mesh))
    (in_params, in_x), _ = jax.tree_util.tree_unflatten(exported.in_tree, ins)
    # The tree matched gpulab's (params, x) above: params are w1, b1, w2, b2.
    given = Shardings(
        w1=in_params["w1"],
        b1=in_params["b1"],
        w2=in_params["w2"],
        b2=in_params["b2"],
        x=in_x,
        y=outs[0] if len(outs) == 1 else None,
    )
    if exported.nr_devices == 1 and n > 1:
        given = Shardings(w1=None, b1=None, w2=None, b2=None, x=None, y=None)
    if exported.nr_devices == 1:
        step = jax.jit(exported.call)
    else:
        fill = NamedSharding(mesh, _partition_spec())  # to run it; the check sees None
        ins = [s if s is not None else fill for s in ins]
        (in_params, in_x), _ = jax.tree_util.tree_unflatten(exported.in_tree, ins)
        step = jax.jit(
            exported.call,
            in_shardings=(in_params, in_x),
            out_shardings=jax.tree_util.tree_unflatten(
                exported.out_tree, [s if s is not None else fill for s in outs]
            ),
        )
    try:
        compiled = step.lower(params, x).compile()
        y = compiled(params, x)
        wait: Callable[[Any], object] = jax.block_until_ready  # unannotated in some JAX
        wait(y)
    except Exception as exc:  # noqa: BLE001 - the learner's program failed to run
        return None, None, given, f"running it failed: {type(exc).__name__}: {str(exc)[:300]}"
    return compiled, y, given, ""


def check_step(
    mode: str,
    program: object,
    mesh: Any,
    shape: tuple[int, int, int, int],
    data: tuple[Params, np.ndarray, np.ndarray],
) -> tuple[CaseRow, list[str]]:
    """One case: values, shardings in and out, and what the compiled step
    does, all from the learner's program compiled and run here. Returns the
    case's row and the collectives the compiled step runs (where it should)."""
    b, d, h, o = shape
    n = mesh.devices.size
    params, x, expected = data
    name = f"{mode}: {b}×{d}→{h}→{o}"
    case: CaseFields = {
        "name": name,
        "passed": False,
        "shape": f"{b}×{d}→{h}→{o}",
        "dtype": "fp32",
    }
    if not isinstance(program, dict) or "program" not in program:
        error = program.get("error") if isinstance(program, dict) else None
        case["detail"] = _text(error) or "the sandbox sent no program"
        return case_row(**case), []
    exported, problem = read_program(program["program"])
    compiled: Any  # a jax Compiled whenever no problem was found
    compiled, y, given, problem = (
        _run(exported, mesh, params, x) if exported else (None, None, Shardings(), problem)
    )
    problem = problem or _values_problem(y, expected, case)
    want = EXPECTED[mode]
    for k in ("x", "w1", "b1", "w2", "b2", "y"):
        ndim = 2 if k in ("x", "y") else params[k].ndim
        label = "the output y" if k == "y" else k
        problem = problem or _sharding_problem(label, given.get(k), want[k], ndim, mesh)
    text = compiled.as_text() if not problem else ""
    found = COLLECTIVE.findall(text or "")
    if not problem and n > 1:
        ops = sorted({op for _, op in found})
        if mode == "data parallel" and ops:
            problem = (
                f"the step communicates ({', '.join(ops)}); data parallel needs no "
                "communication in the forward pass: keep the batch split end to end"
            )
        if mode != "data parallel" and not {"all-reduce", "reduce-scatter"} & set(ops):
            problem = (
                "no all-reduce in the compiled step: with the hidden dimension split, "
                "each device holds a partial sum of y that must be added up"
            )
    flops = _flops(compiled) if not problem and n > 1 and shape == shapes(n)[-1] else None
    if flops is not None:
        total = 2 * b * h * (d + o)
        share = total / n * 1.1 + 4 * b * (h + o)
        if flops > share:
            problem = (
                f"each device does {flops:.3g} FLOPs, about {flops / total:.0%} of the "
                f"whole MLP's {total:.3g}; split over {n} devices its share is "
                f"{total / n:.3g}: something gathers the work onto every device"
            )
    case["passed"] = not problem
    case["detail"] = problem
    collectives = []
    if not problem and n > 1 and mode != "data parallel":
        collectives = [f"{op} {shp}" for shp, op in found]
    return case_row(**case), collectives


def _text(value: Any) -> str:
    from gpulab.wire.protocol import text

    return text(value, 2000)


def grade(ctx: GradeContext) -> None:
    configure(ctx.device)
    ctx.notes.extend(notes_for(ctx.device))
    from jax.sharding import Mesh

    # Inputs and float64 answers exist only here; the sandbox sees shapes.
    n = jax.device_count()
    mesh = Mesh(np.array(jax.devices()), (AXIS,))
    modes = ("data parallel", "tensor parallel", "tensor parallel (shard_map)")
    data = {}
    for i, mode in enumerate(modes):
        for j, shape in enumerate(shapes(n)):
            params, x = make_inputs(ctx.seed(10 * i + j + 1), *shape)
            data[mode, shape] = (params, x, reference(params, x))
    ctx.function("make_mesh")  # the learner's file loaded (or why not)
    ctx.stage(StageKind.EXPORTING, "exporting your steps")
    request = ExportRequest(tuple(tuple(s) for s in shapes(n)))
    reply = ctx.sandbox.ask(request, Exported)
    if isinstance(reply, Raised):
        ctx.fail(_text(reply.summary), _text(reply.message))
    if not isinstance(reply, Exported):
        ctx.fail(f"the sandbox could not export your steps: {_text(reply.summary)}")
    if reply.steps is None:
        ctx.fail("the sandbox could not export your steps: ")
    problem = _text(reply.mesh_problem)
    ctx.add_case(case_row(name=f"make_mesh over {n} devices", passed=not problem, detail=problem))
    if problem:
        ctx.notes.append("make_mesh failed, so the steps below were given gpulab's own mesh.")
    for mode in modes:
        step = reply.steps.get(mode)
        if step is None and mode in OPTIONAL:
            continue
        if step is None or step.error is not None:
            ctx.add_case(
                case_row(
                    name=mode,
                    passed=False,
                    detail=_text(step.error if step is not None else None)
                    or "the sandbox sent nothing for it",
                )
            )
            continue
        programs = step.programs
        ctx.stage(StageKind.RUNNING, f"running {mode}")
        for j, shape in enumerate(shapes(n)):
            program = programs[j] if j < len(programs) else {}
            case, notes = check_step(mode, program, mesh, shape, data[mode, shape])
            ctx.add_case(case)
            if notes and j == len(shapes(n)) - 1:
                ctx.notes.append(
                    f"{mode}, {case.shape}: per call " + ", ".join(notes) + " (per-device shapes)"
                )
