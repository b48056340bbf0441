"""Compiled kernels as the record sends them, and as the replay launches them.

On a GPU the check's sandbox writes down, for each launch, the kernel the
launch ran as Triton compiled it (`binary_of`: the cubin, Triton's launch
metadata, the parameters' names and types). The replay's sandbox launches
those (`Loaded`) and runs no learner Python at all: it rebuilds Triton's
own `CompiledKernel` from files it writes itself into a folder of its own,
with a stand-in for the source that holds only the signature, so Triton's
launcher (its argument packing, scratch memory, TMA descriptors, cluster
launches) is the one a JIT launch uses. Checked on an H100 with Triton 3.6
for every reference kernel of the course (benchmarks/h100-2026-12-07-cubin:
identical results, the same launch cost as the JIT's).
"""

from __future__ import annotations

import base64
import json
import tempfile
import types
from pathlib import Path
from typing import Any

from gpulab.wire.kernel_binary import KernelBinary, sig_type
from gpulab.wire.protocol import Kwargs


def _plain(value: Any) -> Any:
    """Triton's metadata as JSON's types (its target is a named tuple or a
    dataclass, its lists tuples)."""
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if hasattr(value, "__dataclass_fields__"):
        return {k: _plain(getattr(value, k)) for k in value.__dataclass_fields__}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _constant(value: Any) -> Any:
    return value if value is None or isinstance(value, (bool, int, float, str)) else None


def binary_of(kernel: Any, ident: int) -> KernelBinary | str:
    """A compiled kernel (a CompiledKernel, as a JIT launch returns it) as
    the record sends it; or why it cannot be sent so (the judge then
    refuses its launch with that reason)."""
    try:
        cubin = kernel.asm["cubin"]
        src = kernel.src
        names = list(src.fn.arg_names)
        signature = dict(src.signature)
        metadata = _plain(kernel.metadata)
        params = [[n, _sig_json(signature[n])] for n in names]
        constants = []
        for key, value in dict(getattr(src, "constants", {}) or {}).items():
            index = (names.index(key),) if isinstance(key, str) else tuple(key)
            constants.append([list(index), _constant(value)])
    except Exception as exc:  # noqa: BLE001 - another Triton, or not a compiled kernel
        return f"{type(exc).__name__}: {exc}"[:300]
    if not isinstance(cubin, bytes):
        return "it has no cubin"
    binary, why = KernelBinary.read(
        {
            "ident": ident,
            "name": kernel.name,
            "cubin": base64.b64encode(cubin).decode("ascii"),
            "metadata": metadata,
            "params": params,
            "constants": constants,
        }
    )
    return binary if binary is not None else f"gpulab cannot read {why}"


def _sig_json(t: Any) -> Any:
    return [_sig_json(x) for x in t] if isinstance(t, (tuple, list)) else t


def _sig_value(t: Any) -> Any:
    return tuple(_sig_value(x) for x in t) if isinstance(t, tuple) else t


class Loaded:
    """The replay's compiled kernels, by the record's ident, rebuilt once
    each in this process (a sandbox of its own that never sees the file)."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="gpulab-binaries-"))
        self.kernels: dict[int, Any] = {}
        self.params: dict[int, tuple[str, ...]] = {}

    def add(self, binary: KernelBinary) -> None:
        """Rebuild `binary` as Triton's CompiledKernel (its handles, the
        module and the launcher, come at its first launch)."""
        from triton.compiler.compiler import CompiledKernel

        if binary.ident in self.kernels:
            return
        here = self.folder / str(binary.ident)
        here.mkdir()
        (here / f"{binary.name}.cubin").write_bytes(binary.cubin_bytes())
        (here / f"{binary.name}.json").write_text(json.dumps(binary.metadata))
        names = tuple(n for n, _ in binary.params)
        checked = {n: sig_type(_sig_json(t)) for n, t in binary.params}
        src = types.SimpleNamespace(
            signature={n: _sig_value(t) for n, t in checked.items()},
            constants={k: v for k, v in binary.constants},
            fn=types.SimpleNamespace(arg_names=list(names)),
        )
        group = {
            f"{binary.name}.{ext}": str(here / f"{binary.name}.{ext}") for ext in ("cubin", "json")
        }
        self.kernels[binary.ident] = CompiledKernel(src, group, f"gpulab-{binary.ident}")
        self.params[binary.ident] = names

    def launch(self, ident: int, grid: tuple[int, ...], args: Kwargs) -> None:
        """One launch on the current stream, every parameter in order."""
        kernel = self.kernels[ident]
        grid3 = (tuple(grid) + (1, 1, 1))[:3]
        kernel[grid3](*(args[n] for n in self.params[ident]))

    def close(self) -> None:
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)


def loaded(server: Any) -> Loaded:
    """The replay sandbox's kernels, kept for its life (a second check of
    the same kernels loads nothing again)."""
    found = getattr(server, "binaries", None)
    if found is None:
        found = server.binaries = Loaded()
    return found
