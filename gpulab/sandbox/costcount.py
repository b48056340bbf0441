"""What Triton's interpreter saw a kernel do: bytes, sectors, FLOPs, programs,
and which elements each program loaded and stored.

`gpulab.sandbox.counting.counting()` wraps the interpreter's builder for as
long as it is open and counts here (`Counts`): every
`tl.load`/`tl.store` (masked lanes move nothing), every `tl.dot` (2·M·N·K),
the elementwise float arithmetic (one FLOP an element, an FMA two; exp, log,
sqrt and the like counted apart as special functions), and each program's
start. `Counts.to_json()` is plain JSON, per launch and per tensor argument:

- `bytes`: element bytes of the lanes that were not masked (what was asked);
- `sector_bytes`: 32 bytes for each distinct 32-byte sector one access (a
  `tl.load` or `tl.store` of one program) touched: what the memory system
  moves when nothing is cached from one access to the next;
- `warp_sector_bytes`: the same per warp-sized group of 32 lanes, and
  `min_sector_bytes` the fewest sectors those lanes could have touched
  (contiguous): their ratio says how the accesses coalesce;
- `footprint_bytes`: 32 bytes for each distinct sector over the whole launch
  (what even a perfect cache must bring once).

A warp-sized group is 32 consecutive elements of the block in row-major
order: how Triton's default blocked layout gives consecutive elements to
consecutive lanes. A model, not the compiled code's layout.

With `maps` on, for tensors of at most MAP_ELEMENTS elements it also keeps,
per element, which program loaded it and which stored it, the lanes that
pointed at it masked, and the first lanes that pointed outside every tensor
the launch was handed: the load map (gpulab.gpu.loadmap draws it).

It runs wherever kernels run in the interpreter: the replay's sandbox (the
kernels gpulab kept of the file, on the judge's inputs) and `gpulab debug`'s
script in the learner's own Python. Its numbers are advice; nothing grades
on them.
"""

from __future__ import annotations

import math
from typing import Any, NotRequired, TypedDict

from gpulab.wire.protocol import Kwargs

SECTOR = 32  # bytes: the unit DRAM and L2 move on NVIDIA GPUs since Volta
WARP = 32
MAP_ELEMENTS = 4096  # the largest tensor a load map keeps per element
OUT_OF_RANGE_KEPT = 16  # out-of-range lanes kept per tensor and access kind
MAX_LAUNCHES = 64  # launches a call may have and be counted (more: not estimated)
# Sector ids kept per tensor before they are merged into a unique set (memory).
MERGE_AT = 1 << 20

# Builder methods whose output elements each count one FLOP (float only);
# FMA counts two. Special functions run on the SFU, counted apart.
ARITH: tuple[str, ...] = ("create_fadd", "create_fsub", "create_fmul", "create_fdiv")
ARITH += ("create_frem", "create_precise_divf", "create_approx_divf", "create_minimumf")
ARITH += ("create_maximumf", "create_minnumf", "create_maxnumf")
SPECIAL: tuple[str, ...] = ("create_exp", "create_exp2", "create_log", "create_log2")
SPECIAL += ("create_sqrt", "create_precise_sqrt", "create_rsqrt", "create_sin", "create_cos")
SPECIAL += ("create_erf",)


# The counts' JSON, as the replay's sandbox sends it in its `replayed` reply
# (gpulab.wire.replay.Replayed.counts). The judge holds it as plain JSON and
# gpulab.gpu.costmodel and gpulab.gpu.loadmap read it field by field: these
# say what this side writes.


class AccessJson(TypedDict):
    """Loads or stores of one tensor in one launch (bytes, sectors, lanes)."""

    accesses: int
    lanes: int
    masked_lanes: int
    bytes: int
    sector_bytes: int
    warp_sector_bytes: int
    min_sector_bytes: int
    footprint_bytes: int
    out_of_range_lanes: NotRequired[int]
    out_of_range: NotRequired[list[list[int]]]  # [program, element offset]


class ProgramMap(TypedDict):
    """What one program's lanes touched: sorted flat element indices."""

    loaded: list[int]
    stored: list[int]
    masked: list[int]


