"""Kernel launches, recorded where the learner's code runs and run again
where it does not.

`Recording` (in the check's sandbox) writes down each Triton launch of a
guarded call: which kernel, its grid, its arguments, and each buffer the
first time a launch is handed it (a memory it got from the judge, a
constant fill, or its bytes). That record is the sandbox's claim, so the
judge does not believe it: it runs the launches again (`replay`) in a
sandbox of their own that never imports the learner's file, with only the
file's kernels as gpulab.sandbox.replay_source keeps them, on the judge's
own inputs, and compares what comes out with its reference. A record that
leaves out the real work, or a buffer the wrapper filled with the answer,
then gives a wrong answer there (gpulab.judge.replay decides which
recorded bytes the replay may use).
"""

from __future__ import annotations

import base64
import math
import os
import tempfile
from typing import Any

import torch

from gpulab.check.frames_other import Replayed, ReplayRequest

MAX_LAUNCHES = 512  # a call's launches recorded; more and the call cannot be replayed
MAX_SNAPSHOT_BYTES = 8 << 20  # recorded buffer bytes a call may send (CPU sizes)
DTYPES = {
    str(d).replace("torch.", ""): d
    for d in (
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.uint8,
        torch.bool,
    )
}


def _float(v: float) -> dict[str, str]:
    return {"__float__": float(v).hex()}


