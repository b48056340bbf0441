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
import dataclasses
import functools
import os
from typing import TYPE_CHECKING, Any

import torch

from gpulab.wire.kernel_binary import MAX_BINARIES, KernelBinary
from gpulab.wire.launch_record import (
    DESC_LAYOUTS,
    LAUNCH_OPTIONS,
    Arg,
    BufferArg,
    DescArg,
    DescLayout,
    DtypeArg,
    FloatArg,
    LaunchRecord,
    Option,
    OtherArg,
    RecordedBuffer,
    RecordedLaunch,
    TorchStep,
    TupleArg,
    View,
)
from gpulab.wire.protocol import Kwargs

if TYPE_CHECKING:
    pass

MAX_LAUNCHES = 512  # a call's launches recorded; more and the call cannot be replayed
MAX_SNAPSHOT_BYTES = 8 << 20  # recorded buffer bytes a call may send (CPU sizes)
# First bytes of a call's buffers kept on their device until the call ends
# (a GPU's); a buffer past this is recorded as unknown.
MAX_DEFERRED_BYTES = 512 << 20
# GPU cycles spun before each timed repetition of a replay (replay_time), as
# gpulab.judge.batches.LEAD_CYCLES leads a timed backward: about 1 ms.
LEAD_CYCLES = 2_000_000
# The aten ops Recording.step writes down (and the replay runs as TorchStep).
STEP_ATEN = frozenset({"_to_copy", "clone", "copy_", "sum"})
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


# The compiled kernels this sandbox has launched (a GPU's), by Triton's hash
# of each: the record names them by a number that stays the same for the
# sandbox's life, and sends each with every call that launches it.
_IDENTS: dict[str, int] = {}
_BINARIES: dict[int, KernelBinary | str] = {}  # or why one cannot be sent


def _binary(kernel: Any) -> int | str:
    """The record's number for a compiled kernel, or why it cannot be sent."""
    from gpulab.sandbox.binaries import binary_of

    key = str(getattr(kernel, "hash", "")) or f"id-{id(kernel)}"
    if key not in _IDENTS:
        if len(_IDENTS) >= MAX_BINARIES:
            return f"more than {MAX_BINARIES} compiled kernels in one check"
        _IDENTS[key] = len(_IDENTS)
        _BINARIES[_IDENTS[key]] = binary_of(kernel, _IDENTS[key])
    ident = _IDENTS[key]
    found = _BINARIES[ident]
    return ident if isinstance(found, KernelBinary) else found


def _is_compiled(kernel: Any) -> bool:
    """A CompiledKernel for a GPU (the interpreter's launches return none)."""
    return os.environ.get("TRITON_INTERPRET") != "1" and hasattr(kernel, "asm")