class TensorMap(TypedDict):
    """Per element: the program that loaded or stored it (-1 none, -2
    several), the masked lanes' flags ("l", "s", "b", "."), and per program."""

    loaded: list[int]
    stored: list[int]
    masked: str
    programs: dict[str, ProgramMap]


class TensorJson(TypedDict):
    """A tensor argument of a launch: its layout and what the launch did to it."""

    name: str
    dtype: str
    shape: list[int]
    elements: int
    loads: AccessJson
    stores: AccessJson
    map: NotRequired[TensorMap]  # small contiguous tensors, where maps were asked


class LaunchJson(TypedDict):
    """One launch: its grid and programs, the FLOPs counted, and its tensors."""

    kernel: str
    grid: list[int]
    programs: int
    dot_flops: int
    flops: int
    special: int
    dots: list[list[int]]  # the first distinct (M, N, K) of its tl.dot calls
    tensors: list[TensorJson]


class CountsJson(TypedDict):
    """Every launch counted, and why counting stopped, if it did."""

    launches: list[LaunchJson]
    problem: NotRequired[str]


class _Access:
    """Loads or stores of one tensor in one launch."""

    def __init__(self) -> None:
        self.count = 0  # tl.load / tl.store calls
        self.lanes = 0  # lanes active (not masked)
        self.masked = 0  # lanes masked off
        self.bytes = 0
        self.sectors = 0  # distinct sectors of each access, summed
        self.warp_sectors = 0  # distinct sectors of each warp-sized group, summed
        self.min_sectors = 0  # the fewest the same groups could touch
        self.seen: list[Any] = []  # numpy arrays of sector ids, merged now and then
        self.seen_size = 0
        self.unique: Any = None
        # Per element (maps only): the program that touched it, -1 none, -2 several;
        # and masked lanes that pointed at it.
        self.program: Any = None
        self.masked_at: Any = None
        # Per program (maps only): the elements its lanes touched, and those
        # its masked lanes pointed at (what a puzzle shows, program by program).
        self.by_program: dict[int, tuple[set[int], set[int]]] = {}
        self.out_of_range: list[list[int]] = []  # [program, element offset]
        self.out_of_range_lanes = 0

    def footprint(self) -> int:
        import numpy as np

        self._merge()
        return 0 if self.unique is None else int(np.asarray(self.unique).size)

    def add_sectors(self, ids: Any) -> None:
        self.seen.append(ids)
        self.seen_size += int(ids.size)
        if self.seen_size >= MERGE_AT:
            self._merge()

    def _merge(self) -> None:
        import numpy as np

        if not self.seen:
            return
        parts = self.seen if self.unique is None else [self.unique, *self.seen]
        self.unique = np.unique(np.concatenate(parts))
        self.seen, self.seen_size = [], 0

    def to_json(self, itemsize: int) -> AccessJson:
        out: AccessJson = {
            "accesses": self.count,
            "lanes": self.lanes,
            "masked_lanes": self.masked,
            "bytes": self.bytes,
            "sector_bytes": self.sectors * SECTOR,
            "warp_sector_bytes": self.warp_sectors * SECTOR,
            "min_sector_bytes": self.min_sectors * SECTOR,
            "footprint_bytes": self.footprint() * SECTOR,
        }
        if self.out_of_range_lanes:
            out["out_of_range_lanes"] = self.out_of_range_lanes
            out["out_of_range"] = self.out_of_range
        return out


