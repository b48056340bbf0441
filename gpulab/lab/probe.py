"""The device probe: what this machine's GPUs are, and what they are doing.

`snapshot()` gathers one dict (JSON-ready) from NVML (gpulab.gpu.nvml),
torch's device properties asked in a child process (gpulab.measure.torch_probe), the
CPU, and the datasheet GPU that rooflines use. `snapshot_renderable()` turns it
into a rich renderable for `gpulab probe` and the TUI's Device pane.

Every GPU field is `{"value": v, "unit": u}` or `{"value": None, "reason": r}`;
nothing here raises for a missing driver, library or permission, and nothing
imports torch or textual.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from typing import Any, NotRequired, TypedDict, cast

from gpulab.gpu import ceilings, hardware
from gpulab.gpu.nvml import Field, Query, na, value
from gpulab.gpu.nvml import query as query_nvml
from gpulab.lab import child
from gpulab.wire.microbench import Ceilings
from gpulab.wire.probe import TorchDevice, TorchInfo

TORCH_TIMEOUT_S = 60.0
SETTING = "gpu"  # workspace setting: the datasheet GPU rooflines use without a GPU

# (key, label) in display order; "_max" twins are shown beside their field.
FIELDS = [
    ("name", "name"),
    ("compute_capability", "compute capability"),
    ("sms", "SMs"),
    ("l2", "L2 cache"),
    ("memory_total", "memory total"),
    ("memory_used", "memory used"),
    ("memory_bus_width", "memory bus"),
    ("bandwidth_theoretical", "bandwidth (bus × clock × 2)"),
    ("sm_clock", "SM clock (now / max)"),
    ("memory_clock", "memory clock (now / max)"),
    ("power_draw", "power (draw)"),
    ("power_limit", "power limit"),
    ("temperature", "temperature"),
    ("utilization_gpu", "utilisation (SMs busy)"),
    ("utilization_memory", "utilisation (memory)"),
    ("fan", "fan"),
    ("pcie_gen", "PCIe generation (now / max)"),
    ("pcie_width", "PCIe width (now / max)"),
    ("ecc_mode", "ECC"),
    ("mig_mode", "MIG"),
    ("clock_events", "clock events (throttling)"),
]


# What the snapshot holds. `gpulab probe --json` prints it as it is (its keys
# in the order written here), so these are TypedDicts: the JSON is the dict.


class NvmlSummary(TypedDict):
    """NVML's answer without its GPUs (gpulab.gpu.nvml.query's other keys)."""

    available: bool
    reason: str | None
    driver_version: NotRequired[Field]
    cuda_driver_version: NotRequired[Field]
    nvml_version: NotRequired[Field]


class GpuEntry(TypedDict):
    """One GPU: NVML's fields with what torch adds (FIELDS, `mig_slice`, `processes`)."""

    index: int  # NVML's (torch's where NVML did not answer)
    torch_index: int | None
    fields: dict[str, Field]


class CpuInfo(TypedDict):
    model: str
    cores: int | None
    usable_cores: int
    memory_gib: float | None
    arch: str


class RooflineGpu(TypedDict):
    """The datasheet GPU rooflines use, and why that one."""

    key: str
    name: str
    source: str
    setting: NotRequired[str]  # the workspace's choice, where a detected GPU overrides it
    note: NotRequired[str]  # the GPU here that the hardware table does not know


class Snapshot(TypedDict):
    time: str
    host: str
    has_gpu: bool
    no_gpu_reason: str | None
    nvml: NvmlSummary
    torch: TorchInfo  # without its `devices` (each GPU's entry has what they said)
    gpus: list[GpuEntry]
    cpu: CpuInfo
    roofline_gpu: RooflineGpu
    # Device name -> the microbenchmarks' cached file, whole (gpulab.gpu.ceilings):
    # None where a measurement failed, and read tolerantly (it may be older).
    measured: dict[str, Ceilings]


def cpu_info() -> CpuInfo:
    """CPU model, cores and memory; each best-effort."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, val = line.partition(":")
                if key.strip() in ("model name", "Model", "Hardware", "cpu model"):
                    model = val.strip()
                    break
    except OSError:
        pass
    model = model or platform.processor() or platform.machine() or "unknown CPU"
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 0
    mem = None
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        pass
    return {
        "model": model,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gib": round(mem, 1) if mem else None,
        "arch": platform.machine(),
    }


def _value(fields: dict[str, Field], key: str) -> Any:
    """A field's value; None where the field is missing or has none."""
    f = fields.get(key)
    return f.get("value") if f else None


