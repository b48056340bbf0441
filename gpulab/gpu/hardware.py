"""Datasheet figures of GPUs, each with its source (no UI, no heavy imports).

The table is data: gpulab/data/gpus.toml, one [gpu.KEY] table per GPU (its
header says how to add one). This module reads it the first time a figure is
asked for, checks every field and builds the `GPU` rows; what a row is made of
(`Figure`, `GPU`) lives in `gpulab.gpu.hardware_model`. docs/hardware.md shows the
same table with its sources and is checked against it (tests/perf/test_hardware.py).
The rest of gpulab relies on `GPUS`, `SOURCES`, `match_gpu(name)`,
`DEFAULT_GPU` and the `GPU` fields `bandwidth_tbs`, `tflops` (dense TFLOP/s per
dtype) and `ridge`.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from gpulab.fsutil import load_toml
from gpulab.gpu.hardware_model import DTYPES, FIELDS, GPU, UNITS, Figure, make_gpu, read_ceilings

if TYPE_CHECKING:
    from gpulab.wire.protocol import JsonObject

__all__ = [
    "DATA_PATH",
    "DEFAULT_GPU",
    "DTYPES",
    "FIELDS",
    "GPU",
    "GPUS",
    "SOURCES",
    "UNITS",
    "Figure",
    "HardwareDataError",
    "format_value",
    "known_names",
    "load_table",
    "match_gpu",
]

DATA_PATH = Path(__file__).resolve().parents[1] / "data" / "gpus.toml"
DEFAULT_GPU = "h100-sxm"

_TEXT = ("name", "arch", "year", "memory_type")  # required on every GPU
_GPU_KEYS = {*_TEXT, "aliases", "announced", "sparse", "claims", "measured", *FIELDS}
_FIGURE_KEYS = ("value", "sources", "basis", "flag", "note")
_NOTE_REF = re.compile(r"\{([^{}]*)\}")


class HardwareDataError(ValueError):
    """The hardware table cannot be used; the message names the file, GPU and field."""


class _Reader:
    """Turns the parsed TOML into rows, naming the file and field of any problem."""

    def __init__(self, path: Path, notes: dict[str, str], sources: dict[str, str]) -> None:
        self.path, self.notes, self.sources = path, notes, sources

    def fail(self, where: str, problem: str) -> HardwareDataError:
        return HardwareDataError(f"{self.path}: {where}: {problem}")

    def text(self, raw: Any, where: str) -> str:
        if not isinstance(raw, str):
            raise self.fail(where, f"must be text, not {raw!r}")

        def note(m: re.Match[str]) -> str:
            if m.group(1) not in self.notes:
                raise self.fail(where, f"{{{m.group(1)}}} is not a key of [notes]")
            return self.notes[m.group(1)]

        return _NOTE_REF.sub(note, raw)

    def figure(self, raw: Any, where: str, basis: str, textual: bool = False) -> Figure:
        """A bare value (a vendor datasheet's) or a table of _FIGURE_KEYS."""
        if not isinstance(raw, dict):
            raw = {"value": raw}
        for key in raw:
            if key not in _FIGURE_KEYS:
                raise self.fail(where, f"unknown key '{key}' (known: {', '.join(_FIGURE_KEYS)})")
        value = raw.get("value")
        if value is not None and textual and not isinstance(value, str):
            raise self.fail(where, f"must be text, not {value!r}")
        # bool is an int to Python; `true` is never a figure.
        if (
            value is not None
            and not textual
            and (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            )
        ):
            raise self.fail(where, f"must be a number, at least 0, not {value!r}")
        sources = raw.get("sources", ["vendor"])
        if not isinstance(sources, list) or not sources:
            raise self.fail(where, "sources must be a list of keys of [sources]")
        for s in sources:
            if s not in self.sources:
                raise self.fail(where, f"source {s!r} is not a key of [sources]")
        return Figure(
            value,
            tuple(sources),
            self.text(raw.get("basis", basis), f"{where}, basis"),
            self.text(raw.get("flag", ""), f"{where}, flag"),
            self.text(raw.get("note", ""), f"{where}, note"),
        )

    def per_dtype(self, raw: Any, where: str, basis: str) -> dict[str, Figure]:
        if not isinstance(raw, dict):
            raise self.fail(where, f"must be a table of dtypes, not {raw!r}")
        for d in raw:
            if d not in DTYPES:
                raise self.fail(where, f"unknown dtype '{d}' (known: {', '.join(DTYPES)})")
        return {d: self.figure(raw[d], f"{where}.{d}", basis) for d in DTYPES if d in raw}

    def gpu(self, key: str, raw: Any) -> GPU:
        where = f"GPU '{key}'"
        if not isinstance(raw, dict):
            raise self.fail(where, "must be a table ([gpu.KEY])")
        for k in raw:
            if k not in _GPU_KEYS:
                raise self.fail(f"{where}, field '{k}'", "unknown field")
        for k in _TEXT:
            if k not in raw:
                raise self.fail(f"{where}, field '{k}'", "missing")
            self.text(raw[k], f"{where}, field '{k}'")
        aliases = raw.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise self.fail(f"{where}, field 'aliases'", "must be a list of names")
        announced = raw.get("announced", False)
        if not isinstance(announced, bool):
            raise self.fail(f"{where}, field 'announced'", "must be true or false")
        found = raw.get("measured", {})
        if not isinstance(found, dict):
            raise self.fail(f"{where}, field 'measured'", "must be a table")
        measured = read_ceilings(found)
        if measured != found:
            raise self.fail(
                f"{where}, field 'measured'",
                "must hold only device, date, source (text), copy_tbs, read_tbs, "
                "write_tbs (TB/s) and tflops (TFLOP/s by dtype)",
            )
        figures = {
            f: self.figure(
                raw[f], f"{where}, field '{f}'", "dense" if f in DTYPES else "", f == "cc"
            )
            for f in FIELDS
            if f in raw
        }
        return make_gpu(
            key,
            raw["name"],
            raw["arch"],
            raw["year"],
            raw["memory_type"],
            figures,
            aliases=tuple(aliases),
            sparse=self.per_dtype(raw.get("sparse", {}), f"{where}, field 'sparse'", "sparse"),
            measured=measured,
            claims=self.per_dtype(raw.get("claims", {}), f"{where}, field 'claims'", ""),
            announced=announced,
        )


def _text_table(data: JsonObject, name: str, path: Path) -> dict[str, str]:
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise HardwareDataError(f"{path}: [{name}] must be a table")
    for k, v in table.items():
        if not isinstance(v, str):
            raise HardwareDataError(f"{path}: [{name}] '{k}': must be text, not {v!r}")
    return table


def load_table(path: Path = DATA_PATH) -> tuple[dict[str, GPU], dict[str, str]]:
    """(GPUs by key in the file's order, sources by key) from a hardware table.

    Raises HardwareDataError naming the file, the GPU and the field of the
    first problem: gpulab says what is wrong rather than drawing a wrong roof.
    """
    data = load_toml(path, HardwareDataError, "the hardware table is missing")
    for k in data:
        if k not in ("notes", "sources", "gpu"):
            raise HardwareDataError(f"{path}: unknown table [{k}] (known: notes, sources, gpu)")
    reader = _Reader(path, _text_table(data, "notes", path), _text_table(data, "sources", path))
    rows = data.get("gpu")
    if not isinstance(rows, dict) or not rows:
        raise HardwareDataError(f"{path}: no [gpu.KEY] tables")
    gpus = {key: reader.gpu(key, raw) for key, raw in rows.items()}
    if DEFAULT_GPU not in gpus:
        raise HardwareDataError(f"{path}: the default GPU '{DEFAULT_GPU}' is not in the table")
    return gpus, reader.sources


_lock = threading.Lock()
_loaded: tuple[dict[str, GPU], dict[str, str]] | None = None


def _table() -> tuple[dict[str, GPU], dict[str, str]]:
    # Parsed once (about 4 ms), under a lock: two workers asking at once must
    # get the same GPU objects, since callers compare rows with `is`.
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = load_table(DATA_PATH)
        return _loaded


V = TypeVar("V")


class _Lazy(MutableMapping[str, V], Generic[V]):
    """A dict of the table filled on first use, so importing this module
    (which the CLI and every pane do) parses nothing. Writable because tests
    swap a row with monkeypatch.setitem, as they did when this was a dict."""

    def __init__(self, part: int) -> None:
        self._part = part

    def _dict(self) -> dict[str, V]:
        return _table()[self._part]  # type: ignore[return-value]

    def __getitem__(self, key: str) -> V:
        return self._dict()[key]

    def __setitem__(self, key: str, value: V) -> None:
        self._dict()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())

    def __repr__(self) -> str:
        return repr(self._dict())


