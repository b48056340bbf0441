"""The replay's own sandbox: the recorded launches run again apart from the
learner's code (gpulab.sandbox.replay records them; gpulab.judge.replay
plans what a replay may start from).

It never imports the learner's file. On the CPU it runs the kernels the
judge's verifier kept of the file (gpulab.sandbox.replay_source), in
Triton's interpreter; on a GPU the compiled kernels the record carries
(gpulab.sandbox.binaries). It makes each buffer as the judge's plan says
(the judge's own inputs, fills, kept bytes, poison), runs the launches and
torch steps in order, copies the results into the judge's slots and, on a
GPU, times the launches between CUDA events (`replay_time`).
"""

from __future__ import annotations

import base64
import math
import os
import tempfile
import time
from typing import TYPE_CHECKING, Any

import torch

from gpulab.sandbox.replay import DTYPES, LEAD_CYCLES, _plain
from gpulab.wire.launch_record import (
    Arg,
    BufferArg,
    DescArg,
    DtypeArg,
    FloatArg,
    OtherArg,
    TorchStep,
    TupleArg,
    View,
)
from gpulab.wire.protocol import Kwargs
from gpulab.wire.replay import (
    ReplayBuffer,
    Replayed,
    ReplayLaunch,
    ReplayRequest,
    ReplayTimed,
    ReplayTimeRequest,
)

if TYPE_CHECKING:
    from triton.runtime.jit import JITFunction

    from gpulab.wire.protocol import TensorRef


def _decode(v: Arg, buffers: list[torch.Tensor]) -> Any:
    """An argument as the kernel is passed it (the judge sends no OtherArg)."""
    if isinstance(v, BufferArg):
        return _view(buffers, v.view)
    if isinstance(v, DescArg):
        parts: Kwargs = {"padding": v.padding}  # the descriptor's keywords
        if v.tf32:  # a Triton that has no such field would refuse the name
            parts["round_f32_to_tf32"] = True
        view = _view(buffers, v.view)
        sizes = (list(v.shape), list(v.strides), list(v.block_shape))
        if v.layout is not None:
            from triton.experimental.gluon import language as gl
            from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor

            # The class by its name in Gluon's language, which DescLayout
            # limits to DESC_LAYOUTS; its fields as keywords.
            cls = getattr(gl, v.layout.kind)
            layout = cls(**{name: _plain(x) for name, x in v.layout.fields})
            return GluonDescriptor(view, *sizes, layout, **parts)
        from triton.tools.tensor_descriptor import TensorDescriptor

        return TensorDescriptor(view, *sizes, **parts)
    if isinstance(v, FloatArg):
        return float.fromhex(v.hex)
    if isinstance(v, TupleArg):
        return tuple(_decode(x, buffers) for x in v.items)
    if isinstance(v, DtypeArg):
        import triton.language as tl

        return tl.dtype(v.name)
    if isinstance(v, OtherArg):
        raise ValueError(f"an argument of type {v.unsupported or '?'}")
    return v


def _view(buffers: list[torch.Tensor], spec: View) -> torch.Tensor:
    raw = buffers[int(spec.buffer)]
    typed = raw.view(DTYPES[spec.dtype])
    shape, stride = [int(s) for s in spec.shape], [int(s) for s in spec.stride]
    return torch.as_strided(typed, shape, stride, int(spec.offset))


def _device(server: Any) -> torch.device:
    """Where the replay's buffers live: the judge's memory's device (the
    GPU's, on a GPU: the kernels run there as they did in the check)."""
    return (
        torch.device("cuda") if getattr(server, "device", "cpu") == "cuda" else torch.device("cpu")
    )


def _buffers(server: Any, specs: tuple[ReplayBuffer, ...]) -> list[torch.Tensor]:
    device = _device(server)
    out = []
    for spec in specs:
        nbytes = int(spec.nbytes)  # (a forged record's true is 1)
        # NaN, -1: never an answer.
        buf = torch.full((nbytes,), 0xFF, dtype=torch.uint8, device=device)
        if spec.input is not None:  # the judge's own copy of an input's whole storage
            ident, offset, size = (int(v) for v in spec.input)
            buf.copy_(server.arenas[ident].storage(offset, size)[:nbytes])
        elif spec.fill is not None:
            pattern = bytes.fromhex(spec.fill)
            if pattern:
                reps = torch.tensor(list(pattern), dtype=torch.uint8, device=device)
                buf.copy_(reps.repeat(math.ceil(nbytes / len(pattern)))[:nbytes])
        elif spec.data is not None:
            data = base64.b64decode(spec.data)
            buf.copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8)[:nbytes].to(device))
        out.append(buf)  # anything else: bytes the replay may not trust
    return out


