"""NVML: the one place gpulab opens it, and every field it answers.

NVML (through nvidia-ml-py, `import pynvml`) answers in microseconds and
needs no CUDA context, so it is what the live view polls and what the lab
asks "which GPU is here" without torch. `init`/`shutdown`/`opened` are the
only calls that open it; everyone else (the probe, the GPU detection, the
roofline's default GPU, the check's timeout, the clock log while timing)
goes through them.

`query()` asks for every field on its own: a field the driver refuses (not
supported on this board, no permission in a container, hidden in MIG mode)
becomes `{"value": None, "reason": "..."}` and every other field still
answers. `query` never raises; nothing here imports torch.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from typing import Any, NotRequired, TypedDict


class Field(TypedDict):
    """One NVML answer: its value and unit, or None and the reason it is missing."""

    # A number, a text, a list of GpuProcess, or (inside device_fields, before
    # it is converted) the structure pynvml answered: each field its own type.
    value: Any
    unit: NotRequired[str]
    reason: NotRequired[str]


class GpuProcess(TypedDict):
    """A process NVML lists on a GPU."""

    pid: int
    name: str
    type: str  # "compute" or "graphics"
    used_mib: int | None


class Gpu(TypedDict):
    index: int  # NVML's, not CUDA's
    fields: dict[str, Field]  # field name -> answer, in display order


class Query(TypedDict):
    """All of NVML's answers (`query`), keys in the order they are written."""

    available: bool
    reason: str | None
    gpus: list[Gpu]
    driver_version: NotRequired[Field]
    cuda_driver_version: NotRequired[Field]
    nvml_version: NotRequired[Field]


def init(nv: Any = None) -> Any:
    """Open NVML and return the pynvml module (`nv` stands in for it in tests).

    Raises ImportError without nvidia-ml-py and pynvml's NVMLError when the
    driver refuses; each caller decides what that means. NVML counts its
    inits: a caller that never shuts down (the clock log, which opens it for
    every timed measurement) keeps later inits cheap, where a full init can
    take a few hundred ms on a busy box.
    """
    if nv is None:
        import pynvml  # looked up at call time: tests patch its functions

        nv = pynvml
    nv.nvmlInit()
    return nv


def shutdown(nv: Any) -> None:
    """Close one `init`; never raises (a failed shutdown changes nothing we read)."""
    try:
        nv.nvmlShutdown()
    except Exception:  # noqa: BLE001
        pass


@contextlib.contextmanager
def opened(nv: Any = None) -> Iterator[Any]:
    """`with opened() as nv:` NVML open for the block, closed after it.
    Raises what `init` raises, before the block runs."""
    nv = init(nv)
    try:
        yield nv
    finally:
        shutdown(nv)


def text(v: Any) -> str:
    """A string NVML returned: bytes in older bindings, str in newer ones."""
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


# pynvml error class name -> what a learner reads. Looked up by name so that
# a pynvml without some class (older bindings) still works.
_REASONS = {
    "NVMLError_NotSupported": "not supported",
    "NVMLError_NoPermission": "no permission",
    "NVMLError_LibraryNotFound": "no NVML (libnvidia-ml not found: no NVIDIA driver here)",
    "NVMLError_DriverNotLoaded": "no NVML (the NVIDIA driver is not loaded)",
    "NVMLError_FunctionNotFound": "not in this driver's NVML",
    "NVMLError_GpuIsLost": "GPU is lost (it needs a reset)",
    "NVMLError_Uninitialized": "NVML not initialised",
    "NVMLError_NoData": "no data yet",
    "NVMLError_NotFound": "not found",
    "NVMLError_InvalidArgument": "not available for this device",
    "NVMLError_Timeout": "NVML timed out",
    "NVMLError_Unknown": "NVML error (unknown)",
}


def value(v: Any, unit: str = "") -> Field:
    return {"value": v, "unit": unit} if unit else {"value": v}


def na(reason: str) -> Field:
    return {"value": None, "reason": reason}


def reason_for(exc: BaseException, *, mig: bool = False) -> str:
    """A short reason for a failed NVML call."""
    for cls in type(exc).__mro__:
        if cls.__name__ in _REASONS:
            said = _REASONS[cls.__name__]
            if mig and cls.__name__ in ("NVMLError_NotSupported", "NVMLError_InvalidArgument"):
                return said + " in MIG mode"
            return said
    if type(exc).__name__.startswith("NVMLError"):
        return f"NVML error: {exc}"
    return f"{type(exc).__name__}: {exc}"


