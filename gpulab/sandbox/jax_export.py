"""Lesson 08 in the sandbox: the learner's sharded steps, exported as programs.

The sandbox calls the learner's `make_mesh`, `data_parallel`, ... and
exports each returned `jax.jit` step with `jax.export` for the shapes the
judge names (shapes only: the sandbox never sees the judge's inputs). The
serialized StableHLO goes back as data; the judge compiles and runs it on
its own inputs and reads its shardings, collectives and FLOPs itself
(gpulab.judge.graders.sharded_mlp). Nothing this module reports is believed
except the make_mesh case, which only decides whose mesh the steps get.
"""

from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING, Any

from gpulab.wire.benches import Exported, ExportedStep, ExportRequest

if TYPE_CHECKING:
    from jax import ShapeDtypeStruct

AXIS = "devices"
SIMULATED = 8
STEPS = {
    "data parallel": "data_parallel",
    "tensor parallel": "tensor_parallel",
    "tensor parallel (shard_map)": "tensor_parallel_shard_map",
}
OPTIONAL = {"tensor parallel (shard_map)"}
# The contract's shardings (exercises/sharded_mlp.py), as PartitionSpec
# entries: the judge checks a program against them, and on a mesh with
# Explicit axes the sandbox exports with arguments of these types.
EXPECTED: dict[str, dict[str, tuple[str | None, ...]]] = {
    "data parallel": {"x": (AXIS, None), "w1": (), "b1": (), "w2": (), "b2": (), "y": (AXIS, None)},
    "tensor parallel": {
        "x": (),
        "w1": (None, AXIS),
        "b1": (AXIS,),
        "w2": (AXIS, None),
        "b2": (),
        "y": (),
    },
}
EXPECTED["tensor parallel (shard_map)"] = EXPECTED["tensor parallel"]


def configure(device: str) -> None:
    """Set JAX up before any backend starts, the same in the judge and the
    sandbox, so a program exported in one runs in the other."""
    # JAX grabs 75% of GPU memory at start-up by default; a check needs little.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax

    config: Any = jax.config  # (its update is untyped)
    try:
        config.update("jax_num_cpu_devices", SIMULATED)
    except (AttributeError, KeyError, ValueError, RuntimeError):
        # Older JAX: the XLA flag, read when the CPU backend starts.
        flag = f"--xla_force_host_platform_device_count={SIMULATED}"
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()
    if device == "cpu":
        config.update("jax_platforms", "cpu")
    # fp32 matmuls in full fp32 (not TF32 on a GPU), so the tolerance can stay tight.
    config.update("jax_default_matmul_precision", "highest")


def mesh_problem(mesh: Any) -> str:
    import jax
    from jax.sharding import Mesh

    devices = jax.devices()
    if not isinstance(mesh, Mesh):
        return f"make_mesh returned {type(mesh).__name__}, expected a jax.sharding.Mesh"
    if tuple(mesh.axis_names) != (AXIS,):
        return f"the mesh's axes are {tuple(mesh.axis_names)}, expected ('{AXIS}',)"
    if mesh.devices.shape != (len(devices),) or set(mesh.devices.flat) != set(devices):
        return (
            f"the mesh has shape {mesh.devices.shape} over {mesh.devices.size} devices; "
            f"expected all {len(devices)} devices in one row"
        )
    return ""