def _strip_uuid(u: Any) -> str:
    return str(u or "").lower().removeprefix("gpu-")


def _merge(nvml: Query, torch_info: TorchInfo) -> list[GpuEntry]:
    """One entry per GPU: NVML's fields, plus what only torch knows (SMs, L2)."""
    tdevs = list(torch_info.get("devices") or [])
    no_torch = torch_info.get("reason") or "torch did not answer"
    gpus: list[GpuEntry] = []
    if nvml.get("available") and nvml.get("gpus"):
        for pos, g in enumerate(nvml["gpus"]):
            f = dict(g["fields"])
            uuid = _strip_uuid(_value(f, "uuid"))
            t = next((d for d in tdevs if uuid and _strip_uuid(d.get("uuid")) == uuid), None)
            if t is None and pos < len(tdevs):
                t = tdevs[pos]
            mig = _value(f, "mig_mode") == "enabled"
            gpus.append(
                {
                    "index": g["index"],
                    "torch_index": t["index"] if t else None,
                    "fields": _with_torch(f, t, no_torch, mig_slice=mig),
                }
            )
    else:
        why = nvml.get("reason") or "NVML did not answer"
        for t in tdevs:  # NVML missing (container, ROCm) but torch sees a GPU
            f = {k: na(why) for k, _ in FIELDS}
            f["processes"] = na(why)
            gpus.append(
                {
                    "index": t["index"],
                    "torch_index": t["index"],
                    "fields": _with_torch(f, t, no_torch, prefer_torch=True),
                }
            )
    return gpus


def _with_torch(
    f: dict[str, Field],
    t: TorchDevice | None,
    why: str,
    prefer_torch: bool = False,
    mig_slice: bool = False,
) -> dict[str, Field]:
    """NVML's fields of a GPU with what torch adds. `mig_slice`: the GPU is in
    MIG mode, so the device torch (and the learner's kernels) see is one
    slice of it: its name, SMs and memory are the slice's, not NVML's
    whole-GPU figures."""
    if t is None:
        f["sms"] = na(f"torch: {why}")
        f["l2"] = na(f"torch: {why}")
    else:
        f["sms"] = value(t["sms"])
        l2 = t.get("l2_bytes")
        f["l2"] = value(round(l2 / 2**20, 1), "MiB") if l2 else na("torch does not report it")
        for key, tv in (
            ("name", t.get("name")),
            ("compute_capability", t.get("compute_capability")),
        ):
            if tv and (prefer_torch or _value(f, key) is None):
                f[key] = value(tv)
        if (prefer_torch or mig_slice) and t.get("memory_bytes"):
            f["memory_total"] = value(round(t["memory_bytes"] / 2**30, 1), "GiB")
        if mig_slice and t.get("name"):
            # "NVIDIA A100-SXM4-40GB MIG 1g.5gb": the slice's own name.
            f["name"] = value(t["name"])
            f["mig_slice"] = value(
                f"this process sees one slice: {t['sms']} SMs, "
                f"{round(t.get('memory_bytes', 0) / 2**30, 1)} GiB; the "
                "datasheet peaks are the whole GPU's"
            )
    bus, clk = f.get("memory_bus_width"), f.get("memory_clock_max")
    if bus and clk and bus.get("value") and clk.get("value"):
        # Double data rate: two transfers a clock. Matches the datasheet for
        # HBM (H200: 6016 bits x 3201 MHz x 2 = 4.81 TB/s).
        f["bandwidth_theoretical"] = value(
            round(bus["value"] / 8 * clk["value"] * 2e6 / 1e12, 2), "TB/s"
        )
    else:
        missing = (bus.get("reason") if bus else None) or (clk.get("reason") if clk else None)
        f["bandwidth_theoretical"] = na(missing or "n/a")
    return f


# Stands in for torch's answer while its child process imports torch (seconds,
# tens of them on a loaded machine): NVML's answer is shown meanwhile.
TORCH_PENDING: TorchInfo = {
    "available": False,
    "pending": True,
    "reason": "still asking torch (a child process imports it)",
}


def ask_torch(timeout: float = TORCH_TIMEOUT_S) -> TorchInfo:
    """Parent side: run the child and return its answer (or why there is none)."""
    try:
        proc = subprocess.run(
            child.python_module("gpulab.measure.torch_probe"),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=child.env(),
        )
    except subprocess.TimeoutExpired:
        return {"available": False, "reason": f"asking torch timed out after {timeout:g} s"}
    except OSError as exc:
        return {"available": False, "reason": f"could not start python: {exc}"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    try:
        # The child's own JSON line (a line that starts with "{": an object).
        return cast(TorchInfo, json.loads(lines[-1]))
    except (IndexError, ValueError):
        err = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"available": False, "reason": f"the torch probe failed: {err}"}


