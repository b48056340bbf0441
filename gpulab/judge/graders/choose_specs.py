"""Grader for lesson 08's exercise: choose the PartitionSpecs yourself.

Contract (exercises/choose_specs.py): on gpulab's 2-D mesh with axes
("data", "model"), `data_and_model(mesh)` and `data_everywhere(mesh)`
return `jax.jit` steps of `mlp(params, x)` whose shardings the learner
chooses to meet each goal's requirements, stated as what each device
holds and what the program may communicate, never as specs:

    data_and_model   each device holds 1/data of x's rows and 1/model of w1
                     and of w2; y comes out split by rows over "data" and
                     whole across "model"; the only collectives are
                     all-reduces of y's per-device partial sums
    data_everywhere  each device holds 1/(data·model) of x's rows; y comes
                     out split the same way; no collective at all

Graded as lesson 08's first step is (gpulab.judge.graders.sharded_mlp):
the sandbox exports each step as a program (shapes only), and the judge
compiles and runs it on its own inputs, reading the values, the shardings
the program takes and returns, its collectives and its FLOPs per device
from the program itself. Any specs that meet the requirements pass.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from gpulab.judge.case_row import CaseFields, case_row
from gpulab.judge.graders.sharded_mlp import (
    COLLECTIVE,
    Shardings,
    _flops,
    _partition_spec,
    _run,
    _text,
    _values_problem,
    make_inputs,
    notes_for,
    read_program,
    reference,
    shapes,
)
from gpulab.sandbox.jax_export import configure
from gpulab.wire.benches import Exported, ExportRequest
from gpulab.wire.replies import Raised
from gpulab.wire.status import StageKind

if TYPE_CHECKING:
    from gpulab.judge.context import GradeContext
    from gpulab.wire.result import CaseRow

DATA, MODEL = "data", "model"
GOALS = {"data and model": "data_and_model", "data everywhere": "data_everywhere"}
WEIGHTS = ("w1", "w2")


def mesh_sizes(n: int) -> tuple[tuple[str, int], ...]:
    """(axis, size): two along "data" where the devices pair up, the rest
    along "model" (8 simulated CPU devices: 2 × 4; one GPU: 1 × 1)."""
    data = 2 if n % 2 == 0 else 1
    return ((DATA, data), (MODEL, n // data))


def _held(sharding: Any, shape: tuple[int, ...]) -> float:
    """The share of an array of `shape` each device holds (1: all of it)."""
    if sharding is None:
        return 1.0
    try:
        part = sharding.shard_shape(shape)
    except Exception:  # noqa: BLE001 - a sharding that does not fit the shape
        return 1.0
    share: float = math.prod(part) / max(math.prod(shape), 1)
    return share


def _same(sharding: Any, spec: tuple[Any, ...], mesh: Any, ndim: int) -> bool:
    from jax.sharding import NamedSharding

    if sharding is None:
        return bool(mesh.devices.size == 1)
    want = NamedSharding(mesh, _partition_spec(*spec))
    try:
        same: bool = sharding.is_equivalent_to(want, ndim)
        return same
    except Exception:  # noqa: BLE001 - another mesh's sharding
        return False


def _requirements(goal: str, mesh: Any, shape: tuple[int, int, int, int], given: Shardings) -> str:
    """What the program's shardings fail of the goal ("" if nothing)."""
    b, d, h, o = shape
    sizes = dict(zip(mesh.axis_names, mesh.devices.shape, strict=True))
    data, model, n = sizes[DATA], sizes[MODEL], mesh.devices.size
    dims = {"x": (b, d), "w1": (d, h), "w2": (h, o)}
    if goal == "data and model":
        want = {"x": data, "w1": model, "w2": model}
        y_spec: tuple[Any, ...] = (DATA, None)
        y_words = 'split by rows over "data", whole across "model"'
    else:
        want = {"x": n}
        y_spec = ((DATA, MODEL), None)
        y_words = f"split by rows over both axes (1/{n} of y on each device)"
    for name, k in want.items():
        share = _held(given.get(name), dims[name])
        if share > 1 / k + 1e-9:
            held = "all" if share >= 1 else str(Fraction(share).limit_denominator(1024))
            return (
                f"each device holds {held} of {name}; the goal allows 1/{k} "
                f"({'of its rows' if name == 'x' else 'of its elements'})"
            )
    if not _same(given.get("y"), y_spec, mesh, 2):
        return f"y does not come out {y_words}"
    return ""