def export_request(server: Any, msg: ExportRequest) -> Exported:
    """{"shapes": [[b, d, h, o], ...]} -> the mesh case, and per step and
    shape a serialized program or what went wrong."""
    import jax
    import numpy as np
    from jax.sharding import Mesh

    from gpulab.sandbox.learner import LearnerError, call

    module = server.module
    problem = ""
    if msg.steps:  # gpulab's own mesh (lesson 08's exercise): no make_mesh
        axes, sizes = zip(*msg.mesh, strict=True) if msg.mesh else ((AXIS,), (1,))
        mesh = Mesh(np.array(jax.devices()).reshape(sizes), axes)
    else:
        try:
            mesh = call(server.function("make_mesh"), server.file)
            problem = mesh_problem(mesh)
        except LearnerError as exc:
            problem = exc.summary
        if problem:
            mesh = Mesh(np.array(jax.devices()), (AXIS,))
    shapes = list(msg.shapes)
    steps: dict[str, ExportedStep] = {}
    for mode, name in (msg.steps or STEPS).items():
        fn = getattr(module, name, None)
        if mode in OPTIONAL and not callable(fn):
            continue
        steps[mode] = _export_step(server, fn, name, mesh, shapes, mode)
    return Exported(mesh_problem=problem, devices=jax.device_count(), steps=steps)


def _explicit(mesh: Any) -> bool:
    """Whether the mesh has Explicit axes (`jax.make_mesh` in JAX 0.7+):
    there an array's sharding is part of its type, and shard_map checks its
    in_specs against the types of its arguments. JAX before 0.7 has none."""
    import jax

    axis_type = getattr(jax.sharding, "AxisType", None)
    explicit = getattr(axis_type, "Explicit", None)
    return explicit is not None and explicit in tuple(getattr(mesh, "axis_types", None) or ())


def _arguments(
    mesh: Any, mode: str, shape: tuple[int, ...], typed: bool
) -> tuple[dict[str, ShapeDtypeStruct], ShapeDtypeStruct]:
    """(params, x) as shapes for export; `typed`: each placed as the contract
    says, as a learner's own call on an Explicit mesh would have them."""
    import jax
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec

    # Both untyped in JAX: called through Any.
    partition: Any = PartitionSpec
    struct: Any = jax.ShapeDtypeStruct

    b, d, h, o = shape
    dims = {"w1": (d, h), "b1": (h,), "w2": (h, o), "b2": (o,), "x": (b, d)}

    def spec(name: str) -> ShapeDtypeStruct:
        want = EXPECTED.get(mode)
        sharding = NamedSharding(mesh, partition(*want[name])) if typed and want else None
        shaped: ShapeDtypeStruct = struct(dims[name], np.float32, sharding=sharding)
        return shaped

    return {k: spec(k) for k in ("w1", "b1", "w2", "b2")}, spec("x")


def _export_step(
    server: Any, fn: Any, name: str, mesh: Any, shapes: list[tuple[int, ...]], mode: str
) -> ExportedStep:
    from jax import export

    from gpulab.sandbox.learner import LearnerError, call

    if not callable(fn):
        return ExportedStep(error=f"{os.path.basename(server.file)} does not define `{name}`")
    try:
        step = call(fn, server.file, mesh)
    except LearnerError as exc:
        return ExportedStep(error=exc.summary)
    if not hasattr(step, "lower"):
        return ExportedStep(
            error=f"returned {type(step).__name__}; return the jax.jit(...) step itself "
            "(with in_shardings and out_shardings)"
        )
    # Each shape's program or why not: plain JSON (gpulab.judge.graders.sharded_mlp checks it).
    programs: list[dict[str, str]] = []
    for shape in shapes:
        try:
            params, x = _arguments(mesh, mode, shape, typed=False)
            exported = call(lambda p, xs: export.export(step)(p, xs), server.file, params, x)
        except LearnerError as exc:
            if not _explicit(mesh):
                programs.append({"error": f"exporting it failed: {exc.summary}"})
                continue
            # Explicit axes: shard_map refuses unplaced arguments ("in_specs ...
            # does not match the specs of the input: P(None,)"). Placed as the
            # contract says, the step is exported as it would run.
            try:
                params, x = _arguments(mesh, mode, shape, typed=True)
                exported = call(lambda p, xs: export.export(step)(p, xs), server.file, params, x)
            except LearnerError:
                programs.append({"error": f"exporting it failed: {exc.summary}"})
                continue
        programs.append({"program": base64.b64encode(bytes(exported.serialize())).decode()})
    return ExportedStep(programs=list(programs))