class _Reader:
    """Calls NVML one field at a time, turning each failure into a reason."""

    def __init__(self, nv: Any) -> None:
        self.nv = nv
        self.mig = False

    def get(
        self, fn: Callable[[], Any], unit: str = "", conv: Callable[[Any], Any] = lambda x: x
    ) -> Field:
        try:
            return value(conv(fn()), unit)
        except Exception as exc:  # noqa: BLE001 - any NVML answer becomes a reason
            return na(reason_for(exc, mig=self.mig))

    def call(self, name: str, *args: Any) -> Any:
        fn = getattr(self.nv, name, None)
        if fn is None:
            raise _Missing(name)
        return fn(*args)


class _Missing(Exception):
    """The installed pynvml lacks this function."""

    def __str__(self) -> str:
        return f"pynvml has no {self.args[0]}"


_REASONS["_Missing"] = "not in the installed nvidia-ml-py"

# Clock-event (throttle) reason bits, as NVML defines them.
_THROTTLE_BITS = {
    "gpu_idle": 0x1,
    "app_clocks": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal": 0x20,
    "hw_thermal": 0x40,
    "power_brake": 0x80,
}


def _throttle_names(mask: int) -> list[str]:
    return [name for name, bit in _THROTTLE_BITS.items() if mask & bit] or ["none"]


def _process_name(nv: Any, pid: int) -> str:
    try:
        return text(nv.nvmlSystemGetProcessName(pid))
    except Exception:  # noqa: BLE001 - a container hides other processes' names
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
                return f.read().strip()
        except OSError:
            return "?"


def _processes(r: _Reader, h: Any) -> Field:
    procs: list[GpuProcess] = []
    reasons = []
    for kind, fn in (
        ("compute", "nvmlDeviceGetComputeRunningProcesses"),
        ("graphics", "nvmlDeviceGetGraphicsRunningProcesses"),
    ):
        try:
            for p in r.call(fn, h):
                used = getattr(p, "usedGpuMemory", None)
                procs.append(
                    {
                        "pid": int(p.pid),
                        "name": _process_name(r.nv, int(p.pid)),
                        "type": kind,
                        "used_mib": round(used / 2**20) if isinstance(used, int) else None,
                    }
                )
        except Exception as exc:  # noqa: BLE001
            reasons.append(f"{kind}: {reason_for(exc, mig=r.mig)}")
    if reasons and not procs and len(reasons) == 2:
        return na("; ".join(reasons))
    seen, unique = set(), []
    for p in procs:  # a process can be listed as both compute and graphics
        if p["pid"] not in seen:
            seen.add(p["pid"])
            unique.append(p)
    return value(unique)


def device_fields(nv: Any, index: int) -> dict[str, Field]:
    """Every NVML field of GPU `index`, in display order."""
    r = _Reader(nv)
    try:
        h = nv.nvmlDeviceGetHandleByIndex(index)
    except Exception as exc:  # noqa: BLE001
        return {"name": na(f"cannot open GPU {index}: {reason_for(exc)}")}
    f: dict[str, Field] = {}
    # MIG first: in MIG mode several device-level queries are refused, and the
    # reason should say so.
    f["mig_mode"] = r.get(
        lambda: r.call("nvmlDeviceGetMigMode", h), conv=lambda m: "enabled" if m[0] else "disabled"
    )
    r.mig = f["mig_mode"].get("value") == "enabled"
    f["name"] = r.get(lambda: r.call("nvmlDeviceGetName", h), conv=text)
    f["uuid"] = r.get(lambda: r.call("nvmlDeviceGetUUID", h), conv=text)
    f["compute_capability"] = r.get(
        lambda: r.call("nvmlDeviceGetCudaComputeCapability", h), conv=lambda cc: f"{cc[0]}.{cc[1]}"
    )
    mem = r.get(lambda: r.call("nvmlDeviceGetMemoryInfo", h))
    if mem.get("value") is not None:
        f["memory_total"] = value(round(mem["value"].total / 2**30, 1), "GiB")
        f["memory_used"] = value(round(mem["value"].used / 2**30, 2), "GiB")
    else:
        f["memory_total"] = f["memory_used"] = mem
    f["memory_bus_width"] = r.get(
        lambda: r.call("nvmlDeviceGetMemoryBusWidth", h), "bits", conv=int
    )
    for key, clock in (("sm", "NVML_CLOCK_SM"), ("memory", "NVML_CLOCK_MEM")):
        cid = getattr(nv, clock, 1 if key == "sm" else 2)
        f[f"{key}_clock"] = r.get(
            functools.partial(r.call, "nvmlDeviceGetClockInfo", h, cid), "MHz", conv=int
        )
        f[f"{key}_clock_max"] = r.get(
            functools.partial(r.call, "nvmlDeviceGetMaxClockInfo", h, cid), "MHz", conv=int
        )
    f["power_draw"] = r.get(
        lambda: r.call("nvmlDeviceGetPowerUsage", h), "W", conv=lambda mw: round(mw / 1000, 1)
    )
    f["power_limit"] = r.get(
        lambda: r.call("nvmlDeviceGetEnforcedPowerLimit", h),
        "W",
        conv=lambda mw: round(mw / 1000, 1),
    )
    f["temperature"] = r.get(
        lambda: r.call("nvmlDeviceGetTemperature", h, getattr(nv, "NVML_TEMPERATURE_GPU", 0)),
        "°C",
        conv=int,
    )
    util = r.get(lambda: r.call("nvmlDeviceGetUtilizationRates", h))
    if util.get("value") is not None:
        f["utilization_gpu"] = value(int(util["value"].gpu), "%")
        f["utilization_memory"] = value(int(util["value"].memory), "%")
    else:
        f["utilization_gpu"] = f["utilization_memory"] = util
    f["pcie_gen"] = r.get(lambda: r.call("nvmlDeviceGetCurrPcieLinkGeneration", h), conv=int)
    f["pcie_gen_max"] = r.get(lambda: r.call("nvmlDeviceGetMaxPcieLinkGeneration", h), conv=int)
    f["pcie_width"] = r.get(lambda: r.call("nvmlDeviceGetCurrPcieLinkWidth", h), "lanes", conv=int)
    f["pcie_width_max"] = r.get(
        lambda: r.call("nvmlDeviceGetMaxPcieLinkWidth", h), "lanes", conv=int
    )
    f["ecc_mode"] = r.get(
        lambda: r.call("nvmlDeviceGetEccMode", h), conv=lambda m: "enabled" if m[0] else "disabled"
    )

    def reasons() -> Any:
        try:
            return r.call("nvmlDeviceGetCurrentClocksEventReasons", h)
        except _Missing:
            return r.call("nvmlDeviceGetCurrentClocksThrottleReasons", h)

    f["clock_events"] = r.get(reasons, conv=_throttle_names)
    f["fan"] = r.get(lambda: r.call("nvmlDeviceGetFanSpeed", h), "%", conv=int)
    f["processes"] = _processes(r, h)
    return f


