"""The benchmarks' frames, judge <-> sandbox: the copy benchmark
(copy_ceiling), the matmul benchmark (matmul_ceiling) and the JAX export
(sharded_mlp).

This module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from gpulab.wire.fields import _int, _items, _need_list, _need_str, _plain
from gpulab.wire.protocol import ProtocolError, text
from gpulab.wire.replies import Reply

# --- the copy benchmark (copy_ceiling) ----------------------------------------------


@dataclass(frozen=True, slots=True)
class BenchModel:
    """The model GPU the benchmark runs on without one (gpulab.sandbox.ceiling.ModelGPU)."""

    hbm_bps: float
    l2_bytes: int
    overhead_s: float
    seed: int

    def to_json(self) -> dict[str, Any]:
        return {
            "hbm_bps": self.hbm_bps,
            "l2_bytes": self.l2_bytes,
            "overhead_s": self.overhead_s,
            "seed": self.seed,
        }

    @classmethod
    def parse(cls, obj: Any) -> BenchModel | None:
        if obj is None:
            return None
        try:
            return cls(
                float(obj["hbm_bps"]),
                int(obj["l2_bytes"]),
                float(obj["overhead_s"]),
                int(obj["seed"]),
            )
        except (KeyError, TypeError, ValueError):
            raise ProtocolError("a copy benchmark's model GPU is malformed") from None


@dataclass(frozen=True, slots=True)
class BenchRequest:
    """`copy_bench`: copy_bandwidth(gpu, n) for each size, on the model GPU
    (`device` "model") or on this one ("cuda")."""

    TYPE: ClassVar[str] = "copy_bench"
    function: str
    device: str
    sizes: tuple[int, ...]
    model: BenchModel | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.TYPE,
            "function": self.function,
            "device": self.device,
            "sizes": list(self.sizes),
        }
        if self.model is not None:
            out["model"] = self.model.to_json()
        return out

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> BenchRequest:
        sizes = _need_list(msg, "sizes")
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in sizes):
            raise ProtocolError("a `copy_bench` request whose sizes are not counts")
        model = BenchModel.parse(msg.get("model"))
        device = _need_str(msg, "device")
        if device == "model" and model is None:
            raise ProtocolError("a `copy_bench` request on the model GPU without its model")
        return cls(_need_str(msg, "function"), device, tuple(sizes), model)


@dataclass(frozen=True, slots=True)
class Bench(Reply):
    """`bench`: each size's value as the learner's function returned it (a
    number, or {"__unsupported__": its type's name}); the judge checks it.
    `times_read`: on the model GPU, how many event times each run read (-1
    on a GPU, where they are not counted); a wrong type reads as absent."""

    TYPE: ClassVar[str] = "bench"
    values: tuple[Any, ...] = ()
    times_read: tuple[int, ...] = ()

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Bench:
        read = _items(frame.get("times_read"))
        counts = all(isinstance(n, int) and not isinstance(n, bool) for n in read)
        return cls(tuple(_plain(_items(frame.get("values")))), tuple(read) if counts else ())

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "values": list(self.values), "times_read": list(self.times_read)}


# --- the matmul benchmark (matmul_ceiling) -------------------------------------------


@dataclass(frozen=True, slots=True)
class MatmulModel:
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

    def to_json(self) -> dict[str, Any]:
        return {
            "peak_flops": self.peak_flops,
            "overhead_s": self.overhead_s,
            "boost": self.boost,
            "tau_s": self.tau_s,
            "first_s": self.first_s,
            "hbm_bps": self.hbm_bps,
            "l2_bytes": self.l2_bytes,
            "seed": self.seed,
        }

    @classmethod
    def parse(cls, obj: Any) -> MatmulModel | None:
        if obj is None:
            return None
        try:
            return cls(
                peak_flops=float(obj["peak_flops"]),
                overhead_s=float(obj["overhead_s"]),
                boost=float(obj["boost"]),
                tau_s=float(obj["tau_s"]),
                first_s=float(obj["first_s"]),
                hbm_bps=float(obj["hbm_bps"]),
                l2_bytes=int(obj["l2_bytes"]),
                seed=int(obj["seed"]),
            )
        except (KeyError, TypeError, ValueError):
            raise ProtocolError("a matmul benchmark's model GPU is malformed") from None


@dataclass(frozen=True, slots=True)
class MatmulBenchRequest:
    """`matmul_bench`: matmul_tflops(gpu, m, n, k) for each shape, on the
    model GPU (`device` "model") or on this one ("cuda"); the reply is a
    `Bench` (each figure, and on the model the event times each run read)."""

    TYPE: ClassVar[str] = "matmul_bench"
    function: str
    device: str
    shapes: tuple[tuple[int, int, int], ...]
    model: MatmulModel | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.TYPE,
            "function": self.function,
            "device": self.device,
            "shapes": [list(s) for s in self.shapes],
        }
        if self.model is not None:
            out["model"] = self.model.to_json()
        return out

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> MatmulBenchRequest:
        shapes = _need_list(msg, "shapes")
        if not all(
            isinstance(s, list)
            and len(s) == 3
            and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in s)
            for s in shapes
        ):
            raise ProtocolError("a `matmul_bench` request whose shapes are not (m, n, k)")
        model = MatmulModel.parse(msg.get("model"))
        device = _need_str(msg, "device")
        if device == "model" and model is None:
            raise ProtocolError("a `matmul_bench` request on the model GPU without its model")
        return cls(
            _need_str(msg, "function"), device, tuple((s[0], s[1], s[2]) for s in shapes), model
        )


# --- the JAX export (sharded_mlp) -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExportRequest:
    """`jax_export`: the mesh, then each step exported at each shape
    ([batch, d, hidden, out]). Lesson 08's exercise (choose_specs) names its
    `steps` (mode -> the file's function) and gpulab's `mesh` (axis names
    and sizes) instead: then no make_mesh is asked for, and each step gets
    that mesh."""

    TYPE: ClassVar[str] = "jax_export"
    shapes: tuple[tuple[int, ...], ...]
    steps: dict[str, str] = field(default_factory=dict)
    mesh: tuple[tuple[str, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.TYPE, "shapes": [list(s) for s in self.shapes]}
        if self.steps:
            out["steps"] = dict(self.steps)
            out["mesh"] = [[a, n] for a, n in self.mesh]
        return out

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> ExportRequest:
        shapes, steps, mesh = msg.get("shapes", []), msg.get("steps") or {}, msg.get("mesh") or []
        try:
            return cls(
                tuple(tuple(int(v) for v in s) for s in shapes),
                {str(k): str(v) for k, v in dict(steps).items()},
                tuple((str(a), int(n)) for a, n in mesh),
            )
        except (TypeError, ValueError):
            raise ProtocolError("a `jax_export` request whose shapes are not shapes") from None


@dataclass(frozen=True, slots=True)
class ExportedStep:
    """One step's export: what went wrong (`error`, "" when it is not
    text), or a program a shape (plain JSON: {"program": base64} or
    {"error": ...}, which gpulab.judge.graders.sharded_mlp checks)."""

    error: str | None = None
    programs: list[Any] = field(default_factory=list)

    @classmethod
    def parse(cls, obj: Any) -> ExportedStep:
        if not isinstance(obj, dict):
            return cls(error="")
        if "error" in obj:
            return cls(error=text(obj["error"]))
        return cls(programs=_items(obj.get("programs")))

    def to_json(self) -> dict[str, Any]:
        return {"error": self.error} if self.error is not None else {"programs": self.programs}


@dataclass(frozen=True, slots=True)
class Exported(Reply):
    """`exported`: why make_mesh failed (""), the devices, each step's
    export by mode (a step the file does not define is left out). `steps`
    is None when the sandbox sent no object for them."""

    TYPE: ClassVar[str] = "exported"
    mesh_problem: str = ""
    devices: int = 0
    steps: dict[str, ExportedStep] | None = None

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Exported:
        steps = frame.get("steps")
        return cls(
            mesh_problem=text(frame.get("mesh_problem")),
            devices=_int(frame.get("devices")),
            steps=(
                {str(k): ExportedStep.parse(v) for k, v in steps.items()}
                if isinstance(steps, dict)
                else None
            ),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "mesh_problem": self.mesh_problem,
            "devices": self.devices,
            "steps": {k: v.to_json() for k, v in (self.steps or {}).items()},
        }
