"""A compiled kernel as data: what the replay on a GPU launches instead of
the learner's Python.

On a GPU the check's sandbox records, beside each launch, the kernel the
launch ran as Triton compiled it: the cubin, the launch metadata Triton
keeps beside it in its cache (shared memory, warps, scratch sizes, the TMA
descriptors' layouts...), the parameters' names and types (its signature)
and which of them were constants at compile time. The replay's sandbox
rebuilds a `CompiledKernel` from these alone and launches it; it never
sees a line of the learner's file (gpulab.sandbox.binaries).

Everything here comes from the learner's process, so it is checked as
data before the judge forwards it: the cubin is bytes the driver loads and
runs on the GPU only; every type in the signature is one of a closed
grammar (Triton builds the host-side launcher from them); the metadata is
plain JSON of bounded size whose keys are identifiers. A forged binary can
only compute a wrong answer, fault, or spin: the replay's verdict is the
judge's comparison with its own reference (docs/grading.md).

This module imports nothing heavy.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Any

from gpulab.wire.protocol import JsonObject

MAX_CUBIN_BYTES = 16 << 20  # one kernel's binary (the course's largest: ~0.2 MiB)
MAX_METADATA_BYTES = 64 << 10
MAX_PARAMS = 128
MAX_BINARIES = 64  # distinct compiled kernels a check may send

# Scalar and pointer element types Triton names in a signature.
_ELEMENTS = (
    "i1 i8 i16 i32 i64 u1 u8 u16 u32 u64 fp8e4nv fp8e5 fp8e4b15 fp8e4b8 fp8e5b16 "
    "fp16 bf16 fp32 f32 fp64"
).split()
_SCALAR = re.compile(r"\*?k?(" + "|".join(_ELEMENTS) + r")")
# A host-side TMA descriptor: `tensordesc<bf16[128, 64]>`, Gluon's with its
# layout after a comma (`...,NVMMASharedLayout(swizzle_byte_width=128, ...)`).
_DESC = re.compile(
    r"tensordesc<(" + "|".join(_ELEMENTS) + r")\[\d+(, ?\d+){0,4}\]"
    r"(,[A-Za-z]+\(([A-Za-z_][A-Za-z0-9_]*=([A-Za-z0-9_]+|\[[0-9, \[\]]*\])(, )?){0,12}\))?>"
)
SigType = str | tuple[Any, ...]  # a tuple parameter's types, nested


def sig_type(value: Any, depth: int = 3) -> SigType | None:
    """A parameter's type as the launcher may be built from it, or None."""
    if isinstance(value, str):
        if value == "constexpr" or _SCALAR.fullmatch(value) or _DESC.fullmatch(value):
            return value
        return None
    if isinstance(value, list) and depth > 0 and len(value) <= 16:
        items = tuple(sig_type(v, depth - 1) for v in value)
        return None if any(i is None for i in items) else items
    return None


def _sig_json(t: SigType) -> Any:
    return [_sig_json(x) for x in t] if isinstance(t, tuple) else t


def plain_json(value: Any, depth: int = 4) -> bool:
    """JSON of bounded shape: numbers, bools, null, short printable strings,
    and lists and objects (identifier keys) of them, `depth` levels deep."""
    if value is None or isinstance(value, (bool, int, float)):
        return not isinstance(value, float) or value == value  # no NaN
    if isinstance(value, str):
        return len(value) <= 1024 and value.isprintable()
    if depth <= 0:
        return False
    if isinstance(value, list):
        return len(value) <= 256 and all(plain_json(v, depth - 1) for v in value)
    if isinstance(value, dict):
        return len(value) <= 128 and all(
            isinstance(k, str) and k.isidentifier() and plain_json(v, depth - 1)
            for k, v in value.items()
        )
    return False


Constant = None | bool | int | float | str


@dataclass(frozen=True, slots=True)
class KernelBinary:
    """One compiled kernel: `ident`, the sandbox's number for it (launches
    name it); `name`, its entry point; `cubin`, base64; `metadata`, Triton's
    launch metadata; `params`, each parameter's name and type in order;
    `constants`, the parameters fixed when it was compiled (by position)
    with their values where they are plain (the launcher only skips them)."""

    ident: int
    name: str
    cubin: str
    metadata: dict[str, Any]
    params: tuple[tuple[str, SigType], ...]
    constants: tuple[tuple[tuple[int, ...], Constant], ...] = ()

    @classmethod
    def parse(cls, value: Any) -> KernelBinary | None:
        """The binary, or None where any field is not what it must be."""
        return cls.read(value)[0]

    @classmethod
    def read(cls, value: Any) -> tuple[KernelBinary | None, str]:
        """The binary, or None and which field is not what it must be."""
        if not isinstance(value, dict):
            return None, "not an object"
        ident, name, cubin = value.get("ident"), value.get("name"), value.get("cubin")
        metadata, params = value.get("metadata"), value.get("params")
        if type(ident) is not int or not 0 <= ident < 1 << 20:
            return None, "its number"
        if not isinstance(name, str) or not name.isidentifier() or len(name) > 200:
            return None, "its name"
        if not isinstance(cubin, str) or len(cubin) > MAX_CUBIN_BYTES * 4 // 3 + 4:
            return None, f"its cubin (more than {MAX_CUBIN_BYTES >> 20} MiB?)"
        try:
            if not base64.b64decode(cubin, validate=True):
                return None, "an empty cubin"
        except ValueError:
            return None, "its cubin"
        if not isinstance(metadata, dict) or not plain_json(metadata):
            return None, "its metadata (not plain JSON of identifiers, numbers and short text)"
        if len(repr(metadata)) > MAX_METADATA_BYTES or metadata.get("name") != name:
            return None, "its metadata (too large, or not of this kernel)"
        target = metadata.get("target")
        if not isinstance(target, dict) or target.get("backend") != "cuda":
            return None, "its metadata's target (not a CUDA one)"
        if not isinstance(params, list) or len(params) > MAX_PARAMS:
            return None, "its parameters"
        parsed: list[tuple[str, SigType]] = []
        for p in params:
            if not isinstance(p, list) or len(p) != 2 or not isinstance(p[0], str):
                return None, "its parameters"
            t = sig_type(p[1])
            if t is None or not p[0].isidentifier():
                return None, f"the type of its parameter {str(p[0])[:40]!r}: {str(p[1])[:120]}"
            parsed.append((p[0], t))
        constants = _constants(value.get("constants", []), len(parsed))
        if constants is None:
            return None, "its constants"
        return cls(ident, name, cubin, metadata, tuple(parsed), constants), ""

    def to_json(self) -> JsonObject:
        return {
            "ident": self.ident,
            "name": self.name,
            "cubin": self.cubin,
            "metadata": self.metadata,
            "params": [[n, _sig_json(t)] for n, t in self.params],
            "constants": [[list(k), v] for k, v in self.constants],
        }

    def cubin_bytes(self) -> bytes:
        return base64.b64decode(self.cubin)


def _constants(value: Any, n: int) -> tuple[tuple[tuple[int, ...], Constant], ...] | None:
    if not isinstance(value, list) or len(value) > MAX_PARAMS:
        return None
    out = []
    for item in value:
        if not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], list):
            return None
        key, v = item
        if not key or len(key) > 4 or not all(type(i) is int and 0 <= i < n for i in key[:1]):
            return None
        if not all(type(i) is int and 0 <= i < MAX_PARAMS for i in key):
            return None
        if not (v is None or isinstance(v, (bool, int, float, str))):
            return None
        if isinstance(v, str) and len(v) > 200:
            return None
        out.append((tuple(key), v))
    return tuple(out)