def gpu_processes(cuda_index: int = 0, nv: Any = None) -> list[GpuProcess] | None:
    """The processes NVML lists on the GPU CUDA calls `cuda_index` (as in
    `processes` above), or None where NVML cannot say. Never raises."""
    try:
        with opened(nv) as nv_:
            visible = _visible_indices(int(nv_.nvmlDeviceGetCount()))
            h = nv_.nvmlDeviceGetHandleByIndex(visible[cuda_index])
            field = _processes(_Reader(nv_), h)
    except Exception:  # noqa: BLE001 - no NVML, no such GPU: nothing to say
        return None
    procs = field.get("value")
    return procs if isinstance(procs, list) else None


def query(nv: Any = None) -> Query:
    """All of NVML's answers: {"available", "reason", "driver_version", ..., "gpus"}.

    `nv` is the pynvml module (tests pass a stand-in); None imports it.
    """
    out: Query = {"available": False, "reason": None, "gpus": []}
    try:
        nv = init(nv)
    except ImportError:
        out["reason"] = "no NVML (nvidia-ml-py is not installed: pip install nvidia-ml-py)"
        return out
    except Exception as exc:  # noqa: BLE001
        out["reason"] = reason_for(exc)
        return out
    try:
        r = _Reader(nv)
        out["available"] = True
        out["driver_version"] = r.get(lambda: r.call("nvmlSystemGetDriverVersion"), conv=text)
        out["cuda_driver_version"] = r.get(
            lambda: r.call("nvmlSystemGetCudaDriverVersion"),
            conv=lambda v: f"{v // 1000}.{v % 1000 // 10}",
        )
        out["nvml_version"] = r.get(lambda: r.call("nvmlSystemGetNVMLVersion"), conv=text)
        try:
            count = int(nv.nvmlDeviceGetCount())
        except Exception as exc:  # noqa: BLE001
            out["reason"] = f"cannot count GPUs: {reason_for(exc)}"
            count = 0
        visible = _visible_indices(count)
        out["gpus"] = [{"index": i, "fields": device_fields(nv, i)} for i in visible]
        if count and not visible:
            out["reason"] = "CUDA_VISIBLE_DEVICES hides every GPU"
        elif not count and not out["reason"]:
            out["reason"] = "NVML sees no GPU"
    finally:
        shutdown(nv)
    return out


def _visible_indices(count: int) -> list[int]:
    """The GPUs CUDA_VISIBLE_DEVICES lets this process use (numeric lists only;
    UUID lists and anything unparsed show every GPU, as NVML itself does)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is None:
        return list(range(count))
    parts = [p.strip() for p in env.split(",") if p.strip()]
    if not parts or parts == ["-1"]:
        return [] if env.strip() in ("", "-1") else list(range(count))
    if all(p.isdigit() for p in parts):
        return [int(p) for p in parts if int(p) < count]
    return list(range(count))