def roofline_gpu(gpu_names: list[str], workspace: Any = None) -> RooflineGpu:
    """The datasheet GPU rooflines use: the detected one when the database
    knows it, else the workspace setting (`gpulab probe --gpu`), else the default."""
    setting = workspace.get_setting(SETTING) if workspace is not None else None
    chosen = hardware.match_gpu(setting) if isinstance(setting, str) else None
    for name in gpu_names:
        g = hardware.match_gpu(name)
        if g:
            out: RooflineGpu = {"key": g.key, "name": g.name, "source": f"detected ({name})"}
            if chosen and chosen.key != g.key:
                out["setting"] = chosen.name
            return out
    if chosen:
        src = "workspace setting (gpulab probe --gpu)"
    else:
        chosen = hardware.GPUS[hardware.DEFAULT_GPU]
        src = "default (choose with gpulab probe --gpu NAME)"
    out = {"key": chosen.key, "name": chosen.name, "source": src}
    if gpu_names:
        out["note"] = f"{gpu_names[0]} is not in the hardware table"
    return out


def snapshot(
    workspace: Any = None, torch_info: TorchInfo | None = None, nvml_module: Any = None
) -> Snapshot:
    """Everything the probe knows, as one JSON-ready dict.

    `torch_info` reuses an earlier `ask_torch()` answer (the live view
    asks torch once and NVML every refresh); `nvml_module` stands in for pynvml.
    """
    nvml = query_nvml(nvml_module)
    if torch_info is None:
        torch_info = ask_torch()
    gpus = _merge(nvml, torch_info)
    names = [str(_value(g["fields"], "name")) for g in gpus if _value(g["fields"], "name")]
    if gpus:
        reason = None
    elif nvml.get("available"):
        reason = nvml.get("reason") or "NVML sees no GPU"
    else:
        reason = f"{nvml.get('reason')}; {torch_info.get('reason') or 'torch sees no GPU'}"
    # Each answer without its list of devices: the GPUs' entries have them.
    nvml_summary = cast(NvmlSummary, {k: v for k, v in nvml.items() if k != "gpus"})
    torch_summary = cast(TorchInfo, {k: v for k, v in torch_info.items() if k != "devices"})
    snap: Snapshot = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "host": platform.node(),
        "has_gpu": bool(gpus),
        "no_gpu_reason": reason,
        "nvml": nvml_summary,
        "torch": torch_summary,
        "gpus": gpus,
        "cpu": cpu_info(),
        "roofline_gpu": roofline_gpu(names, workspace),
        "measured": {},
    }
    root = getattr(workspace, "root", None)
    for name in dict.fromkeys(names):
        m = ceilings.load_measured(root, name)
        if m:
            # A JSON object read from the cache; _measured_text reads it tolerantly.
            snap["measured"][name] = cast(Ceilings, m)
    return snap


# --- rendering (rich is imported here only) --------------------------------------


def fmt_field(f: Field | None) -> str:
    """'1980 MHz', or 'n/a (not supported)'."""
    if not f:
        return "n/a"
    v = f.get("value")
    if v is None:
        return f"n/a ({f.get('reason') or 'unknown'})"
    if isinstance(v, list):
        v = ", ".join(map(str, v))
    return f"{v} {f['unit']}" if f.get("unit") else str(v)


def _pair(f: Field | None, g: Field) -> str:
    """A field and its "_max" twin: "1980 / 1980 MHz"."""
    fv = f.get("value") if f else None
    if fv is None and g.get("value") is None:
        return fmt_field(f)
    a = "n/a" if fv is None else str(fv)
    b = "n/a" if g.get("value") is None else str(g["value"])
    unit = (f.get("unit") if f else None) or g.get("unit") or ""
    return f"{a} / {b} {unit}".rstrip()