GPUS: MutableMapping[str, GPU] = _Lazy(0)
SOURCES: MutableMapping[str, str] = _Lazy(1)  # where figures come from, by key


def _norm(s: str) -> str:
    return " ".join(s.lower().replace("nvidia", "").replace("_", " ").split())


def _compact(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", _norm(s))


def match_gpu(name: str) -> GPU | None:
    """Find a GPU by key, name, alias, or a device name as torch/NVML report it."""
    n = _norm(name)
    if not n or re.search(r"\b(laptop|mobile|max-q)\b", n):
        # "NVIDIA GeForce RTX 4090 Laptop GPU" is another chip (AD103, 576 GB/s)
        # under a desktop card's name: no row rather than the wrong one.
        return None
    c = _compact(name)
    for g in GPUS.values():
        if c in (_compact(g.key), _compact(g.name), *(_compact(a) for a in g.aliases)):
            return g
    # Device names like "NVIDIA H100 80GB HBM3": the longest name contained as
    # whole words wins (so "a10" never matches inside "a100-pcie").
    best = None
    for g in GPUS.values():
        for cand in (_norm(g.name), *(_norm(a) for a in g.aliases)):
            if cand and re.search(rf"(?<![a-z0-9]){re.escape(cand)}(?![a-z0-9])", n):
                if best is None or len(cand) > best[0]:
                    best = (len(cand), g)
    return best[1] if best else None


def known_names() -> str:
    """The names `match_gpu` knows, for error messages."""
    return ", ".join(f"{g.key} ({g.name})" for g in GPUS.values())


def format_value(gpu: GPU, name: str, *, flag_mark: bool = True) -> str:
    """A figure as a short string: "989", "50 ⚑", "–" when absent, "?" when unknown."""
    f = gpu.figures.get(name)
    if f is None:
        return "–"
    if f.value is None:
        text = "?"
    elif isinstance(f.value, float) and not f.value.is_integer():
        text = f"{f.value:,g}"  # "1,307.4" beside "1,979", not "1307.4"
    elif isinstance(f.value, (int, float)):
        text = f"{int(f.value):,}"
    else:
        text = str(f.value)
    return f"{text} ⚑" if f.flag and flag_mark else text