class _Tensor:
    """A tensor argument of a launch: where its storage lies."""

    def __init__(self, name: str, t: Any) -> None:
        self.name = name
        self.itemsize = int(t.element_size())
        self.ptr = int(t.data_ptr())
        # The view's own extent, not its storage's: two inputs may be views
        # of one buffer (the triad's x and y are), and a lane past the end
        # of x that reads y's first element is out of x's range all the same.
        span = sum((int(n) - 1) * int(s) for n, s in zip(t.shape, t.stride(), strict=True))
        self.start = self.ptr
        self.end = self.ptr + ((span + 1) * self.itemsize if t.numel() else 0)
        self.numel = int(t.numel())
        self.shape = [int(s) for s in t.shape]
        self.contiguous = bool(t.is_contiguous())
        self.dtype = str(t.dtype).replace("torch.", "")
        self.loads = _Access()
        self.stores = _Access()

    def to_json(self, maps: bool) -> TensorJson:
        out: TensorJson = {
            "name": self.name,
            "dtype": self.dtype,
            "shape": self.shape,
            "elements": self.numel,
            "loads": self.loads.to_json(self.itemsize),
            "stores": self.stores.to_json(self.itemsize),
        }
        if maps and self.mappable():
            out["map"] = {
                "loaded": _codes(self.loads.program),
                "stored": _codes(self.stores.program),
                "masked": _flags(self.loads.masked_at, self.stores.masked_at),
                "programs": _by_program(self.loads.by_program, self.stores.by_program),
            }
        return out

    def mappable(self) -> bool:
        return self.contiguous and 0 < self.numel <= MAP_ELEMENTS


def _codes(a: Any) -> list[int]:
    return [] if a is None else [int(v) for v in a]


def _by_program(
    loads: dict[int, tuple[set[int], set[int]]], stores: dict[int, tuple[set[int], set[int]]]
) -> dict[str, ProgramMap]:
    """{program: {"loaded", "stored", "masked"}}: each a sorted list of flat
    element indices (masked: lanes of either kind that pointed there masked)."""
    out: dict[str, ProgramMap] = {}
    for pid in sorted({*loads, *stores}):
        got, skipped = loads.get(pid, (set(), set()))
        put, held = stores.get(pid, (set(), set()))
        out[str(pid)] = {
            "loaded": sorted(got),
            "stored": sorted(put),
            "masked": sorted(skipped | held),
        }
    return out


def _flags(loads: Any, stores: Any) -> str:
    """Per element: "l" a load lane was masked there, "s" a store's, "b" both, "." none."""
    if loads is None and stores is None:
        return ""
    n = len(loads if loads is not None else stores)
    out = []
    for i in range(n):
        lm = loads is not None and bool(loads[i])
        sm = stores is not None and bool(stores[i])
        out.append("b" if lm and sm else "l" if lm else "s" if sm else ".")
    return "".join(out)


class _Launch:
    def __init__(self, kernel: str, tensors: list[_Tensor], maps: bool) -> None:
        self.kernel = kernel
        self.tensors = tensors
        self.maps = maps
        self.grid = [1, 1, 1]
        self.programs = 0
        self.program = 0  # the running program's linear id
        self.dot_flops = 0
        self.flops = 0
        self.special = 0
        self.dots: list[list[int]] = []  # distinct (M, N, K) of the tl.dot calls

    def to_json(self) -> LaunchJson:
        return {
            "kernel": self.kernel,
            "grid": self.grid,
            "programs": self.programs,
            "dot_flops": self.dot_flops,
            "flops": self.flops,
            "special": self.special,
            "dots": self.dots[:8],
            "tensors": [t.to_json(self.maps) for t in self.tensors],
        }