class Recording:
    """What one guarded call launched (see the module's docstring)."""

    def __init__(self, arenas: dict[int, Any]) -> None:
        self.bases = []
        for ident, arena in arenas.items():
            whole = arena.whole()
            self.bases.append((ident, whole.data_ptr(), whole.numel()))
        self.buffers: list[dict[str, Any]] = []
        self.index: dict[int, int] = {}  # storage address -> buffer number
        # Each recorded storage, held until the call ends: a freed one's
        # address handed to a new tensor would otherwise read as the old
        # buffer (its first contents, and what the launches left there).
        self.keep: list[Any] = []
        self.launches: list[dict[str, Any]] = []
        self.snapshot_bytes = 0
        self.overflow = ""

    def launch(self, jit_fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        import inspect

        if kwargs.get("warmup"):
            return
        if len(self.launches) >= MAX_LAUNCHES:
            self.overflow = f"more than {MAX_LAUNCHES} kernel launches in one call"
            return
        fn = getattr(jit_fn, "fn", None)
        if not callable(fn) or not hasattr(fn, "__code__"):
            self.launches.append({"kernel": None, "what": type(jit_fn).__name__})
            return
        try:
            spec = inspect.getfullargspec(fn)
            kw = {k: v for k, v in kwargs.items() if k in spec.args or k in spec.kwonlyargs}
            bound = inspect.getcallargs(fn, *args, **kw)
            grid: Any = kwargs.get("grid")
            grid = grid(bound) if callable(grid) else grid
            grid = [int(g) for g in grid]
        except Exception as exc:  # noqa: BLE001 - the launch itself will say
            self.launches.append({"kernel": fn.__name__, "error": f"{type(exc).__name__}: {exc}"})
            return
        self.launches.append(
            {
                "kernel": fn.__name__,
                "qualname": getattr(fn, "__qualname__", ""),
                "file": fn.__code__.co_filename,
                "grid": grid,
                "args": {name: self.value(v) for name, v in bound.items()},
            }
        )

    def value(self, v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return {
                "__buf__": [
                    self.buffer(v),
                    v.storage_offset(),
                    list(v.shape),
                    list(v.stride()),
                    str(v.dtype).replace("torch.", ""),
                ]
            }
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        if isinstance(v, int):
            return v
        if isinstance(v, float):
            return _float(v)
        import triton.language as tl

        if isinstance(v, tl.constexpr):
            return self.value(v.value)
        if isinstance(v, tl.dtype):
            return {"__tl_dtype__": v.name}
        return {"__unsupported__": type(v).__name__}

    def buffer(self, t: torch.Tensor) -> int:
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr in self.index:
            return self.index[ptr]
        entry: dict[str, Any] = {"nbytes": st.nbytes(), "dtype": str(t.dtype).replace("torch.", "")}
        for ident, base, size in self.bases:
            if base <= ptr < base + size:
                entry["arena"] = [ident, ptr - base]
                break
        else:
            entry.update(self.contents(t, st))
        self.index[ptr] = len(self.buffers)
        self.buffers.append(entry)
        self.keep.append(st)
        return self.index[ptr]

    def contents(self, t: torch.Tensor, st: Any) -> dict[str, Any]:
        """The buffer as the first launch handed it finds it. Read through
        ctypes, not torch: a torch op here would be one the audit sees."""
        import ctypes

        if t.device.type != "cpu":
            return {"unknown": True}
        nbytes = st.nbytes()
        if nbytes == 0:
            return {"fill": ""}
        data = ctypes.string_at(st.data_ptr(), nbytes)
        size = t.element_size()
        if nbytes % size == 0 and data == data[:size] * (nbytes // size):
            return {"fill": data[:size].hex()}
        if self.snapshot_bytes + nbytes > MAX_SNAPSHOT_BYTES:
            return {"unknown": True}
        self.snapshot_bytes += nbytes
        return {"bytes": base64.b64encode(data).decode("ascii")}

    def result(self, out: Any) -> dict[str, Any]:
        rec: dict[str, Any] = {"buffers": self.buffers, "launches": self.launches}
        self.keep.clear()
        if self.overflow:
            rec["overflow"] = self.overflow
        if isinstance(out, torch.Tensor):
            ptr = out.untyped_storage().data_ptr()
            rec["out"] = (
                [
                    self.index[ptr],
                    out.storage_offset(),
                    list(out.shape),
                    list(out.stride()),
                    str(out.dtype).replace("torch.", ""),
                ]
                if ptr in self.index
                else None
            )
        return rec


# --- the replay's own sandbox ---------------------------------------------------


def _decode(v: Any, buffers: list[torch.Tensor]) -> Any:
    if isinstance(v, dict):
        if "__buf__" in v:
            return _view(buffers, v["__buf__"])
        if "__float__" in v:
            return float.fromhex(v["__float__"])
        if "__tl_dtype__" in v:
            import triton.language as tl

            return tl.dtype(str(v["__tl_dtype__"]))
        raise ValueError(f"an argument of type {v.get('__unsupported__', '?')}")
    return v


def _view(buffers: list[torch.Tensor], spec: list[Any]) -> torch.Tensor:
    index, offset, shape, stride, dtype = spec
    raw = buffers[int(index)]
    typed = raw.view(DTYPES[str(dtype)])
    return torch.as_strided(typed, [int(s) for s in shape], [int(s) for s in stride], int(offset))


def _buffers(server: Any, specs: list[dict[str, Any]]) -> list[torch.Tensor]:
    out = []
    for spec in specs:
        nbytes = int(spec["nbytes"])
        buf = torch.full((nbytes,), 0xFF, dtype=torch.uint8)  # NaN, -1: never an answer
        if "input" in spec:  # the judge's own copy of an input's whole storage
            ident, offset, size = (int(v) for v in spec["input"])
            buf.copy_(server.arenas[ident].storage(offset, size)[:nbytes])
        elif "fill" in spec:
            pattern = bytes.fromhex(spec["fill"])
            if pattern:
                reps = torch.tensor(list(pattern), dtype=torch.uint8)
                buf.copy_(reps.repeat(math.ceil(nbytes / len(pattern)))[:nbytes])
        elif "bytes" in spec:
            data = base64.b64decode(spec["bytes"])
            buf.copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8)[:nbytes])
        out.append(buf)  # anything else: bytes the replay may not trust
    return out


def kernels(text: str, modules: dict[str, str], names: list[str]) -> dict[str, Any]:
    """The kept kernels, made into Triton functions from their own file (the
    interpreter and the JIT both read a kernel's source back from it)."""
    from gpulab.sandbox.replay_source import ReplaySource, namespace

    src = ReplaySource(text=text, kernels=tuple(names), modules=modules, problems={})
    folder = tempfile.mkdtemp(prefix="gpulab-replay-")
    path = os.path.join(folder, "kernels.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    g = namespace(src)
    exec(compile(text, path, "exec"), g)  # noqa: S102 - text checked by replay_source
    return {name: g[name] for name in names if name in g}


def replay(server: Any, msg: ReplayRequest) -> Replayed:
    """Run the recorded launches and copy the result into the judge's slot."""
    from gpulab.sandbox.tensors import view

    found = kernels(msg.source, msg.modules, list(msg.kernels))
    buffers = _buffers(server, msg.buffers)
    for i, launch in enumerate(msg.launches):
        kernel = found.get(launch["kernel"])
        if kernel is None:
            return Replayed(f"launch {i + 1}: no kernel {launch['kernel']}")
        args = {k: _decode(v, buffers) for k, v in launch["args"].items()}
        try:
            kernel[tuple(int(g) for g in launch["grid"])](**args)
        except Exception as exc:  # noqa: BLE001 - reported to the judge
            return Replayed(
                f"launch {i + 1} of {launch['kernel']}: {type(exc).__name__}: {str(exc)[:400]}"
            )
    slot = view(server.arenas, msg.slot)
    result = _view(buffers, msg.out)
    if tuple(result.shape) != tuple(slot.shape) or result.dtype != slot.dtype:
        return Replayed("the result has another shape or dtype")
    slot.copy_(result)
    return Replayed("")