def _collectives_problem(
    goal: str, found: list[tuple[str, str]], shape: tuple[int, ...], mesh: Any
) -> str:
    ops = sorted({op for _, op in found})
    if goal == "data everywhere":
        if ops:
            return (
                f"the step communicates ({', '.join(ops)}); with the batch split over every "
                "device and the weights whole, no device needs another's data"
            )
        return ""
    b, _, _, o = shape
    data = dict(zip(mesh.axis_names, mesh.devices.shape, strict=True))[DATA]
    partial = f"f32[{b // data},{o}]"
    other = [f"{op} of {shp or '?'}" for shp, op in found if op != "all-reduce" or shp != partial]
    if other:
        return (
            f"the step communicates {', '.join(sorted(set(other)))}: the goal allows only "
            f"all-reduces of y's per-device partial sums ({partial})"
        )
    if not found and dict(zip(mesh.axis_names, mesh.devices.shape, strict=True))[MODEL] > 1:
        return "no all-reduce: with the hidden dimension split, y is a partial sum on each device"
    return ""


def check_goal(
    goal: str,
    program: object,
    mesh: Any,
    shape: tuple[int, int, int, int],
    data: tuple[Any, ...],
) -> CaseRow:
    b, d, h, o = shape
    params, x, expected = data
    case: CaseFields = {
        "name": f"{goal}: {b}×{d}→{h}→{o}",
        "passed": False,
        "shape": f"{b}×{d}→{h}→{o}",
        "dtype": "fp32",
    }
    if not isinstance(program, dict) or "program" not in program:
        error = program.get("error") if isinstance(program, dict) else None
        case["detail"] = _text(error) or "the sandbox sent no program"
        return case_row(**case)
    exported, problem = read_program(program["program"])
    compiled: Any
    compiled, y, given, problem = (
        _run(exported, mesh, params, x) if exported else (None, None, Shardings(), problem)
    )
    problem = problem or _values_problem(y, expected, case)
    problem = problem or _requirements(goal, mesh, shape, given)
    n = mesh.devices.size
    if not problem and n > 1:
        found = COLLECTIVE.findall(compiled.as_text() or "")
        problem = _collectives_problem(goal, found, shape, mesh)
    if not problem and n > 1 and shape == shapes(n)[-1]:
        flops = _flops(compiled)
        total = 2 * b * h * (d + o)
        if flops is not None and flops > total / n * 1.1 + 4 * b * (h + o):
            problem = (
                f"each device does {flops:.3g} FLOPs, {flops / total:.0%} of the whole MLP's; "
                f"its share on {n} devices is {total / n:.3g}"
            )
    case["passed"] = not problem
    case["detail"] = problem
    return case_row(**case)


def grade(ctx: GradeContext) -> None:
    configure(ctx.device)
    ctx.notes.extend(notes_for(ctx.device))
    from jax.sharding import Mesh

    n = jax.device_count()
    sizes = mesh_sizes(n)
    mesh = Mesh(np.array(jax.devices()).reshape([s for _, s in sizes]), [a for a, _ in sizes])
    ctx.notes.append(
        "The mesh: " + " × ".join(f'{s} along "{a}"' for a, s in sizes) + f" ({n} devices)."
    )
    data = {}
    for i, goal in enumerate(GOALS):
        for j, shape in enumerate(shapes(n)):
            params, x = make_inputs(ctx.seed(10 * i + j + 1), *shape)
            data[goal, shape] = (params, x, reference(params, x))
    for name in GOALS.values():
        ctx.function(name)  # the learner's file loaded and defines it (or why not)
    ctx.stage(StageKind.EXPORTING, "exporting your steps")
    request = ExportRequest(tuple(tuple(s) for s in shapes(n)), dict(GOALS), sizes)
    reply = ctx.sandbox.ask(request, Exported)
    if isinstance(reply, Raised):
        ctx.fail(_text(reply.summary), _text(reply.message))
    if not isinstance(reply, Exported) or reply.steps is None:
        ctx.fail(f"the sandbox could not export your steps: {_text(getattr(reply, 'summary', ''))}")
    for goal in GOALS:
        step = reply.steps.get(goal)
        if step is None or step.error is not None:
            ctx.add_case(
                case_row(
                    name=goal,
                    passed=False,
                    detail=_text(step.error if step is not None else None) or "nothing came back",
                )
            )
            continue
        ctx.stage(StageKind.RUNNING, f"running {goal}")
        for j, shape in enumerate(shapes(n)):
            program = step.programs[j] if j < len(step.programs) else {}
            ctx.add_case(check_goal(goal, program, mesh, shape, data[goal, shape]))
