"""Guards around a graded call, in the sandbox: the friendly first line.

They catch honest mistakes and casual shortcuts (torch's own op on the
graded path, a result no kernel wrote) with a clear message. They run in the
learner's process, so a learner who tries can switch them off: the grade
rests on the judge's checks (docs/grading.md), never on these.

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
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from gpulab.sandbox.audit import WRAPPER_OPS, own
from gpulab.wire.protocol import Kwargs

_EMPTY_FNS = {
    torch.empty,
    torch.empty_like,
    torch.empty_strided,
    torch.Tensor.new_empty,
    torch.Tensor.new_empty_strided,
}


def _poison(t: Any) -> None:
    with own():
        _poison_now(t)


def _poison_now(t: Any) -> None:
    if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel():
        t.fill_(float("nan"))
    elif isinstance(t, torch.Tensor) and t.numel() and not t.is_complex() and t.dtype != torch.bool:
        t.fill_(-123456789 if t.element_size() >= 4 else -1)


@dataclass
class Violations:
    banned: list[str] = field(default_factory=list)
    # (canary view, what it held) behind each contiguous buffer the code
    # allocated, to see a kernel store past the end (a mask of `<=` for `<`).
    canaries: list[tuple[Any, Any]] = field(default_factory=list)

    def overruns(self) -> int:
        return sum(1 for view, want in self.canaries if not _same(view, want))


def _same(view: Any, want: Any) -> bool:
    """Whether a canary still holds its pattern. One torch cannot compare (a
    buffer allocated on the meta device, or of a dtype such as complex32
    that has no `equal`) counts as kept: the comparison's error used to end
    the call as "the sandbox failed", a gpulab traceback for the learner's
    allocation, before the judge could say what was wrong with the result."""
    try:
        return bool(torch.equal(view, want))
    except (RuntimeError, NotImplementedError):
        return True


# Elements kept after each buffer: a whole 64 x 64 tile, or four blocks of
# 1024 lanes. A store past the end lands in the canary and is named ("wrote
# past the end of a buffer"); one that went further, in the interpreter,
# wrote over the sandbox's own heap and crashed it with a malloc error
# (lesson 01's puzzles, a 2-D tile with one mask of two: 64 elements caught
# only stores a block's last row ran past).
CANARY = 4096


def _with_canary(func: Any, args: tuple[Any, ...], kwargs: Kwargs, v: Violations) -> Any:
    """torch.empty / empty_like of a contiguous tensor, carved from a larger
    buffer whose tail holds a pattern; None where that does not apply."""
    if func is torch.empty_like and args and isinstance(args[0], torch.Tensor):
        like = args[0]
        if (
            kwargs.get("memory_format")
            not in (None, torch.contiguous_format, torch.preserve_format)
            or not like.is_contiguous()
        ):
            return None
        shape, dtype = tuple(like.shape), kwargs.get("dtype") or like.dtype
        device = kwargs.get("device") or like.device
    elif (
        func is torch.empty
        and args
        and not kwargs.get("out")
        and kwargs.get("memory_format") in (None, torch.contiguous_format)
    ):
        shape = (
            tuple(args[0])
            if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size))
            else tuple(args)
        )
        if not all(isinstance(s, int) for s in shape):
            return None
        dtype = kwargs.get("dtype") or torch.get_default_dtype()
        device = kwargs.get("device") or "cpu"
    else:
        return None
    numel = 1
    for s in shape:
        numel *= s
    from torch.utils._python_dispatch import _disable_current_modes

    # The guard's own ops are not the learner's: hidden from the modes, and
    # marked as gpulab's for the profiler's audit.
    with _disable_current_modes(), torch.no_grad(), own():
        flat = torch.empty(numel + CANARY, dtype=dtype, device=device)
        tail = flat[numel:]
        # The pattern is made on the CPU and copied over: on a GPU an arange
        # kernel here would be torch maths in the profiler's audit.
        tail.copy_(torch.arange(7, CANARY + 7).to(dtype))
        v.canaries.append((tail, tail.clone()))
        out = flat[:numel].view(shape)
    return out.requires_grad_() if kwargs.get("requires_grad") else out


class _FunctionGuard(TorchFunctionMode):
    def __repr__(self) -> str:  # shown in torch's errors: never the object's address
        return "gpulab's op guard"

    def __init__(
        self, banned: set[Any], names: dict[Any, str], v: Violations, poison: bool
    ) -> None:
        super().__init__()
        self.banned, self.names, self.v, self.poison = banned, names, v, poison

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: Kwargs | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if _is_higher_order(func):
            return _higher_order(self, func, args, kwargs)
        if func in self.banned:
            self.v.banned.append(self.names.get(func, getattr(func, "__name__", str(func))))
        out = _with_canary(func, args, kwargs, self.v) if self.poison else None
        if out is None:
            out = func(*args, **kwargs)
        if self.poison and func in _EMPTY_FNS:
            with torch.no_grad():
                _poison(out)
        return out


def _under(mode: Any, fn: Any) -> Any:
    """`fn` (a higher-order op's subgraph) run with `mode` active again."""

    def run(*args: Any, **kwargs: Any) -> Any:
        with mode:
            return fn(*args, **kwargs)

    return run


def _run_higher_order(mode: Any, func: Any, args: tuple[Any, ...], kwargs: Kwargs) -> Any:
    wrapped = tuple(
        _under(mode, a) if callable(a) and not isinstance(a, torch.Tensor) else a for a in args
    )
    return func(*wrapped, **kwargs)


_EAGER_HIGHER_ORDER: Any = None


def _higher_order(mode: Any, func: Any, args: tuple[Any, ...], kwargs: Kwargs) -> Any:
    """A higher-order op (torch.cond, while_loop, map, scan...) is torch's own
    control flow, not maths to refuse. It runs with `mode` off (as torch
    calls a mode's handler), and each subgraph it is handed runs with the
    mode back on, so the guard still sees the ops in its branches.

    Eagerly, torch.cond runs inside torch.compile, which skips the frame when
    a mode like this one is active but would trace the frames it calls: this
    handler and the branches run with Dynamo off, as plain eager code."""
    global _EAGER_HIGHER_ORDER
    if _EAGER_HIGHER_ORDER is None:
        import torch._dynamo

        disable: Any = torch._dynamo.disable  # (untyped in torch)
        _EAGER_HIGHER_ORDER = disable(_run_higher_order)
    return _EAGER_HIGHER_ORDER(mode, func, args, kwargs)


def _cuda_initialized() -> bool:
    cuda: Any = torch.cuda  # its is_initialized is untyped
    return bool(cuda.is_initialized())


def _is_higher_order(func: Any) -> bool:
    hop = getattr(torch._ops, "HigherOrderOperator", None)
    return hop is not None and isinstance(func, hop)


class Mode(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch: untyped
    """gpulab's dispatch modes. Torch 2.13 wraps a mode's __torch_dispatch__
    so that Dynamo skips it, and the wrapper imports Dynamo on the mode's
    first op: 2.3 s of every check on a 2-core CPU box, spent before any
    learner code runs. Torch 2.11 and earlier have no wrapper; this keeps
    their behaviour, which every exercise is graded under on the GPU."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False


class _DispatchGuard(Mode):
    # Without this, torch refuses every higher-order op under the mode
    # ("no rule registered for HigherOrderOperator cond"), an honest torch.cond
    # included (torch 2.13 and earlier alike).
    supports_higher_order_operators = True

    def __repr__(self) -> str:  # shown in torch's errors: never the object's address
        return "gpulab's op guard"

    def __init__(
        self,
        banned_aten: set[str],
        v: Violations,
        banned_large: AbstractSet[str] = frozenset(),
        large_numel: int = 4096,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.banned_aten, self.v = banned_aten, v
        self.banned_large, self.large_numel = banned_large, large_numel

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: Kwargs | None = None,
    ) -> Any:
        if _is_higher_order(func):
            return _higher_order(self, func, args, kwargs or {})
        name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
        if name in self.banned_aten:
            self.v.banned.append(f"aten.{name}")
        elif name in self.banned_large and any(
            isinstance(a, torch.Tensor) and a.numel() >= self.large_numel
            for a in list(args) + list((kwargs or {}).values())
        ):
            # Elementwise maths on whole operands: the exercise's work done by
            # torch (small tensors, e.g. an autotuner's timing statistics, pass).
            self.v.banned.append(f"aten.{name} on a large tensor")
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def op_guard(
    banned: Iterable[Any] = (),
    banned_aten: Iterable[str] = (),
    poison: bool = True,
    banned_large: Iterable[str] = (),
    large_numel: int = 4096,
) -> Iterator[Violations]:
    """Record banned ops (by torch callable and by aten name) and poison empties."""
    banned = set(banned)
    names = {
        f: f"{getattr(f, '__module__', '') or 'torch'}.{getattr(f, '__name__', f)}".replace(
            "torch._C._VariableFunctions", "torch"
        ).replace("torch._C.TensorBase", "Tensor")
        for f in banned
    }
    v = Violations()
    with (
        _FunctionGuard(banned, names, v, poison),
        _DispatchGuard(set(banned_aten), v, set(banned_large), large_numel),
    ):
        yield v


@dataclass
class Launch:
    kernel: str
    storages: set[int]
    stream: int | None


class LaunchRecorder:
    """Records Triton launches while active (compiled and interpreted paths)."""

    def __init__(self, inputs: set[int] | None = None) -> None:
        self.launches: list[Launch] = []
        # (class, original attribute, its name): Triton's classes, patched.
        self._patched: list[tuple[Any, Any, str]] = []
        self.inputs = inputs or set()
        # storage -> its bytes right after the last launch that was handed it
        # (outputs only), to see torch changing a result after the kernel.
        self._after: dict[int, torch.Tensor] = {}
        # A gpulab.sandbox.replay.Recording when the judge will replay the call.
        self.recording: Any = None
        # Inside @triton.autotune's timing of its configs: those launches are
        # not the call's work, and the replay runs the chosen config's only
        # (a launch hidden this way is one the replay lacks, never one it
        # gains). Their buffers are still recorded as they found them.
        self.benching = 0

    def _wrap_autotune(self) -> None:
        from triton.runtime.autotuner import Autotuner

        original = Autotuner._bench
        recorder = self

        def bench(self_t: Any, *args: Any, **kwargs: Any) -> Any:
            recorder.benching += 1
            try:
                return original(self_t, *args, **kwargs)
            finally:
                recorder.benching -= 1

        Autotuner._bench = bench
        self._patched.append((Autotuner, original, "_bench"))

    def _wrap(self, cls: Any) -> None:
        original = cls.run
        recorder = self

        def run(self_fn: Any, *args: Any, **kwargs: Any) -> Any:
            recorder._record(self_fn, args, kwargs)
            recording = recorder.recording
            index = None
            if recording is not None:
                index = recording.launch(self_fn, args, kwargs, benching=recorder.benching > 0)
                # The launch's own torch ops (the interpreter copies its
                # arguments to the host and back) are not the wrapper's.
                recording.in_launch += 1
            try:
                result = original(self_fn, *args, **kwargs)
            finally:
                if recording is not None:
                    recording.in_launch -= 1
            if recording is not None:
                # On a GPU the JIT returns the kernel it compiled and launched:
                # the replay launches that binary, never the file's Python.
                recording.compiled(index, result)
            recorder._snapshot(args, kwargs)
            return result

        cls.run = run
        self._patched.append((cls, original, "run"))

    def _wrap_compiled(self) -> None:
        """A compiled kernel launched directly (`compiled[grid](...)`, what a
        launcher that skips the JIT's per-call dispatch does; the shared-memory
        softmax reference on sm_90 is one) is a Triton launch too."""
        from triton.compiler.compiler import CompiledKernel

        original = CompiledKernel.__getitem__
        recorder = self

        def getitem(self_k: Any, grid: Any) -> Any:
            runner = original(self_k, grid)

            def run(*args: Any, **kwargs: Any) -> Any:
                # The runner takes the stream as an argument: that is the
                # launch's stream, whatever the current one is.
                recorder._record(self_k, args, {}, stream=kwargs.get("stream"))
                recording = recorder.recording
                if recording is not None:
                    recording.launch_compiled(self_k, grid, args)
                    recording.in_launch += 1
                try:
                    result = runner(*args, **kwargs)
                finally:
                    if recording is not None:
                        recording.in_launch -= 1
                recorder._snapshot(args, {})
                return result

            return run

        CompiledKernel.__getitem__ = getitem
        self._patched.append((CompiledKernel, original, "__getitem__"))

    def _record(self, fn: Any, args: tuple[Any, ...], kwargs: Kwargs, stream: Any = None) -> None:
        storages = set()
        for a in _tensors(args, kwargs):
            storages.add(a.untyped_storage().data_ptr())
        if stream is None and torch.cuda.is_available() and _cuda_initialized():
            stream = torch.cuda.current_stream().cuda_stream
        elif stream is not None:
            try:
                stream = int(getattr(stream, "cuda_stream", stream))
            except (TypeError, ValueError):  # not a stream: never the current one
                stream = -1
        name = getattr(getattr(fn, "fn", fn), "__name__", None) or getattr(fn, "name", None)
        name = name if isinstance(name, str) else type(fn).__name__
        self.launches.append(Launch(name, storages, stream))

    def __enter__(self) -> LaunchRecorder:
        from triton.runtime import jit

        self._wrap(jit.JITFunction)
        try:
            from triton.runtime.interpreter import InterpretedFunction

            self._wrap(InterpretedFunction)
        except ImportError:  # pragma: no cover - older Triton
            pass
        self._wrap_compiled()
        try:
            self._wrap_autotune()
        except (ImportError, AttributeError):  # pragma: no cover - another Triton
            pass
        return self

    def __exit__(self, *exc: object) -> None:
        for cls, original, attr in reversed(self._patched):
            setattr(cls, attr, original)
        self._patched.clear()

    def _snapshot(self, args: tuple[Any, ...], kwargs: Kwargs) -> None:
        for a in _tensors(args, kwargs):
            st = a.untyped_storage()
            if st.data_ptr() not in self.inputs and st.nbytes() <= (256 << 20):
                self._after[st.data_ptr()] = _bytes_of(st)

    def wrote(self, t: torch.Tensor) -> bool:
        ptr = t.untyped_storage().data_ptr()
        return any(ptr in launch.storages for launch in self.launches)

    def provenance(self, out: Any) -> dict[str, bool]:
        """Whether a kernel was handed `out` (or, with a record, a recorded
        copy or cast of what kernels wrote made it), and whether `out`
        changed after that kernel's launch. Which kernel, and whether it was
        handed the inputs themselves, is not asked: copies of the inputs,
        workspaces and a second kernel are honest, and the replay checks the
        data flow itself (the answer from the inputs through the recorded
        launches and steps alone)."""
        if not isinstance(out, torch.Tensor):
            return {"wrote_out": False, "altered_after": False, "aliases_input": False}
        ptr = out.untyped_storage().data_ptr()
        with_inputs = any(ptr in la.storages for la in self.launches)
        if not with_inputs and self.recording is not None:
            with_inputs = bool(self.recording.made_by_step(out))
        before = self._after.get(ptr)
        altered = before is not None and not torch.equal(before, _bytes_of(out.untyped_storage()))
        return {
            "wrote_out": with_inputs,
            "altered_after": bool(altered),
            "aliases_input": ptr in self.inputs,
        }

    def side_streams(self) -> set[int]:
        if not torch.cuda.is_available():
            return set()
        default = torch.cuda.current_stream().cuda_stream
        return {launch.stream for launch in self.launches if launch.stream not in (None, default)}


def _tensors(args: tuple[Any, ...], kwargs: Kwargs) -> Iterator[torch.Tensor]:
    """The tensors a launch is handed, a TMA descriptor's included: one
    (triton.tools.tensor_descriptor, Gluon's) carries its tensor as `.base`,
    and a kernel that stores through it writes there."""
    for a in list(args) + list(kwargs.values()):
        base = getattr(a, "base", None)
        if not isinstance(a, torch.Tensor) and isinstance(base, torch.Tensor):
            a = base
        if isinstance(a, torch.Tensor):
            yield a


def _bytes_of(storage: Any) -> torch.Tensor:
    """A copy of a storage's bytes (on its device). The guard's own ops, so
    the op guards must not see them."""
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes(), torch._C.DisableTorchFunction(), torch.no_grad(), own():
        t = torch.empty(0, dtype=torch.uint8, device=storage.device)
        t.set_(storage)
        return t.clone()


# --- the eager ops a legitimate wrapper needs ---------------------------------
# Allocation (outputs, dweight partials; zeros/zero_/fill_ for an atomics
# buffer and for the grader's own NaN poisoning), views and strides
# (reshape, slicing a QKV tensor), copies and dtype casts (a .contiguous()
# fallback, weight.float()), and `detach` (autograd's AccumulateGrad).
ALLOWED_ATEN = WRAPPER_OPS | {"_record_function_enter_new", "_record_function_exit"}
# And one reduction: `sum` whose result has exactly D elements, i.e. adding up
# per-program dweight partials of shape (P, D). A per-row reduction (the
# sum of squares of RMSNorm) has B*S*H elements, never D in these cases.


# op_guard poisons torch.empty* through a TorchFunctionMode, and function modes
# are not active inside an autograd.Function's backward; dispatch modes are.
# So EagerGuard poisons fresh buffers itself, forward and backward alike.
POISONED = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})


class EagerGuard(Mode):
    """Records aten ops outside ALLOWED_ATEN run by the learner's code, and
    fills every buffer it allocates with NaN.

    Ignored: ops inside the Triton interpreter's launch (it copies arguments
    to and from the host with aten ops) and, on a GPU, ops that touch only
    CPU tensors (Triton's autotuner summarises its timings with torch on the
    CPU). A copy from the GPU to the CPU is recorded instead, since maths
    done there would escape this guard. Pure-Python or numpy maths on the
    CPU cannot be seen by any op guard; on a GPU it needs that copy.
    """

    supports_higher_order_operators = True  # torch.cond and its kin: see _DispatchGuard

    def __repr__(self) -> str:
        return "gpulab's eager-op guard"

    def __init__(self, device: str, D: int) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.device, self.D = device, D
        self.ops: list[str] = []
        # A gpulab.sandbox.replay.Recording when the judge will replay the
        # call: the torch ops the replay runs again are written into it.
        self.recording: Any = None
        self._depth = 0
        self._patched: Any = None

    def __enter__(self) -> EagerGuard:
        try:
            from triton.runtime.interpreter import InterpretedFunction
        except ImportError:  # pragma: no cover
            InterpretedFunction = None
        if InterpretedFunction is not None:
            original, guard = InterpretedFunction.run, self

            def run(self_fn: Any, *args: Any, **kwargs: Any) -> Any:
                guard._depth += 1
                try:
                    return original(self_fn, *args, **kwargs)
                finally:
                    guard._depth -= 1

            InterpretedFunction.run = run
            self._patched = (InterpretedFunction, original)
        entered: EagerGuard = super().__enter__()  # type: ignore[no-untyped-call]
        return entered

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)  # type: ignore[no-untyped-call]
        if self._patched:
            cls, original = self._patched
            cls.run = original
            self._patched = None

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: Kwargs | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if _is_higher_order(func):
            return _higher_order(self, func, args, kwargs)
        if self._depth:
            return func(*args, **kwargs)
        name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
        recording = self.recording
        if recording is not None and name == "copy_":
            recording.step(name, args, kwargs, None)  # its destination as it was before
        out = func(*args, **kwargs)
        if name in POISONED:
            _poison(out)
        if recording is not None and name != "copy_":
            recording.step(name, args, kwargs, out)
        problem = self._problem(name, args, kwargs, out)
        if problem:
            self.ops.append(problem)
        return out

    def _problem(self, name: str, args: tuple[Any, ...], kwargs: Kwargs, out: Any) -> str | None:
        ins = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
        outs = [
            o
            for o in (out if isinstance(out, (tuple, list)) else [out])
            if isinstance(o, torch.Tensor)
        ]
        if self.device == "cuda":
            if not any(t.is_cuda for t in ins + outs):
                return None
            if (
                name in ("_to_copy", "copy_", "_local_scalar_dense")
                and any(t.is_cuda for t in ins)
                and any(not t.is_cuda for t in outs)
            ):
                return f"aten.{name} (a copy to the CPU)"
            if name == "_local_scalar_dense":
                return f"aten.{name} (a copy to the CPU)"
        if name in ALLOWED_ATEN:
            return None
        if name == "sum" and outs and outs[0].numel() == self.D:
            return None
        return f"aten.{name}"