def _gpu_table(gpu: GpuEntry) -> Any:
    from rich.table import Table

    f = gpu["fields"]
    title = f"GPU {gpu['index']}: {_value(f, 'name') or 'unknown'}"
    t = Table(title=title, title_justify="left", show_header=False, box=None, pad_edge=False)
    t.add_column("field", style="bold")
    t.add_column("value", overflow="fold")
    for key, label in FIELDS:
        twin = f.get(f"{key}_max")
        text = _pair(f.get(key), twin) if twin is not None else fmt_field(f.get(key))
        style = "dim" if text.startswith("n/a") else ""
        if key == "clock_events" and _value(f, key) not in (
            None,
            ["none"],
            ["gpu_idle"],
        ):
            style = "yellow"
        t.add_row(label, f"[{style}]{_esc(text)}[/]" if style else _esc(text))
    if f.get("mig_slice"):
        t.add_row("MIG slice", f"[yellow]{_esc(fmt_field(f['mig_slice']))}[/]")
    procs = f.get("processes")
    if procs is None or procs.get("value") is None:
        t.add_row("processes", f"[dim]{_esc(fmt_field(procs))}[/]")
    elif not procs["value"]:
        t.add_row("processes", "none")
    else:
        for i, p in enumerate(procs["value"][:8]):
            mem = f"{p['used_mib']} MiB" if p.get("used_mib") is not None else "? MiB"
            t.add_row(
                "processes" if i == 0 else "", _esc(f"{p['pid']} {p['name']} ({p['type']}, {mem})")
            )
    return t


def _esc(s: str) -> str:
    from rich.markup import escape

    from gpulab.textsafe import visible

    # Process names are other users' words (an executable's path, whatever
    # they named it): rich prints ESC as it is, so an OSC 52 in a name set
    # the clipboard of whoever ran `gpulab probe`.
    return escape(visible(s))


def _measured_text(name: str, m: Ceilings) -> str:
    """The cached measurement in words. The file may come from anywhere: a
    value of the wrong type is left out, as read_ceilings leaves it out."""
    from gpulab.gpu.hardware_model import read_ceilings
    from gpulab.textsafe import visible

    roofs = read_ceilings(m)
    parts = []
    for key, label in (
        ("copy_tbs", "copy (read+write)"),
        ("read_tbs", "read"),
        ("write_tbs", "write"),
    ):
        tbs = roofs.get(key)
        if isinstance(tbs, (int, float)) and tbs:
            parts.append(f"{label} {tbs:.2f} TB/s")
    parts += [f"{k} {v:.0f} TFLOP/s" for k, v in roofs.get("tflops", {}).items() if v]
    # Shown as plain Text: only what may reach a terminal is made visible.
    return visible(f"measured on {name} ({m.get('date', '?')}): " + ", ".join(parts))


def snapshot_renderable(snap: Snapshot) -> Any:
    """A rich renderable of a snapshot (the CLI table and the TUI Device pane)."""
    from rich.console import Group
    from rich.text import Text

    parts: list[Any] = []
    nv, tr = snap.get("nvml", {}), snap.get("torch", {})
    if snap.get("has_gpu"):
        parts.append(Text(f"{len(snap['gpus'])} GPU(s) on {snap.get('host', '')}", style="bold"))
    else:
        parts.append(Text("No GPU here: " + str(snap.get("no_gpu_reason")), style="bold yellow"))
    versions = []
    if nv.get("available"):
        versions.append(f"driver {fmt_field(nv.get('driver_version'))}")
        versions.append(f"CUDA (driver) {fmt_field(nv.get('cuda_driver_version'))}")
    elif snap.get("has_gpu"):  # else the headline has just said why
        versions.append(str(nv.get("reason")))
    if tr.get("pending"):
        versions.append("torch and Triton: asking…")
    elif tr.get("available"):
        versions.append(f"torch {tr.get('torch')} (CUDA {tr.get('cuda_version') or 'n/a'})")
    else:
        versions.append(f"torch: n/a ({tr.get('reason')})")
    if not tr.get("pending"):
        versions.append(f"Triton {tr.get('triton') or 'n/a'}")
    parts.append(Text(" · ".join(versions), style="dim"))
    for gpu in snap.get("gpus", []):
        parts.append(_gpu_table(gpu))
    cpu = snap.get("cpu", {})
    mem = f", {cpu['memory_gib']} GiB memory" if cpu.get("memory_gib") else ""
    parts.append(
        Text(
            f"CPU: {cpu.get('model')} ({cpu.get('usable_cores')} of "
            f"{cpu.get('cores')} cores usable{mem})"
        )
    )
    rg = snap.get("roofline_gpu") or {}
    line = f"Rooflines use: {rg.get('name')} datasheet — {rg.get('source')}"
    if rg.get("setting"):
        line += f" (the workspace setting {rg['setting']} applies without this GPU)"
    if rg.get("note"):
        line += f"; {rg['note']}"
    parts.append(Text(line))
    for name, m in (snap.get("measured") or {}).items():
        parts.append(Text(_measured_text(name, m), style="green"))
    if snap.get("has_gpu") and not snap.get("measured"):
        parts.append(
            Text("No measured ceilings yet: `gpulab probe --bench` measures them.", style="dim")
        )
    return Group(*parts)
