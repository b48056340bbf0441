"""The load map: which elements each program loaded and stored, which lanes
were masked, and where a lane pointed out of range, drawn in a terminal.

Its data is a result's `load_map` (gpulab.judge.cost: the launches of a
wrong case run again in the replay's sandbox with per-element maps from
gpulab.sandbox.costcount), or what `gpulab debug`'s script counts. Every
field is checked before it is drawn: a results file may come from anywhere.

A tensor is drawn as its elements in rows (a 1-D tensor 64 to a row, a
2-D one a row of the tensor a line, a larger one as 2-D over its last
dimension), one character an element:

    0-9 a-z A-Z   the program that touched it (its linear id; the 63rd is 0 again)
    +             several programs touched it
    -             no lane touched it, and a masked lane pointed at it
    .             no lane touched it at all

A wrong element of the result is drawn on red. Lanes that pointed outside
the tensor are listed under it, with their program. Rows with nothing of
note are left out when a tensor has many; the map keeps at most
MAX_ROWS of each.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

if TYPE_CHECKING:
    from gpulab.wire.protocol import JsonObject


GLYPHS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
COLORS = ("cyan", "green", "yellow", "magenta", "blue", "bright_white")
WIDTH = 64  # elements a row (a 1-D tensor), fits 80 columns with its index
MAX_ROWS = 10
MAX_TENSORS = 6

LEGEND = (
    "0-9a-z: the program that touched the element   +: several programs   "
    "-: a masked lane pointed here   .: no lane   red: wrong in the result"
)


class Access(TypedDict):
    """A tensor's loads or its stores, checked."""

    lanes: int
    masked: int
    out_of_range: list[list[int]]  # [program, element] of lanes that pointed outside
    out_of_range_lanes: int


class ElementMap(TypedDict):
    """Per element: the program that loaded and stored it (-1 none, -2 several),
    and which lanes masked it ("l", "s", "b" or " ")."""

    loaded: list[int]
    stored: list[int]
    masked: str


class TensorMap(TypedDict):
    name: str
    shape: list[int]
    elements: int
    dtype: str
    loads: Access
    stores: Access
    map: NotRequired[ElementMap]  # absent for a tensor too large to map


class LaunchMap(TypedDict):
    kernel: str
    grid: list[int]
    programs: int
    tensors: list[TensorMap]


class LoadMapJson(TypedDict):
    """A result's `load_map` as it is written: by the judge after a wrong case
    (gpulab.judge.cost), or by `gpulab debug`'s `case.load_map()`. `counts`
    are the interpreter's, per-element maps and all, as plain JSON
    (gpulab.sandbox.costcount.CountsJson), unchecked: `read` checks them."""

    case: str
    number: int
    counts: JsonObject
    wrong: list[list[int]]  # the indices of the wrong elements of the result


class LoadMap(TypedDict):
    """A result's `load_map`, checked (`read`): a LoadMapJson's counts read
    into at most 4 launches, `number` None where it had none, ready to draw."""

    case: str
    number: int | None
    launches: list[LaunchMap]
    wrong: list[list[int]]  # the indices of wrong elements of the result


def _obj(v: Any) -> JsonObject:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _str(v: Any, limit: int, default: str = "") -> str:
    return v[:limit] if isinstance(v, str) else default