def kernels(text: str, modules: dict[str, str], names: list[str]) -> dict[str, JITFunction]:
    """The kept kernels, made into Triton functions from their own file (the
    interpreter reads a kernel's source back from it)."""
    from gpulab.sandbox.replay_source import ReplaySource, namespace

    src = ReplaySource(text=text, kernels=tuple(names), modules=modules, problems={})
    folder = tempfile.mkdtemp(prefix="gpulab-replay-")
    path = os.path.join(folder, "kernels.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    g = namespace(src)
    exec(compile(text, path, "exec"), g)  # noqa: S102 - text checked by replay_source
    return {name: g[name] for name in names if name in g}


class _Kernels:
    """What a request's launches run: on a GPU the compiled kernels the
    record sent (gpulab.sandbox.binaries; no Python of the file at all), on
    the CPU the kernels kept of the file, run by Triton's interpreter."""

    def __init__(self, server: Any, msg: ReplayRequest | ReplayTimeRequest) -> None:
        self.binaries = None
        self.kept: dict[str, JITFunction] = {}
        if msg.binaries or any(
            isinstance(la, ReplayLaunch) and la.binary is not None for la in msg.launches
        ):
            from gpulab.sandbox.binaries import loaded

            self.binaries = loaded(server)
            for binary in msg.binaries:
                self.binaries.add(binary)
        elif msg.source:
            self.kept = kernels(msg.source, msg.modules, list(msg.kernels))

    def launch(self, launch: ReplayLaunch, buffers: list[torch.Tensor]) -> str:
        """ "" or why `launch` could not run."""
        args = {k: _decode(v, buffers) for k, v in launch.args.items()}
        grid = tuple(int(g) for g in launch.grid)
        if launch.binary is not None:
            if self.binaries is None or launch.binary not in self.binaries.kernels:
                return f"no compiled kernel {launch.binary} ({launch.kernel})"
            self.binaries.launch(launch.binary, grid, args)
            return ""
        kernel = self.kept.get(launch.kernel)
        if kernel is None:
            return f"no kernel {launch.kernel}"
        kernel[grid](**args, **launch.options)
        return ""


def replay(server: Any, msg: ReplayRequest) -> Replayed:
    """Run the recorded launches and copy the results into the judge's
    slots; then, where the judge asks, again from its other buffers into its
    other slots (gpulab.judge.replay_again)."""
    found = _Kernels(server, msg)
    _allocator(server)
    counts = None
    if msg.count and found.binaries is None:  # the interpreter's kernels only
        from gpulab.sandbox.counting import counting

        try:
            with counting(maps=msg.count == "map") as counted:
                problem = _run(server, found, msg, msg.buffers, msg.slots)
            counts = dict(counted.to_json())  # plain JSON from here (Replayed.counts)
        except ImportError:  # no interpreter to count in: replayed as ever
            problem = _run(server, found, msg, msg.buffers, msg.slots)
    else:
        problem = _run(server, found, msg, msg.buffers, msg.slots)
    if problem or not msg.again_slots:
        return Replayed(problem, counts)
    problem = _run(server, found, msg, msg.again, msg.again_slots)
    return Replayed(problem and f"on other inputs, {problem}", counts)


def _run(
    server: Any,
    found: _Kernels,
    msg: ReplayRequest,
    specs: tuple[ReplayBuffer, ...],
    slot_refs: tuple[TensorRef, ...],
) -> str:
    buffers = _buffers(server, specs)
    problem = _launch_all(found, msg.launches, buffers)
    if problem:
        return problem
    problem = _copy_out(server, msg.outs, buffers, slot_refs)
    if problem:
        return problem
    if buffers and buffers[0].is_cuda:
        # The judge reads the slots when the reply comes: the copies done. A
        # kernel's fault (an illegal address) is raised here, as the replay's.
        try:
            torch.cuda.synchronize()
        except RuntimeError as exc:
            return f"the kernels failed on the GPU: {str(exc)[:400]}"
    return ""


def _launch_all(
    found: _Kernels,
    launches: tuple[ReplayLaunch | TorchStep, ...],
    buffers: list[torch.Tensor],
) -> str:
    """Each launch and torch step in order: "" or what stopped them."""
    for i, launch in enumerate(launches):
        if isinstance(launch, TorchStep):
            problem = _step(launch, buffers)
            if problem:
                return f"step {i + 1} ({launch.op}): {problem}"
            continue
        try:
            problem = found.launch(launch, buffers)
        except Exception as exc:  # noqa: BLE001 - reported to the judge
            return f"launch {i + 1} of {launch.kernel}: {type(exc).__name__}: {str(exc)[:400]}"
        if problem:
            return f"launch {i + 1}: {problem}"
    return ""


def _copy_out(
    server: Any,
    outs: tuple[View, ...],
    buffers: list[torch.Tensor],
    slot_refs: tuple[TensorRef, ...],
) -> str:
    from gpulab.sandbox.tensors import view

    for out, ref in zip(outs, slot_refs, strict=True):
        slot = view(server.arenas, ref)
        result = _view(buffers, out)
        if tuple(result.shape) != tuple(slot.shape) or result.dtype != slot.dtype:
            return "a result has another shape or dtype"
        slot.copy_(result)
    return ""


def replay_time(server: Any, msg: ReplayTimeRequest) -> ReplayTimed:
    """Time a record's launches as gpulab.judge.batches times a learner's
    call, here where no learner Python runs: for each repetition, its
    buffers made (not timed), the L2 flushed, the GPU led, the launches
    between two events, and the results copied to the judge's slots after
    the end event. The first repetition's buffers are run for `warmup_s` first
    (compiles, autotuning's choice made already, clocks up)."""
    found = _Kernels(server, msg)
    _allocator(server)
    cuda = _device(server).type == "cuda"
    clock = _CudaClock(server) if cuda else _HostClock()
    try:
        until = time.perf_counter() + msg.warmup_s
        while True:  # once at least: the kernels compiled before any timing
            problem = _launch_all(found, msg.launches, _buffers(server, msg.reps[0].buffers))
            if problem:
                return ReplayTimed(problem=problem)
            clock.sync()
            if time.perf_counter() >= until:
                break
        times = []
        for rep in msg.reps:
            # Made before the flush and the lead (not timed), one repetition's
            # at a time: a large case's buffers need not all fit at once.
            buffers = _buffers(server, rep.buffers)
            if msg.flush:
                clock.flush()
            clock.lead()
            start = clock.mark()
            problem = _launch_all(found, msg.launches, buffers)
            end = clock.mark()
            if problem:
                return ReplayTimed(problem=problem)
            problem = _copy_out(server, msg.outs, buffers, rep.slots)
            if problem:
                return ReplayTimed(problem=problem)
            times.append((start, end))
        clock.sync()
        return ReplayTimed(times_ms=tuple(clock.ms(s, e) for s, e in times))
    except RuntimeError as exc:  # a kernel's fault on the GPU, seen at a sync
        return ReplayTimed(problem=f"the kernels failed: {str(exc)[:400]}")


class _CudaClock:
    """CUDA events on the current stream, and gpulab's L2 flush."""

    def __init__(self, server: Any) -> None:
        from gpulab.measure.timing import L2Flusher

        if getattr(server, "flusher", None) is None:
            server.flusher = L2Flusher()
        self.flush = server.flusher

    @staticmethod
    def lead() -> None:
        """The GPU kept busy while the host launches the repetition, so the
        events time the kernels, not the host's launch latency between them
        (Triton's launch path costs tens of µs a kernel; a 13 µs kernel
        timed from an idle GPU would read as several times its length).
        About 1 ms at an H200's 1980 MHz, as gpulab.judge.batches leads a
        timed backward."""
        spin: Any = torch.cuda._sleep  # unannotated
        spin(LEAD_CYCLES)

    @staticmethod
    def mark() -> Any:
        new_event: Any = torch.cuda.Event  # its __new__ is unannotated
        event = new_event(enable_timing=True)
        event.record()
        return event

    @staticmethod
    def sync() -> None:
        torch.cuda.synchronize()

    @staticmethod
    def ms(start: Any, end: Any) -> float:
        return float(start.elapsed_time(end))


class _HostClock:
    """The CPU's stand-in (the interpreter's time, which grades nothing):
    the same requests and replies, so the path is tested without a GPU."""

    @staticmethod
    def flush() -> None:
        return None

    @staticmethod
    def lead() -> None:
        return None

    @staticmethod
    def mark() -> float:
        return time.perf_counter()

    @staticmethod
    def sync() -> None:
        return None

    @staticmethod
    def ms(start: float, end: float) -> float:
        return (end - start) * 1e3


def _allocator(server: Any) -> None:
    """Scratch memory for device-side TMA descriptors (tl.make_tensor_descriptor
    asks Triton's allocator), as a learner's wrapper sets one: the replay's own."""
    if _device(server).type != "cuda":
        return
    import triton

    def alloc(size: int, alignment: int, stream: Any) -> torch.Tensor:
        return torch.empty(size, dtype=torch.int8, device="cuda")

    set_allocator = getattr(triton, "set_allocator", None)
    if set_allocator is not None:
        set_allocator(alloc)


def _step(step: TorchStep, buffers: list[torch.Tensor]) -> str:
    """A torch step as the wrapper ran it (the judge has checked its views)."""
    assert step.src is not None and step.dst is not None
    src, dst = _view(buffers, step.src), _view(buffers, step.dst)
    try:
        if step.op == "sum":
            dims = list(step.dims) if step.dims is not None else None
            value = torch.sum(src, dim=dims, keepdim=step.keepdim, dtype=dst.dtype)
            if tuple(value.shape) != tuple(dst.shape):
                return "the sum has another shape than its result"
            dst.copy_(value)
        else:
            dst.copy_(src)
    except (RuntimeError, ValueError, TypeError, IndexError) as exc:
        return f"{type(exc).__name__}: {str(exc)[:300]}"
    return ""
