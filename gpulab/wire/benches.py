"""The benchmarks' frames, judge <-> sandbox: the copy benchmark
(copy_ceiling), the matmul benchmark (matmul_ceiling) and the JAX export
(sharded_mlp).

Each frame is declared once; gpulab.wire.codec writes and reads it (a
request strictly, a reply tolerantly).

This module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from gpulab.wire.codec import Frame, Tolerant, plain, wire
from gpulab.wire.fields import items
from gpulab.wire.protocol import ProtocolError, text
from gpulab.wire.replies import Reply


def _on_model(kind: str, device: str, model: object) -> None:
    """A benchmark on the model GPU (`device` "model") carries its model."""
    if device == "model" and model is None:
        raise ProtocolError(f"a `{kind}` request on the model GPU without its model")


# --- the copy benchmark (copy_ceiling) ----------------------------------------------


@dataclass(frozen=True, slots=True)
class BenchModel(Frame):
    """The model GPU the benchmark runs on without one (gpulab.sandbox.ceiling.ModelGPU)."""

    hbm_bps: float
    l2_bytes: int
    overhead_s: float
    seed: int


@dataclass(frozen=True, slots=True)
class BenchRequest(Frame):
    """`copy_bench`: copy_bandwidth(gpu, n) for each size, on the model GPU
    (`device` "model") or on this one ("cuda")."""

    TYPE: ClassVar[str] = "copy_bench"
    function: str
    device: str
    sizes: tuple[int, ...]
    model: BenchModel | None = wire(None, omit=True)

    def __post_init__(self) -> None:
        _on_model(self.TYPE, self.device, self.model)


def _values(value: Any) -> tuple[Any, ...]:
    return tuple(plain(items(value)))


def _counts(value: Any) -> tuple[int, ...]:
    """All the counts, or none when one is not a count."""
    read = items(value)
    counts = all(isinstance(n, int) and not isinstance(n, bool) for n in read)
    return tuple(read) if counts else ()


@dataclass(frozen=True, slots=True)
class Bench(Tolerant, Reply):
    """`bench`: each size's value as the learner's function returned it (a
    number, or {"__unsupported__": its type's name}); the judge checks it.
    `times_read`: on the model GPU, how many event times each run read (-1
    on a GPU, where they are not counted); a wrong type reads as absent."""

    TYPE: ClassVar[str] = "bench"
    values: tuple[Any, ...] = wire((), read=_values)
    times_read: tuple[int, ...] = wire((), read=_counts)


# --- the matmul benchmark (matmul_ceiling) -------------------------------------------


@dataclass(frozen=True, slots=True)
class MatmulModel(Frame):
    """The model GPU the TFLOP/s benchmark runs on without one
    (gpulab.sandbox.flops.ModelMatmulGPU): its sustained bf16 rate, a
    launch's cost, how far above that rate its clock starts and how fast
    it falls (seconds of products), the first product's one-off cost, and
    the copy model's memory (for the L2 flush)."""

    peak_flops: float
    overhead_s: float
    boost: float
    tau_s: float
    first_s: float
    hbm_bps: float
    l2_bytes: int
    seed: int


@dataclass(frozen=True, slots=True)
class MatmulBenchRequest(Frame):
    """`matmul_bench`: matmul_tflops(gpu, m, n, k) for each shape, on the
    model GPU (`device` "model") or on this one ("cuda"); the reply is a
    `Bench` (each figure, and on the model the event times each run read)."""

    TYPE: ClassVar[str] = "matmul_bench"
    function: str
    device: str
    shapes: tuple[tuple[int, int, int], ...]
    model: MatmulModel | None = wire(None, omit=True)

    def __post_init__(self) -> None:
        if any(d <= 0 for s in self.shapes for d in s):
            raise ProtocolError("a `matmul_bench` request whose shapes are not (m, n, k)")
        _on_model(self.TYPE, self.device, self.model)


# --- the JAX export (sharded_mlp) -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExportRequest(Frame):
    """`jax_export`: the mesh, then each step exported at each shape
    ([batch, d, hidden, out]). Lesson 08's exercise (choose_specs) names its
    `steps` (mode -> the file's function) and gpulab's `mesh` (axis names
    and sizes) instead: then no make_mesh is asked for, and each step gets
    that mesh."""

    TYPE: ClassVar[str] = "jax_export"
    shapes: tuple[tuple[int, ...], ...]
    steps: dict[str, str] = wire(factory=dict, omit=True)
    mesh: tuple[tuple[str, int], ...] = wire((), omit=True)


@dataclass(frozen=True, slots=True)
class ExportedStep(Tolerant):
    """One step's export: what went wrong (`error`, "" when it is not
    text), or a program a shape (plain JSON: {"program": base64} or
    {"error": ...}, which gpulab.judge.graders.sharded_mlp checks)."""

    error: str | None = wire(None, omit=True)
    programs: list[Any] = wire(factory=list, omit=True)


def _step(value: Any) -> ExportedStep:
    if not isinstance(value, dict):
        return ExportedStep(error="")
    if "error" in value:
        return ExportedStep(error=text(value["error"]))
    return ExportedStep(programs=items(value.get("programs")))


def _steps(value: Any) -> dict[str, ExportedStep] | None:
    if not isinstance(value, dict):
        return None
    return {str(k): _step(v) for k, v in value.items()}


@dataclass(frozen=True, slots=True)
class Exported(Tolerant, Reply):
    """`exported`: why make_mesh failed (""), the devices, each step's
    export by mode (a step the file does not define is left out). `steps`
    is None when the sandbox sent no object for them."""

    TYPE: ClassVar[str] = "exported"
    mesh_problem: str = ""
    devices: int = 0
    steps: dict[str, ExportedStep] | None = wire(None, read=_steps)