def _int0(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _ints(v: Any, limit: int) -> list[int] | None:
    if not isinstance(v, list) or len(v) > limit:
        return None
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return None
    return v


def _shape(v: Any) -> list[int] | None:
    found = _ints(v, 8)
    return found if found is not None and all(0 <= x < 1 << 40 for x in found) else None


def read(rest: Any) -> LoadMap | None:
    """A result's `load_map`, checked field by field: {case, number,
    launches: [{kernel, grid, programs, tensors: [...]}], wrong}, or None."""
    raw = _obj(rest).get("load_map")
    if not isinstance(raw, dict):
        return None
    found = _obj(raw.get("counts")).get("launches")
    if not isinstance(found, list):
        return None
    launches: list[LaunchMap] = []
    for la in found[:4]:
        if not isinstance(la, dict):
            continue
        tensors = [t for t in (_tensor(t) for t in _list(la.get("tensors"))) if t is not None]
        launches.append(
            {
                "kernel": _str(la.get("kernel"), 60, "kernel"),
                "grid": _ints(la.get("grid"), 3) or [1],
                "programs": _int0(la.get("programs")),
                "tensors": tensors,
            }
        )
    number = _int0(raw.get("number"))
    return {
        "case": _str(raw.get("case"), 200),
        "number": number or None,
        "launches": launches,
        "wrong": [
            w for w in (_ints(w, 8) for w in _list(raw.get("wrong"))[:4096]) if w is not None
        ],
    }


def _tensor(t: Any) -> TensorMap | None:
    if not isinstance(t, dict):
        return None
    shape = _shape(t.get("shape"))
    n = t.get("elements")
    if shape is None or not isinstance(n, int) or n != math.prod(shape):
        return None
    out: TensorMap = {
        "name": _str(t.get("name"), 40, "?"),
        "shape": shape,
        "elements": n,
        "dtype": _str(t.get("dtype"), 12),
        "loads": _access(_obj(t.get("loads"))),
        "stores": _access(_obj(t.get("stores"))),
    }
    m = _obj(t.get("map"))
    if m:
        loaded = _ints(m.get("loaded"), 1 << 16)
        stored = _ints(m.get("stored"), 1 << 16)
        masked = _str(m.get("masked"), 1 << 16)
        ok = all(v is None or len(v) in (0, n) for v in (loaded, stored)) and len(masked) in (0, n)
        if ok:
            out["map"] = {"loaded": loaded or [], "stored": stored or [], "masked": masked}
    return out


def _access(acc: JsonObject) -> Access:
    return {
        "lanes": _int0(acc.get("lanes")),
        "masked": _int0(acc.get("masked_lanes")),
        "out_of_range": [
            b for b in (_ints(b, 2) for b in _list(acc.get("out_of_range"))[:16]) if b
        ],
        "out_of_range_lanes": _int0(acc.get("out_of_range_lanes")),
    }


# --- what the map says, in words -----------------------------------------------------


def facts(t: TensorMap, kind: str) -> list[str]:
    """Sentences about one tensor's loads or stores: how much of it the
    lanes covered, what was masked, what pointed outside it."""
    verb = "loaded" if kind == "loads" else "stored"
    acc = t["loads"] if kind == "loads" else t["stores"]
    out = []
    codes, masked = _codes(t, kind)
    if codes:
        touched = sum(1 for c in codes if c != -1)
        out.append(f"{t['name']}: {touched} of {t['elements']} elements {verb}")
        flag = "l" if kind == "loads" else "s"
        never = [
            i
            for i, c in enumerate(codes)
            if c == -1 and i < len(masked) and masked[i] in (flag, "b")
        ]
        if never:
            out.append(
                f"  never {verb}, a masked lane pointed there: {_indices(never, t['shape'])}"
            )
        several = [i for i, c in enumerate(codes) if c == -2]
        if several:
            out.append(f"  {verb} by several programs: {_indices(several, t['shape'])}")
    for program, offset in acc["out_of_range"][:4]:
        where = "before its start" if offset < 0 else "past its end"
        out.append(
            f"  program {program} {verb} element {offset} of {t['name']}, {where} "
            f"({t['elements']} elements): out of range"
        )
    extra = acc["out_of_range_lanes"] - min(4, len(acc["out_of_range"]))
    if extra > 0:
        out.append(f"  and {extra} more lanes out of range")
    return out


def _codes(t: TensorMap, kind: str) -> tuple[list[int], str]:
    """The tensor's per-element program codes for `kind` and its masked
    lanes' flags; empty where it has no map."""
    m = t.get("map")
    if m is None:
        return [], ""
    return (m["loaded"] if kind == "loads" else m["stored"]), m["masked"]


def _indices(flat: list[int], shape: list[int], limit: int = 6) -> str:
    shown = [_index(i, shape) for i in flat[:limit]]
    more = f" and {len(flat) - limit} more" if len(flat) > limit else ""
    return ", ".join(shown) + more


def _index(i: int, shape: list[int]) -> str:
    if len(shape) <= 1:
        return f"[{i}]"
    idx = []
    for dim in reversed(shape):
        idx.append(i % dim if dim else 0)
        i = i // dim if dim else 0
    return "[" + ", ".join(map(str, reversed(idx))) + "]"


# --- the picture -----------------------------------------------------------------------


def _grid_rows(t: TensorMap) -> tuple[int, int]:
    """(rows, columns) the tensor is drawn as."""
    shape, n = t["shape"], t["elements"]
    if len(shape) >= 2 and shape[-1] <= WIDTH:
        return n // max(1, shape[-1]), shape[-1]
    return math.ceil(n / WIDTH), WIDTH


def _wrong_flat(t: TensorMap, wrong: list[list[int]]) -> set[int]:
    shape = t["shape"]
    out = set()
    for idx in wrong:
        if len(idx) != len(shape) or not all(0 <= i < d for i, d in zip(idx, shape, strict=True)):
            continue
        flat = 0
        for i, d in zip(idx, shape, strict=True):
            flat = flat * d + i
        out.add(flat)
    return out


def tensor_picture(t: TensorMap, kind: str, wrong: set[int]) -> Any:
    """A rich Text: the tensor's elements, a character each (the module's
    docstring says which), with rows of nothing to note left out."""
    from rich.text import Text

    codes, masked = _codes(t, kind)
    flag = "l" if kind == "loads" else "s"
    rows, cols = _grid_rows(t)
    n = t["elements"]

    def note(i: int) -> bool:
        c = codes[i]
        return c in (-1, -2) or i in wrong

    keep: Any = range(rows)
    if rows > MAX_ROWS:
        # Rows with something wrong first, then rows where another program
        # starts (the tiling is seen), then the first and the last.
        marked = [
            r for r in range(rows) if any(note(i) for i in range(r * cols, min(n, (r + 1) * cols)))
        ]
        starts = [r for r in range(1, rows) if codes[r * cols] != codes[r * cols - 1]]
        chosen = {0, rows - 1, *marked[: MAX_ROWS - 2]}
        for r in starts:
            if len(chosen) >= MAX_ROWS:
                break
            chosen.add(r)
        keep = sorted(chosen)
    out = Text()
    label = 8 if len(t["shape"]) < 2 else 6
    last = -1
    for r in keep:
        if r < 0:
            continue
        if last >= 0 and r != last + 1:
            out.append(" " * label + "…\n", style="dim")
        last = r
        start = r * cols
        out.append(f"{start if len(t['shape']) < 2 else r:>{label - 2}}  ", style="dim")
        for i in range(start, min(n, start + cols)):
            c = codes[i]
            if c >= 0:
                ch, style = GLYPHS[c % len(GLYPHS)], COLORS[c % len(COLORS)]
            elif c == -2:
                ch, style = "+", "bold yellow"
            elif i < len(masked) and masked[i] in (flag, "b"):
                ch, style = "-", "dim"
            else:
                ch, style = ".", "dim"
            if i in wrong:
                style = "bold white on red"
            out.append(ch, style=style)
        out.append("\n")
    out.rstrip()
    return out


def launch_renderable(launch: JsonObject, wrong: list[list[int]] | None = None) -> Any:
    """One launch's map (gpulab.sandbox.counting.trace_launch's), drawn."""
    return renderable(
        {"load_map": {"counts": {"launches": [launch]}, "wrong": wrong or []}}, head=False
    )


def _signature(t: TensorMap, kind: str, wrong: set[int]) -> tuple[Any, ...] | None:
    """What a tensor's picture shows, to draw a repeated one once."""
    if not t.get("map"):
        return None
    codes, flags = _codes(t, kind)
    flag = "l" if kind == "loads" else "s"
    masked = tuple(c in (flag, "b") for c in flags)
    return (tuple(t["shape"]), tuple(codes), masked, tuple(sorted(wrong)))


def renderable(rest: Any, head: bool = True) -> Any:
    """The load map of a result (rich), or None where it has none."""
    found = read(rest)
    if found is None or not found["launches"]:
        return None
    from rich.console import Group
    from rich.text import Text

    parts: list[Any] = []
    if head:
        title = Text()
        title.append("Load map ", style="bold")
        number = f"case {found['number']}: " if found["number"] else ""
        title.append(f"{number}{found['case']}, what each program of your kernels touched")
        parts.append(title)
    drawn = 0
    seen: dict[tuple[Any, ...], str] = {}  # a picture drawn already -> whose
    for la in found["launches"]:
        grid = "×".join(str(g) for g in la["grid"] if g) or "1"
        parts.append(
            Text(f"{la['kernel']}: grid {grid}, {la['programs']} program(s)", style="bold")
        )
        for t in la["tensors"]:
            for kind in ("loads", "stores"):
                acc = t["loads"] if kind == "loads" else t["stores"]
                if not acc["lanes"] and not acc["masked"] and not acc["out_of_range"]:
                    continue
                verb = "loaded" if kind == "loads" else "stored"
                shape = "×".join(map(str, t["shape"])) or "1"
                wrong = _wrong_flat(t, found["wrong"]) if kind == "stores" else set()
                label = f"{t['name']} ({shape} {t['dtype']}) {verb}"
                key = _signature(t, kind, wrong)
                if key is not None and key in seen:
                    # x and y of a triad: one picture, said once.
                    parts.append(Text(f"{label}: as {seen[key]}", style="b"))
                    lines = facts(t, kind)[1:]
                elif t.get("map"):
                    parts.append(Text(f"{label}:", style="b"))
                    parts.append(tensor_picture(t, kind, wrong))
                    if key is not None:
                        seen[key] = f"{t['name']} {verb}"
                    drawn += 1
                    lines = facts(t, kind)
                else:
                    parts.append(Text(f"{label}:", style="b"))
                    parts.append(Text("  (too large to draw: the counts below only)", "dim"))
                    lines = facts(t, kind)
                for line in lines:
                    parts.append(Text(line, style="yellow" if "out of range" in line else ""))
                if drawn >= MAX_TENSORS:
                    break
    if drawn:
        parts.append(Text(LEGEND, style="dim"))
    return Group(*parts)
