"""Honesty guards around a graded call (see ../shared/guide/GRADING.md).

- `OpGuard`: a TorchFunctionMode plus a TorchDispatchMode that record any call
  of the op being replaced (torch.softmax, torch.matmul, ...), however it is
  reached, and poison every buffer the learner allocates with torch.empty*
  (NaN for floats), so elements the kernel never writes cannot pass.
- `LaunchRecorder`: wraps Triton's launch path to record every kernel launch,
  the tensors passed to it and the CUDA stream it went to. A result must live
  in memory that a Triton kernel launched by the learner's code was handed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

_EMPTY_FNS = {torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty,
              torch.Tensor.new_empty_strided}


def _poison(t: Any) -> None:
    if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel():
        t.fill_(float("nan"))
    elif isinstance(t, torch.Tensor) and t.numel() and not t.is_complex() and t.dtype != torch.bool:
        t.fill_(-123456789 if t.element_size() >= 4 else -1)


@dataclass
class Violations:
    banned: list[str] = field(default_factory=list)


class _FunctionGuard(TorchFunctionMode):
    def __init__(self, banned: set[Any], names: dict[Any, str], v: Violations, poison: bool):
        super().__init__()
        self.banned, self.names, self.v, self.poison = banned, names, v, poison

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.banned:
            self.v.banned.append(self.names.get(func, getattr(func, "__name__", str(func))))
        out = func(*args, **kwargs)
        if self.poison and func in _EMPTY_FNS:
            with torch.no_grad():
                _poison(out)
        return out


class _DispatchGuard(TorchDispatchMode):
    def __init__(self, banned_aten: set[str], v: Violations,
                 banned_large: set[str] = frozenset(), large_numel: int = 4096):
        super().__init__()
        self.banned_aten, self.v = banned_aten, v
        self.banned_large, self.large_numel = banned_large, large_numel

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
        if name in self.banned_aten:
            self.v.banned.append(f"aten.{name}")
        elif name in self.banned_large and any(
                isinstance(a, torch.Tensor) and a.numel() >= self.large_numel
                for a in list(args) + list((kwargs or {}).values())):
            # Elementwise maths on whole operands: the exercise's work done by
            # torch (small tensors, e.g. an autotuner's timing statistics, pass).
            self.v.banned.append(f"aten.{name} on a large tensor")
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def op_guard(banned: Iterable[Any] = (), banned_aten: Iterable[str] = (),
             poison: bool = True, banned_large: Iterable[str] = (),
             large_numel: int = 4096) -> Iterator[Violations]:
    """Record banned ops (by torch callable and by aten name) and poison empties."""
    banned = set(banned)
    names = {f: f"{getattr(f, '__module__', '') or 'torch'}.{getattr(f, '__name__', f)}"
             .replace("torch._C._VariableFunctions", "torch").replace("torch._C.TensorBase",
                                                                      "Tensor")
             for f in banned}
    v = Violations()
    with _FunctionGuard(banned, names, v, poison), _DispatchGuard(
            set(banned_aten), v, set(banned_large), large_numel):
        yield v


@dataclass
class Launch:
    kernel: str
    storages: set[int]
    stream: int | None


class LaunchRecorder:
    """Records Triton launches while active (compiled and interpreted paths)."""

    def __init__(self) -> None:
        self.launches: list[Launch] = []
        self._patched: list[tuple[type, Any]] = []

    def _wrap(self, cls: type) -> None:
        original = cls.run
        recorder = self

        def run(self_fn, *args, **kwargs):
            recorder._record(self_fn, args, kwargs)
            return original(self_fn, *args, **kwargs)

        cls.run = run
        self._patched.append((cls, original))

    def _record(self, fn: Any, args: tuple, kwargs: dict) -> None:
        storages = set()
        for a in list(args) + list(kwargs.values()):
            # A TMA TensorDescriptor (triton.tools.tensor_descriptor) carries
            # its tensor as `.base`: a kernel writing through it writes there.
            base = getattr(a, "base", None)
            if not isinstance(a, torch.Tensor) and isinstance(base, torch.Tensor):
                a = base
            if isinstance(a, torch.Tensor):
                storages.add(a.untyped_storage().data_ptr())
        stream = None
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            stream = torch.cuda.current_stream().cuda_stream
        name = getattr(getattr(fn, "fn", fn), "__name__", type(fn).__name__)
        self.launches.append(Launch(name, storages, stream))

    def __enter__(self) -> LaunchRecorder:
        from triton.runtime import jit

        self._wrap(jit.JITFunction)
        try:
            from triton.runtime.interpreter import InterpretedFunction

            self._wrap(InterpretedFunction)
        except ImportError:  # pragma: no cover - older Triton
            pass
        return self

    def __exit__(self, *exc: object) -> None:
        for cls, original in reversed(self._patched):
            cls.run = original
        self._patched.clear()

    def wrote(self, t: torch.Tensor) -> bool:
        ptr = t.untyped_storage().data_ptr()
        return any(ptr in launch.storages for launch in self.launches)

    def side_streams(self) -> set[int]:
        if not torch.cuda.is_available():
            return set()
        default = torch.cuda.current_stream().cuda_stream
        return {launch.stream for launch in self.launches if launch.stream not in (None, default)}


def tamper_snapshot() -> dict[str, Any]:
    """Identities of the functions a timing depends on, to detect monkeypatching."""
    import time

    snap = {"time.perf_counter": time.perf_counter, "time.time": time.time,
            "torch.cuda.synchronize": torch.cuda.synchronize,
            "Event.elapsed_time": torch.cuda.Event.elapsed_time,
            "Event.record": torch.cuda.Event.record,
            "Event.synchronize": torch.cuda.Event.synchronize}
    return snap


def tampered(before: dict[str, Any]) -> list[str]:
    now = tamper_snapshot()
    return [k for k, v in before.items() if now[k] is not v]


_WATCHED_TORCH = {
    "softmax", "log_softmax", "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "exp",
    "exp2", "sum", "max", "amax", "mean", "rsqrt", "sqrt", "allclose", "isclose", "equal",
    "isnan", "isinf", "where", "randn", "rand", "randint", "empty", "empty_like", "zeros",
    "zeros_like", "ones", "cat", "stack", "abs", "sign", "tensor", "as_strided", "Generator",
}


def _watched_namespaces() -> list[tuple[str, dict]]:
    """The namespaces whose entries a learner could swap to fool the grader:
    torch's reference ops (a patched torch.softmax would make the reference
    agree with anything) and gpulab's own grading code."""
    import sys
    import time

    import torch.nn.functional as F

    # torch's top level is curated: some of its entries are legitimately
    # rewrapped on first use (torch._dynamo wraps torch.manual_seed).
    top = {k: v for k, v in vars(torch).items() if k in _WATCHED_TORCH}
    spaces = [("torch", top), ("torch.Tensor", vars(torch.Tensor)),
              ("torch.nn.functional", vars(F)), ("torch.cuda", vars(torch.cuda)),
              ("torch.cuda.Event", vars(torch.cuda.Event)), ("time", vars(time))]
    for name, mod in list(sys.modules.items()):
        if name.startswith("gpulab.grading") and mod is not None:
            spaces.append((name, vars(mod)))
            for attr, obj in list(vars(mod).items()):
                if isinstance(obj, type) and obj.__module__ == name:
                    spaces.append((f"{name}.{attr}", vars(obj)))
    return spaces


def namespace_snapshot() -> dict[str, dict[str, int]]:
    return {label: {k: id(v) for k, v in ns.items() if callable(v) or isinstance(v, type)}
            for label, ns in _watched_namespaces()}


def namespace_changes(before: dict[str, dict[str, int]]) -> list[str]:
    """Names that now point at a different object than in `before`."""
    changed = []
    for label, ns in _watched_namespaces():
        old = before.get(label)
        if old is None:
            continue
        for k, ident in old.items():
            if k in ns and id(ns[k]) != ident:
                changed.append(f"{label}.{k}")
    return changed