class Recording:
    """What one guarded call launched (see the module's docstring)."""

    def __init__(self, arenas: dict[int, Any], defer: bool = False) -> None:
        """`defer`: read CPU buffers the GPU's way too (contents)."""
        self.bases = []
        for ident, arena in arenas.items():
            whole = arena.whole()
            self.bases.append((ident, whole.data_ptr(), whole.numel()))
        self.buffers: list[RecordedBuffer] = []
        self.index: dict[int, int] = {}  # storage address -> buffer number
        # Each recorded storage, held until the call ends: a freed one's
        # address handed to a new tensor would otherwise read as the old
        # buffer (its first contents, and what the launches left there).
        self.keep: list[Any] = []
        self.launches: list[RecordedLaunch | TorchStep] = []
        self.snapshot_bytes = 0
        self.overflow = ""
        # Buffers the wrapper made as whole copies of the judge's inputs (a
        # clone, a cast, `.contiguous()`, a `copy_` over all of one), by
        # storage address -> (source tensor, the copy), while nothing else
        # has written them (copy_watch): recorded as TorchSteps when a launch
        # is first handed one, so the replay makes them from its own inputs,
        # at any size and on any device, instead of from recorded bytes.
        self.copies: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.in_launch = 0  # inside a launch (gpulab.sandbox.guards.LaunchRecorder)
        # Buffers whose first bytes are copied on their device and read when
        # the call ends (contents): buffer number -> (copy, element size).
        self.defer = defer
        self.deferred: dict[int, tuple[torch.Tensor, int]] = {}
        self.deferred_bytes = 0
        # id(compiled kernel) -> (the kernel, its launch's num_warps): launched_warps
        self._warps: dict[int, tuple[Any, Any]] = {}
        self.used: set[int] = set()  # the binaries this call's launches ran
        self.stepped: set[int] = set()  # buffers a recorded torch step wrote

    def launch(
        self,
        jit_fn: Any,
        args: tuple[Any, ...],
        kwargs: Kwargs,
        benching: bool = False,
        defaults: dict[str, Option] | None = None,
    ) -> int | None:
        """Write down one launch; its place in `launches` (None where none was
        written, or only what it was and not its kernel: see `compiled`). `benching`: one of @triton.autotune's timing
        runs of its configs, not the call's work: not a launch the replay
        runs, but the buffers it is handed are recorded as it finds them (the
        chosen config's launch finds them written by these runs; an honest
        output's first state is torch.empty's, the same in every draw)."""
        import inspect

        if kwargs.get("warmup"):
            return None
        if benching:
            for v in (*args, *kwargs.values()):
                if isinstance(v, torch.Tensor) or _descriptor(v) is not None:
                    self.value(v)
            return None
        if len(self.launches) >= MAX_LAUNCHES:
            self.overflow = f"more than {MAX_LAUNCHES} kernel launches in one call"
            return None
        fn = getattr(jit_fn, "fn", None)
        if not callable(fn) or not hasattr(fn, "__code__"):
            self.launches.append(RecordedLaunch(what=type(jit_fn).__name__))
            return None
        try:
            spec = inspect.getfullargspec(fn)
            kw = {k: v for k, v in kwargs.items() if k in spec.args or k in spec.kwonlyargs}
            bound = inspect.getcallargs(fn, *args, **kw)
            grid: Any = kwargs.get("grid")
            grid = grid(bound) if callable(grid) else grid
            grid = [int(g) for g in grid]
        except Exception as exc:  # noqa: BLE001 - the launch itself will say
            self.launches.append(
                RecordedLaunch(kernel=fn.__name__, error=f"{type(exc).__name__}: {exc}")
            )
            return None
        options: dict[str, Option] = {}
        defaults = self.defaults if defaults is None else defaults
        for k in LAUNCH_OPTIONS:
            v = kwargs.get(k)
            if k in kwargs and k not in bound and v is not None:
                if not isinstance(v, (int, bool)):
                    self.launches.append(
                        RecordedLaunch(kernel=fn.__name__, error=f"launch option {k}={v!r}")
                    )
                    return None
                # A default is the same launch whether said or not (and a
                # compiled kernel's launch says every option: below).
                if k not in defaults or defaults[k] != v:
                    options[k] = v
        self.launches.append(
            RecordedLaunch(
                kernel=fn.__name__,
                qualname=getattr(fn, "__qualname__", ""),
                file=fn.__code__.co_filename,
                grid=tuple(grid),
                args={name: self.value(v) for name, v in bound.items()},
                options=options,
            )
        )
        return len(self.launches) - 1

    def compiled(self, index: int | None, kernel: Any) -> None:
        """The compiled kernel launch `index` ran (a GPU's: what the replay
        launches there), once the JIT has returned it."""
        if index is None or not _is_compiled(kernel):
            return
        launch = self.launches[index]
        if isinstance(launch, RecordedLaunch) and launch.error is None:
            ident = _binary(kernel)
            if isinstance(ident, str):
                why = f"its compiled kernel cannot be sent: {ident}"
                self.launches[index] = dataclasses.replace(launch, error=why)
                return
            self.used.add(ident)
            self.launches[index] = dataclasses.replace(launch, binary=ident)

    def launch_compiled(self, kernel: Any, grid: Any, args: tuple[Any, ...]) -> None:
        """A compiled kernel launched directly (`compiled[grid](*args)`, what
        a launcher that skips the JIT's per-call dispatch does): every
        parameter is passed in order, constexprs included, and the options
        are the ones it was compiled with. Recorded as the JIT launch that
        compiles to it, so the replay launches it through the JIT, and a
        shape's two draws, one through the JIT and one direct, compare."""
        jit_fn = getattr(getattr(kernel, "src", None), "fn", None)
        metadata = getattr(kernel, "metadata", None)
        if not callable(getattr(jit_fn, "fn", None)) or metadata is None:
            self.launches.append(RecordedLaunch(what=type(kernel).__name__))
            return
        defaults = _option_defaults(getattr(metadata, "target", None))
        options = {k: getattr(metadata, k) for k in LAUNCH_OPTIONS if hasattr(metadata, k)}
        if "num_warps" in options:
            options["num_warps"] = self.launched_warps(kernel, options["num_warps"])
        try:
            grid = tuple(grid)
        except TypeError:
            grid = (grid,)
        index = self.launch(jit_fn, tuple(args), {"grid": grid, **options}, defaults=defaults)
        self.compiled(index, kernel)

    def launched_warps(self, kernel: Any, counted: Any) -> Any:
        """The num_warps a compiled kernel was launched with through the JIT.
        Its metadata counts every warp a warp-specialized kernel runs (a
        Gluon kernel of 8 compute warps and a 1-warp loader says 12), which
        launched again would be another kernel; its TTGIR's module attribute
        `ttg.num-warps` is the launch's (the default partition's). Read once
        a kernel (the text is long; a launcher launches it every call)."""
        import re

        key = id(kernel)
        if key not in self._warps:
            found = counted
            try:
                ttgir = kernel.asm.get("ttgir") if hasattr(kernel, "asm") else None
                m = re.search(r'"ttg\.num-warps" = (\d+)', ttgir or "")
                if m:
                    found = int(m.group(1))
            except Exception:  # noqa: BLE001 - no TTGIR kept: the metadata's count
                pass
            self._warps[key] = (kernel, found)  # the kernel held: its id stays its own
        return self._warps[key][1]

    @functools.cached_property
    def defaults(self) -> dict[str, Option]:
        """This process's Triton backend's default launch options (empty in
        the interpreter, which takes none)."""
        if os.environ.get("TRITON_INTERPRET") == "1":
            return {}
        try:
            from triton.runtime import driver

            return _option_defaults(driver.active.get_current_target())
        except Exception:  # noqa: BLE001 - no backend: options are kept as said
            return {}

    def value(self, v: Any) -> Arg:
        if isinstance(v, torch.Tensor):
            return BufferArg(self.view(self.buffer(v), v))
        desc = _descriptor(v)
        if desc is not None:
            base, shape, strides, block, padding, tf32, layout = desc
            view = self.view(self.buffer(base), base)
            return DescArg(view, shape, strides, block, padding, tf32, layout)
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        if isinstance(v, int):
            return v
        if isinstance(v, float):
            return FloatArg(float(v).hex())
        if isinstance(v, tuple) and len(v) <= 32:
            return TupleArg(tuple(self.value(x) for x in v))
        import triton.language as tl

        if isinstance(v, tl.constexpr):
            return self.value(v.value)
        if isinstance(v, tl.dtype):
            return DtypeArg(v.name)
        return OtherArg(type(v).__name__)

    @staticmethod
    def view(index: int, t: torch.Tensor) -> View:
        return View(
            index,
            int(t.storage_offset()),
            tuple(t.shape),
            tuple(t.stride()),
            str(t.dtype).replace("torch.", ""),
        )

    def buffer(self, t: torch.Tensor, made: bool = False) -> int:
        """The buffer's number, recorded the first time it is seen; `made`:
        a torch step's fresh result (the step writes it in the replay)."""
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr in self.index:
            return self.index[ptr]
        entry = RecordedBuffer(st.nbytes(), str(t.dtype).replace("torch.", ""))
        copied = None
        for ident, base, size in self.bases:
            if base <= ptr < base + size:
                entry = dataclasses.replace(entry, arena=(ident, ptr - base))
                break
        else:
            copied = None if made else self.copies.pop(ptr, None)
            if made or copied is not None:
                entry = dataclasses.replace(entry, unknown=True)
            else:
                entry = self.contents(entry, t, st)
        if copied is not None:  # its source first: it may be a copy too
            src, dst = copied
            src_view = self.view(self.buffer(src), src)
        self.index[ptr] = len(self.buffers)
        self.buffers.append(entry)
        self.keep.append(st)
        if copied is not None:
            self.launches.append(TorchStep("copy", src_view, self.view(self.index[ptr], dst)))
        return self.index[ptr]

    def is_input(self, t: torch.Tensor) -> bool:
        """Whether `t` is in the judge's memory, or a clean copy of it."""
        ptr = t.untyped_storage().data_ptr()
        if ptr in self.copies:
            return True
        return any(base <= ptr < base + size for _, base, size in self.bases)

    def before(self, name: str, args: tuple[Any, ...]) -> None:
        """A `copy_` of the wrapper's, before it runs (copy_watch): a buffer
        about to be written, in whole or in part, from something the replay
        can make (an input, a copy of one, a buffer a launch or a step
        wrote) is recorded as it is now (a zero fill, its bytes), so that
        the copy is a step into it: padding an input into a zeroed buffer
        (`buf[:m, :k] = x`) replays at any size, bytes or none."""
        if self.in_launch or name != "copy_" or len(args) < 2:
            return
        dst, src = args[0], args[1]
        if not isinstance(dst, torch.Tensor) or not isinstance(src, torch.Tensor):
            return
        ptr = dst.untyped_storage().data_ptr()
        if ptr in self.index or ptr in self.copies or self.is_input(dst):
            return
        if _whole(dst) and self.is_input(src) and tuple(src.shape) == tuple(dst.shape):
            return  # a clean copy of an input: saw() keeps it as one
        if self._known(src):
            self.buffer(dst)

    def saw(self, name: str, func: Any, args: tuple[Any, ...], kwargs: Kwargs, out: Any) -> None:
        """A torch op of the wrapper's, after it ran (copy_watch): a whole copy
        of an input is remembered (`copies`); a copy or cast into a recorded
        buffer, or of one (an input, or what a launch or a step wrote: a
        cast of a kernel's fp32 workspace to the output's dtype), is a step
        the replay runs where it ran; any other write to a buffer forgets it."""
        if self.in_launch:
            return
        if name in ("clone", "_to_copy") and args and isinstance(args[0], torch.Tensor):
            if isinstance(out, torch.Tensor):
                if self.is_input(args[0]):
                    self._copied(args[0], out)
                elif self._recorded(args[0]):
                    self._step(args[0], out, made=True)
            return
        if name == "copy_" and len(args) >= 2:
            dst, src = args[0], args[1]
            if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor):
                if self.is_input(src) and _whole(dst) and tuple(src.shape) == tuple(dst.shape):
                    self._copied(src, dst)
                    return
                if self._known(src) and self._recorded(dst):
                    self._step(src, dst)
                    return
                self.forget(dst)
            return
        for t in _written(func, args, kwargs):
            self.forget(t)

    def _recorded(self, t: torch.Tensor) -> bool:
        return t.untyped_storage().data_ptr() in self.index

    def _known(self, t: torch.Tensor) -> bool:
        """Whether the replay can make `t`'s values: an input, a clean copy of
        one, or a buffer a launch was handed or a step wrote."""
        return self.is_input(t) or self._recorded(t)

    def _step(self, src: torch.Tensor, dst: torch.Tensor, made: bool = False) -> None:
        """A copy (or cast) from `src` into `dst`, run again by the replay."""
        if len(self.launches) >= MAX_LAUNCHES:
            self.overflow = f"more than {MAX_LAUNCHES} kernel launches in one call"
            return
        src_view = self.view(self.buffer(src), src)
        index = self.buffer(dst, made=made)
        self.launches.append(TorchStep("copy", src_view, self.view(index, dst)))
        self.stepped.add(index)

    def made_by_step(self, t: Any) -> bool:
        """Whether `t` lives in a buffer a recorded step wrote (a cast or copy
        of what the kernels wrote): the replay makes its values too."""
        if not isinstance(t, torch.Tensor):
            return False
        return self.index.get(t.untyped_storage().data_ptr(), -1) in self.stepped

    def _copied(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        ptr = dst.untyped_storage().data_ptr()
        if ptr in self.index:  # handed to a launch already: a step, here
            self._step(src, dst)
            return
        self.copies[ptr] = (src, dst)
        self.keep.append(src.untyped_storage())
        self.keep.append(dst.untyped_storage())

    def forget(self, t: torch.Tensor) -> None:
        """`t`'s buffer written by something else: no longer a clean copy."""
        self.copies.pop(t.untyped_storage().data_ptr(), None)

    def contents(self, entry: RecordedBuffer, t: torch.Tensor, st: Any) -> RecordedBuffer:
        """The buffer as the first launch handed it finds it. On the CPU read
        at once through ctypes, not torch: a torch op here would be one the
        audit sees. On a GPU (or where `defer` says) copied on the device as
        gpulab's own work, and read when the call has ended (`_settle`): a
        copy to the host now would be a device-to-host copy in the call."""
        import ctypes

        nbytes = st.nbytes()
        if nbytes == 0:
            return dataclasses.replace(entry, fill="")
        if self.defer or t.device.type != "cpu":
            if self.deferred_bytes + nbytes > MAX_DEFERRED_BYTES:
                return dataclasses.replace(entry, unknown=True)
            from gpulab.sandbox.guards import _bytes_of

            self.deferred_bytes += nbytes
            self.deferred[len(self.buffers)] = (_bytes_of(st), t.element_size())
            return entry  # settled by _settle
        data = ctypes.string_at(st.data_ptr(), nbytes)
        return self.classify(entry, data, t.element_size())

    def classify(self, entry: RecordedBuffer, data: bytes, size: int) -> RecordedBuffer:
        """A buffer's first bytes as a record keeps them: a constant fill,
        the bytes themselves (up to MAX_SNAPSHOT_BYTES a call), or unknown."""
        nbytes = len(data)
        if nbytes % size == 0 and data == data[:size] * (nbytes // size):
            return dataclasses.replace(entry, fill=data[:size].hex())
        if self.snapshot_bytes + nbytes > MAX_SNAPSHOT_BYTES:
            return dataclasses.replace(entry, unknown=True)
        self.snapshot_bytes += nbytes
        return dataclasses.replace(entry, data=base64.b64encode(data).decode("ascii"))

    def _settle(self) -> None:
        """The deferred buffers' first bytes, read now that the call is over:
        a fill is told on the device (a GPU's zeroed accumulator need not
        cross to the host), anything else copied to the host if the call's
        snapshot budget allows."""
        from torch.utils._python_dispatch import _disable_current_modes

        from gpulab.sandbox.audit import own

        if not self.deferred:
            return
        with _disable_current_modes(), torch._C.DisableTorchFunction(), torch.no_grad(), own():
            for index, (raw, size) in sorted(self.deferred.items()):
                entry = self.buffers[index]
                nbytes = raw.numel()
                if nbytes % size == 0:
                    rows = raw.view(nbytes // size, size)
                    if bool((rows == rows[:1]).all()):
                        fill = bytes(rows[0].cpu().tolist())
                        self.buffers[index] = dataclasses.replace(entry, fill=fill.hex())
                        continue
                if self.snapshot_bytes + nbytes > MAX_SNAPSHOT_BYTES:
                    self.buffers[index] = dataclasses.replace(entry, unknown=True)
                    continue
                data = raw.cpu().numpy().tobytes()
                self.buffers[index] = self.classify(entry, data, size)
        self.deferred.clear()

    def step(self, name: str, args: tuple[Any, ...], kwargs: Kwargs, out: Any) -> None:
        """A torch op of the wrapper's, as gpulab's eager-op guard saw it
        (lesson 05's exercise, forward and backward): the ones that make a
        buffer's values from another's (a cast, a clone, `copy_`, the sum
        of dweight partials) are steps the replay runs again in order, so
        the gradient the wrapper returns is the replay's to work out too.
        `copy_` is seen before it runs (its destination's contents then are
        that buffer's start), the others after."""
        if name not in STEP_ATEN or len(self.launches) >= MAX_LAUNCHES:
            if name in STEP_ATEN:
                self.overflow = f"more than {MAX_LAUNCHES} kernel launches in one call"
            return
        src = args[0] if name != "copy_" else (args[1] if len(args) > 1 else None)
        dst = args[0] if name == "copy_" else out
        if not isinstance(src, torch.Tensor) or not isinstance(dst, torch.Tensor):
            return
        src_view = self.view(self.buffer(src), src)
        dst_view = self.view(self.buffer(dst, made=name != "copy_"), dst)
        if name != "sum":
            self.launches.append(TorchStep("copy", src_view, dst_view))
            return
        dims = args[1] if len(args) > 1 else kwargs.get("dim")
        keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
        dims = None if dims is None else tuple(int(d) for d in dims)
        self.launches.append(TorchStep("sum", src_view, dst_view, dims, bool(keepdim)))

    def result(self, out: Any, grads: list[Any] | None = None) -> LaunchRecord:
        """The record so far; `grads`: a backward's gradients too."""

        def as_view(t: Any) -> View | None:
            if not isinstance(t, torch.Tensor):
                return None
            ptr = t.untyped_storage().data_ptr()
            return self.view(self.index[ptr], t) if ptr in self.index else None

        self._settle()
        return LaunchRecord(
            buffers=tuple(self.buffers),
            launches=tuple(self.launches),
            out=as_view(out),
            tensor_out=isinstance(out, torch.Tensor),
            overflow=self.overflow or None,
            grads=None if grads is None else tuple(as_view(g) for g in grads),
            binaries=tuple(
                b for i in sorted(self.used) if isinstance(b := _BINARIES[i], KernelBinary)
            ),
        )


def _option_defaults(target: Any) -> dict[str, Option]:
    """The launch options a kernel for `target` gets when none is said
    (Triton's backend parses an empty set), as LAUNCH_OPTIONS name them."""
    if target is None:
        return {}
    try:
        from triton.compiler.compiler import make_backend

        parsed = make_backend(target).parse_options({})
    except Exception:  # noqa: BLE001 - another Triton: keep every option said
        return {}
    out: dict[str, Option] = {}
    for k in LAUNCH_OPTIONS:
        v = getattr(parsed, k, None)
        if v is None or isinstance(v, (int, bool)):
            out[k] = v
    return out


def _whole(t: torch.Tensor) -> bool:
    """Whether `t` covers its whole storage, each byte once (a copy into it
    leaves nothing of what it held)."""
    return bool(  # torch 2.14 types is_contiguous() as SymBool | bool
        t.is_contiguous()
        and t.storage_offset() == 0
        and t.numel() * t.element_size() == t.untyped_storage().nbytes()
    )


def _written(func: Any, args: tuple[Any, ...], kwargs: Kwargs) -> list[torch.Tensor]:
    """The tensors an aten op writes (its schema's mutable arguments)."""
    schema = getattr(func, "_schema", None)
    out: list[torch.Tensor] = []
    for i, arg in enumerate(getattr(schema, "arguments", ())):
        info = arg.alias_info
        if info is None or not info.is_write:
            continue
        v = args[i] if i < len(args) else kwargs.get(arg.name)
        values = v if isinstance(v, (list, tuple)) else [v]
        out += [x for x in values if isinstance(x, torch.Tensor)]
    return out


def copy_watch(recording: Recording) -> Any:
    """A TorchDispatchMode that shows every aten op of the call to
    `recording` after it runs (lesson 05's exercise records its steps
    through its eager-op guard instead)."""
    from gpulab.sandbox.guards import Mode, _higher_order, _is_higher_order

    class Watch(Mode):  # type: ignore[no-untyped-call]  # torch: untyped __init_subclass__
        supports_higher_order_operators = True

        def __repr__(self) -> str:
            return "gpulab's launch recorder"

        def __torch_dispatch__(
            self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Kwargs | None = None
        ) -> Any:
            kwargs = kwargs or {}
            if _is_higher_order(func):
                return _higher_order(self, func, args, kwargs)
            name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
            recording.before(name, args)
            out = func(*args, **kwargs)
            recording.saw(name, func, args, kwargs, out)
            return out

    return Watch()  # type: ignore[no-untyped-call]


Descriptor = tuple[
    torch.Tensor, tuple[int, ...], tuple[int, ...], tuple[int, ...], str, bool, DescLayout | None
]


def _descriptor(v: Any) -> Descriptor | None:
    """A host-side TMA descriptor's parts (triton.tools.tensor_descriptor:
    the interpreter and the GPU both take one; or Gluon's, with its
    shared-memory layout), or None for anything else, a Gluon descriptor
    whose layout is not one DESC_LAYOUTS names included."""
    if type(v).__name__ != "TensorDescriptor" or not isinstance(
        getattr(v, "base", None), torch.Tensor
    ):
        return None
    try:
        shape = tuple(int(s) for s in v.shape)
        strides = tuple(int(s) for s in v.strides)
        block = tuple(int(s) for s in v.block_shape)
    except (TypeError, ValueError):
        return None
    layout = None
    if getattr(v, "layout", None) is not None:
        layout = _layout(v.layout)
        if layout is None:
            return None
    padding = getattr(v, "padding", "zero")
    tf32 = getattr(v, "round_f32_to_tf32", False) is True
    padding = padding if isinstance(padding, str) else "zero"
    return v.base, shape, strides, block, padding, tf32, layout


def _layout(layout: Any) -> DescLayout | None:
    """A Gluon shared-memory layout as the record keeps it, or None."""
    kind = type(layout).__name__
    if kind not in DESC_LAYOUTS or not dataclasses.is_dataclass(layout):
        return None
    if not type(layout).__module__.startswith("triton.experimental.gluon"):
        return None
    raw = {f.name: getattr(layout, f.name) for f in dataclasses.fields(layout)}
    return DescLayout.parse([kind, _plain(raw)])


def _plain(v: Any) -> Any:
    """Lists and tuples as lists, all the way down (JSON's shape)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v