class Counts:
    """Everything counted while `counting()` was open, launch by launch."""

    def __init__(self, maps: bool = False) -> None:
        self.maps = maps
        self.launches: list[_Launch] = []
        self.current: _Launch | None = None
        self.problem = ""  # why counting stopped ("": it did not)

    def to_json(self) -> CountsJson:
        out: CountsJson = {"launches": [la.to_json() for la in self.launches]}
        if self.problem:
            out["problem"] = self.problem
        return out

    # --- called by the patched interpreter -------------------------------------------
    def begin(self, kernel: str, named: Kwargs, grid_dim: Any = None) -> None:
        if len(self.launches) >= MAX_LAUNCHES:
            # A call of that many launches (a kernel a few elements at a time)
            # is not estimated: counting them all cost a check minutes.
            self.problem = f"more than {MAX_LAUNCHES} launches in one call: not counted"
            self.current = None
            return
        tensors = []
        for name, value in named.items():
            base = getattr(value, "base", None)  # a TensorDescriptor's tensor
            t = value if hasattr(value, "data_ptr") else base
            if t is not None and hasattr(t, "data_ptr") and hasattr(t, "stride"):
                tensors.append(_Tensor(name, t))
        self.current = _Launch(kernel, tensors, self.maps)
        self.launches.append(self.current)

    def program(self, x: int, y: int, z: int, dims: Any) -> None:
        la = self.current
        if la is None:
            return
        la.grid = [int(d) for d in dims]
        la.programs += 1
        la.program = x + y * la.grid[0] + z * la.grid[0] * la.grid[1]

    def safely(self, step: Any, *args: Any) -> None:
        """Count, or, where counting fails, stop counting and say why: the
        kernel runs on untouched either way (a count is advice, the replay
        that carries it is not)."""
        if self.problem:
            return
        try:
            step(*args)
        except Exception as exc:  # noqa: BLE001 - reported in to_json, never raised
            self.problem = f"{type(exc).__name__}: {str(exc)[:200]}"
            self.current = None

    def access(self, kind: str, ptr_handle: Any, mask_handle: Any) -> None:
        import numpy as np

        la = self.current
        if la is None:
            return
        ptrs, itemsize = ptr_handle.data, _itemsize(ptr_handle)
        mask = None if mask_handle is None else mask_handle.data
        addrs = np.asarray(ptrs).astype(np.uint64, copy=False).reshape(-1)
        if mask is None:
            active = np.ones(addrs.shape, dtype=bool)
        else:
            active = np.asarray(mask, dtype=bool)
            if active.shape != np.shape(ptrs):
                active = np.broadcast_to(active, np.shape(ptrs))
            active = active.reshape(-1)
        # The tensor an access reads is the one its live lanes point into:
        # masked lanes belong to it too, wherever they point (x's masked tail
        # lies on y's first elements when both are views of one buffer).
        live = addrs[active] if active.any() else addrs
        owner = self._owners(la, live)
        if isinstance(owner, int):  # one tensor (the common case)
            if owner >= 0:
                self._count(la, la.tensors[owner], kind, addrs, active, itemsize)
            return
        whole = np.full(addrs.shape, owner[0], dtype=np.int64)
        whole[active] = owner
        owner = whole
        for index in np.unique(owner):
            if index >= 0:
                mine = owner == index
                self._count(la, la.tensors[index], kind, addrs[mine], active[mine], itemsize)

    def _owners(self, la: _Launch, addrs: Any) -> Any:
        """The index of the tensor whose view holds every address, or per
        address: the tensor whose view holds it, else the nearest tensor that
        starts below it (the one a lane walked past the end of), else -1."""
        import numpy as np

        if not la.tensors or not addrs.size:
            return -1
        lo, hi = int(addrs.min()), int(addrs.max())
        for i, t in enumerate(la.tensors):
            if t.start <= lo and hi < t.end:
                return i
        starts = np.array([t.start for t in la.tensors], dtype=np.uint64)
        order = np.argsort(starts)
        found = np.searchsorted(starts[order], addrs, side="right") - 1
        owner = np.where(found >= 0, order[np.maximum(found, 0)], -1).astype(np.int64)
        for i, t in reversed(list(enumerate(la.tensors))):  # views that interleave
            owner[(addrs >= t.start) & (addrs < t.end)] = i
        return owner

    def _count(
        self, la: _Launch, t: _Tensor, kind: str, addrs: Any, active: Any, itemsize: int
    ) -> None:
        import numpy as np

        acc = t.loads if kind == "load" else t.stores
        acc.count += 1
        lanes = int(np.count_nonzero(active))
        acc.lanes += lanes
        acc.masked += int(active.size - lanes)
        inside = (addrs >= t.start) & (addrs < t.end)
        bad = active & ~inside
        if bad.any():
            acc.out_of_range_lanes += int(np.count_nonzero(bad))
            room = OUT_OF_RANGE_KEPT - len(acc.out_of_range)
            if room > 0:
                offs = (addrs[bad][:room].astype(np.int64) - t.ptr) // t.itemsize
                acc.out_of_range.extend([[la.program, int(o)] for o in offs])
        acc.bytes += lanes * itemsize
        if lanes:
            sec = (addrs // np.uint64(SECTOR)).astype(np.int64)
            distinct, least = _sectors(sec, active, itemsize)
            acc.warp_sectors += distinct
            acc.min_sectors += least
            mine = sec[active]
            # Neighbouring lanes share sectors: drop repeats before keeping them.
            keep = np.empty(mine.size, dtype=bool)
            keep[0] = True
            np.not_equal(mine[1:], mine[:-1], out=keep[1:])
            fresh = mine[keep]
            # What this access brings in: each sector once, whichever warps
            # of the program share it (they meet in L1/L2 within the access).
            ordered = fresh.size < 2 or bool((fresh[1:] > fresh[:-1]).all())
            acc.sectors += int(fresh.size if ordered else np.unique(fresh).size)
            acc.add_sectors(fresh)
        if la.maps and t.mappable():
            self._map(la, t, acc, addrs, active, inside)

    @staticmethod
    def _map(la: _Launch, t: _Tensor, acc: _Access, addrs: Any, active: Any, inside: Any) -> None:
        import numpy as np

        if acc.program is None:
            acc.program = np.full(t.numel, -1, dtype=np.int64)
            acc.masked_at = np.zeros(t.numel, dtype=bool)
        offs = (addrs.astype(np.int64) - t.ptr) // t.itemsize
        in_view = inside & (offs >= 0) & (offs < t.numel)
        hit = offs[active & in_view]
        if hit.size:
            prev = acc.program[hit]
            acc.program[hit] = np.where((prev == -1) | (prev == la.program), la.program, -2)
        masked = offs[~active & in_view]
        acc.masked_at[masked] = True
        mine = acc.by_program.setdefault(la.program, (set(), set()))
        mine[0].update(hit.tolist())
        mine[1].update(masked.tolist())

    def dot(self, a_shape: Any, b_shape: Any) -> None:
        la = self.current
        if la is None or len(a_shape) < 2 or len(b_shape) < 2:
            return
        m, k = int(a_shape[-2]), int(a_shape[-1])
        n = int(b_shape[-1])
        batch = math.prod(int(s) for s in a_shape[:-2])
        la.dot_flops += 2 * m * n * k * batch
        if [m, n, k] not in la.dots:
            la.dots.append([m, n, k])

    def arith(self, elements: int, flops: int = 1, special: bool = False) -> None:
        la = self.current
        if la is None:
            return
        if special:
            la.special += elements
        else:
            la.flops += elements * flops


_PAST = 1 << 62  # a masked lane's sector id: after every real one


def _sectors(sec: Any, active: Any, itemsize: int) -> tuple[int, int]:
    """(distinct sectors, fewest possible) summed over warp-sized groups of
    consecutive lanes. Rows whose sector ids never go down (contiguous or
    strided forward, masked lanes last) are counted without sorting."""
    import numpy as np

    ids = np.where(active, sec, _PAST)
    pad = (-ids.size) % WARP
    if pad:
        ids = np.concatenate([ids, np.full(pad, _PAST, dtype=np.int64)])
    rows = ids.reshape(-1, WARP)
    step = np.diff(rows, axis=1)
    down = (step < 0).any(axis=1)
    if down.any():
        rows = rows.copy()
        rows[down] = np.sort(rows[down], axis=1)
        step = np.diff(rows, axis=1)
    valid = rows != _PAST
    distinct = int(np.count_nonzero((step != 0) & valid[:, 1:]) + np.count_nonzero(valid[:, 0]))
    per_row = np.count_nonzero(valid, axis=1)
    least = int(((per_row * itemsize + SECTOR - 1) // SECTOR).sum())
    return distinct, least


def _itemsize(ptrs: Any) -> int:
    """Bytes of one element a pointer points at (an int1 is stored in a byte)."""
    ty = ptrs.get_element_ty()
    return max(1, int(getattr(ty, "primitive_bitwidth", 8)) // 8)
