"""The sandbox's loop: confine, import the learner's file, answer calls.

Frames come from the judge on the socket named by argv[1] (gpulab.wire.protocol).
The sandbox reports what it saw (the guards' findings, the kernel launches,
the learner's exceptions) as plain data; the judge decides.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpulab.sandbox.failure import LearnerFailure
from gpulab.sandbox.isolation import apply
from gpulab.wire import crashes, protocol, requests
from gpulab.wire.benches import Bench, BenchRequest, Exported, ExportRequest, MatmulBenchRequest
from gpulab.wire.calls import Audited, AuditEnd, CallRequest, Returned
from gpulab.wire.codec import check_version
from gpulab.wire.dynamo import (
    CompiledSteps,
    CompileRequest,
    DynamoConfig,
    DynamoConfigRequest,
    DynamoRequest,
    Modes,
    ModesRequest,
    Overhead,
    OverheadRequest,
    Stream,
    StreamRequest,
    Traced,
)
from gpulab.wire.explain import (
    ExplainCompile,
    ExplainCompiled,
    Explained,
    ExplainPrepare,
    ExplainRequest,
    Prepared,
    Profiled,
    ProfileRequest,
)
from gpulab.wire.fields import Frame
from gpulab.wire.protocol import JsonObject, ProtocolError, read_frame, write_frame
from gpulab.wire.replay import Replayed, ReplayRequest, ReplayTimed, ReplayTimeRequest
from gpulab.wire.replies import Broken, Raised
from gpulab.wire.requests import Request
from gpulab.wire.sandbox_start import (
    ArenaRequest,
    CompileAhead,
    CompiledAhead,
    Exit,
    Fatal,
    Held,
    Importing,
    Loaded,
    LoadRequest,
    Ok,
    PlainCall,
    PlainReturned,
    Prepare,
    Ready,
    SandboxConfig,
    Warm,
)
from gpulab.wire.timed_batch import Timed, TimeRequest
from gpulab.wire.training import Blocks, BottleneckRequest, Trained, TrainRequest

if TYPE_CHECKING:
    from gpulab.sandbox.overhead import CompiledStep


def import_ahead() -> None:
    """torch, Triton, the sandbox's own modules and the audit's profiler.
    Nothing here starts CUDA."""
    import torch  # noqa: F401
    import torch.autograd.profiler  # noqa: F401
    import triton  # noqa: F401
    import triton.language  # noqa: F401

    import gpulab.sandbox.calls  # noqa: F401 - takes torch's originals before any learner code
    import gpulab.sandbox.learner  # noqa: F401
    import gpulab.sandbox.printing  # noqa: F401 - torch's methods, before any learner code
    import gpulab.sandbox.tensors  # noqa: F401


def main(fd: int | None = None) -> None:
    """The sandbox, on the channel `fd` (argv[1] when started as a program;
    given by gpulab.sandbox.forkserver, which forks it with its imports done)."""
    fd = int(sys.argv[1]) if fd is None else fd
    try:
        # PR_SET_PDEATHSIG: if the judge dies, so does the sandbox.
        import ctypes

        ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    config = SandboxConfig.parse(read_frame(fd))
    try:
        check_version(config.protocol, "the judge")
    except ProtocolError as exc:  # a judge of another install: nothing runs
        write_frame(fd, Fatal(str(exc)).to_json())
        os._exit(3)
    # The judge's import path, in its order (PYTHONPATH before site-packages).
    judge_path = list(config.sys_path)
    sys.path[:] = judge_path + [p for p in sys.path if p not in judge_path]
    policy = config.policy
    if config.hold:
        # A spare's sandbox, started while another check may be timing: what
        # every check imports now (no GPU work in it), CUDA when the judge
        # says nobody times. A frame that is not `go` (or the judge gone)
        # ends it: it never ran anything.
        import_ahead()
        write_frame(fd, Held().to_json())
        try:
            go = read_frame(fd)
        except (EOFError, OSError, ProtocolError):
            os._exit(0)
        if go.get("type") != "go":
            os._exit(0)
    if config.device == "cuda":
        # Start CUDA before confining: the driver's start-up writes under
        # /proc that nothing after it needs (measured on the H200 machine).
        import torch

        init: Callable[[], None] = torch.cuda.init  # (untyped in torch)
        init()
        torch.empty(1, device="cuda")
        import gpulab.sandbox.calls  # noqa: F401 - takes torch's originals before any learner code
    try:
        in_force = apply(policy)
    except OSError as exc:
        write_frame(fd, Fatal(f"the sandbox could not confine itself: {exc}").to_json())
        os._exit(3)
    # The lab asks the judge where a check that ran out of time was; the
    # judge asks here with SIGUSR1, and the stack goes to the output it
    # reads (gpulab.judge.stuck). faulthandler prints from a C handler, so
    # a kernel looping in the interpreter still answers.
    import faulthandler
    import signal

    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # What the keeper could make (gpulab.sandbox.namespaces), first in the list.
    in_force.insert(0, "namespaces: " + os.environ.pop("GPULAB_NAMESPACES", "none (no keeper)"))
    # Sent before any learner code runs, so this report is the sandbox's own.
    write_frame(fd, Ready(tuple(in_force)).to_json())
    server = Server(fd, config)
    try:
        server.serve()
    except (EOFError, ProtocolError):
        pass
    except OSError:
        # Only the channel's reads and writes are outside serve's own
        # handler: the learner's code closed or broke it. Said by the exit
        # status, the one way left to tell the judge.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(crashes.CHANNEL_BROKEN)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no interpreter teardown: a learner's atexit hook can't hang the check


def _print_tensors() -> None:
    """print(x) in the learner's wrapper shows x without the torch maths the
    audit fails (gpulab.sandbox.printing), once torch is imported: on a GPU
    before any learner code (main imports it), which matters there, since a
    print's copies to the host pass the audit. On the CPU nothing is exempt,
    so a file that patched torch's methods at import gains nothing."""
    if "torch" in sys.modules:
        from gpulab.sandbox import printing

        printing.install()


def _fix_interpreter() -> None:
    """The Triton interpreter's known bugs fixed (bf16, tl.reduce's combine
    functions, autotune: gpulab.sandbox.interpreter_fixes), before any
    kernel runs here: in the check's sandbox before the learner's file is
    imported, in the replay's before it runs the kept kernels."""
    from gpulab.sandbox import interpreter_fixes

    interpreter_fixes.apply()


def _in_span(request: Request) -> bool:
    """A request that may run while the correctness calls' profile is on:
    one of those calls, an arena for one, or the request that ends it."""
    if isinstance(request, (ArenaRequest, AuditEnd)):
        return True
    if not isinstance(request, CallRequest):
        return False
    return request.guards is not None and request.guards.audit_span


def _decoded(value: str | None) -> bytes | None:
    if value is None:
        return None
    import base64

    return base64.b64decode(value, validate=True)


class Server:
    def __init__(self, fd: int, config: SandboxConfig) -> None:
        self.fd, self.config = fd, config
        self.device = config.device
        self.file = config.file
        self.module: Any = None
        # The file's bytes as the judge read them (config, or the first load).
        self.source: bytes | None = _decoded(config.source)
        self.problem = protocol.text(config.problem, 2000)
        self.arenas: dict[int, Any] = {}
        self.flusher: Any = None
        # --explain's kernels not compiled yet: each launch as its tracer
        # recorded it (gpulab.explain.sandbox.plugin) and the arch, by key.
        self.explain_pending: dict[str, tuple[Any, str]] = {}
        self.explain_module: Any = None  # the learner's file imported for a GPU (CPU --explain)
        self.span: Any = None  # the correctness calls' shared profile (audit.SpanAudit)
        self.binaries: Any = None  # the replay's compiled kernels (gpulab.sandbox.binaries)
        # Lesson 06's reduce-overhead step: its model and compiled step, kept
        # from the request that compiled them for the runs the judge times.
        self.overhead: CompiledStep | None = None

    def serve(self) -> None:
        while True:
            msg = read_frame(self.fd)
            try:
                route = route_of(msg)
                request = route.read(msg)
                if route.answer is None:  # exit
                    return
                if self.span is not None and not _in_span(request):
                    # The profile never runs under timing or another request's own
                    # profiler; its findings wait for `audit_end`.
                    self.span.close()
                reply = route.answer(self, request)
                out = reply.to_json()
            except LearnerFailure as exc:
                # Cut as the judge reads them (protocol.text): an exception
                # whose message is 20 MB would not fit in a frame.
                out = Raised(protocol.text(exc.summary), protocol.text(exc.message)).to_json()
            except Exception as exc:  # noqa: BLE001 - a sandbox bug or bad request
                out = Broken(
                    "broken", f"{type(exc).__name__}: {exc}", traceback.format_exc()
                ).to_json()
            self._reply(out)

    def _reply(self, out: JsonObject) -> None:
        """Send a reply. One that cannot be a frame (a value the learner's
        code returned: an int of more than 4300 digits, a string over the
        16 MiB a frame holds) is the learner's failure, said so: it used to
        end this process, and the learner read "your code exited (code 0)",
        told not to call sys.exit. Nothing is written before the JSON is
        made and measured, so the fallback is the only frame sent."""
        try:
            write_frame(self.fd, out)
        except (ValueError, TypeError, ProtocolError) as exc:
            why = protocol.text(f"{type(exc).__name__}: {exc}", 300)
            write_frame(
                self.fd,
                Raised(
                    f"what your code returned cannot be sent to the grader ({why})",
                    "The sandbox sends your function's result to the judge as data, at "
                    f"most {protocol.MAX_FRAME >> 20} MiB of it; this one could not be sent.",
                ).to_json(),
            )

    # --- requests ---------------------------------------------------------------

    def on_load(self, msg: LoadRequest) -> Loaded:
        from gpulab.sandbox.learner import LearnerError, load_module

        if self.device == "cpu":
            import warnings

            # The interpreter evaluates masked-off lanes too (numpy warns about
            # -inf - -inf there); that noise is not the learner's output.
            warnings.filterwarnings(
                "ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter"
            )
            _fix_interpreter()
        if self.module is None:
            if "dynamo" in msg.before_load:
                from gpulab.sandbox import dynamo

                dynamo.snapshot()
            if "jax" in msg.before_load:
                from gpulab.sandbox import jax_export

                jax_export.configure(self.device)  # before the file can start a backend
            if msg.source is not None:
                self.source = _decoded(msg.source)
            problem = protocol.text(msg.problem, 2000) or self.problem
            if self.source is None and problem:  # the judge could not read the file
                raise LearnerFailure(problem)
            _print_tensors()  # before the file runs where torch is imported already
            self.mark_importing()
            try:
                self.module = load_module(self.file, data=self.source)
            except LearnerError as exc:
                raise LearnerFailure(exc.summary, exc.message) from None
            _print_tensors()  # or after, where the file imported it
        return Loaded(tuple(n for n in msg.functions if self._defines(n)))

    def mark_importing(self) -> None:
        """Tell the judge the learner's file starts to run now (gpulab.wire.sandbox_start.
        Importing): what this sandbox says after it may be the file's."""
        write_frame(self.fd, Importing().to_json())

    def _defines(self, name: str) -> bool:
        """Whether the learner's module has a function `name`. Reading it runs
        the learner's code where the module has a __getattr__ or a property
        of its class: what that raises is the learner's failure (it was a
        "broken" reply, which the judge reports as its own error, "the
        sandbox could not load your file")."""
        from gpulab.sandbox.learner import described

        try:
            return callable(getattr(self.module, name, None))
        except Exception as exc:  # noqa: BLE001 - the learner's module's own code
            tb, last, _ = described(exc, self.file)
            raise LearnerFailure(f"reading `{name}` from your file raised {last}", tb) from None

    def on_arena(self, msg: ArenaRequest) -> Ok:
        import socket

        from gpulab.sandbox import tensors

        spec = msg.arena
        # The memory itself follows the frame as a descriptor (SCM_RIGHTS).
        with socket.socket(fileno=os.dup(self.fd)) as sock:
            _, fds, _, _ = socket.recv_fds(sock, 1, 1)
        if len(fds) != 1:
            raise ProtocolError("an arena frame without its memory")
        self.arenas[spec.id] = tensors.open_arena(spec, fds[0])
        return Ok()

    def on_warm(self, msg: Warm) -> Ok:
        """A sandbox started ahead of its check (gpulab.judge.prepared.Prepared):
        import now what every check imports, while no learner code exists."""
        if self.module is not None:
            raise ProtocolError("a warm-up asked after the file was loaded")
        import torch  # noqa: F401
        import triton  # noqa: F401
        import triton.language  # noqa: F401

        import gpulab.sandbox.calls  # noqa: F401 - takes torch's originals
        import gpulab.sandbox.learner  # noqa: F401
        import gpulab.sandbox.tensors  # noqa: F401
        from gpulab.sandbox.audit import Audit

        # The audit's profiler, once: its first start imports Dynamo and
        # Inductor (2 s on a 2-core CPU box), and on a GPU starts CUPTI.
        with Audit(self.device):
            pass
        return Ok()

    def on_prepare(self, msg: Prepare) -> Ok:
        """The replay's sandbox (gpulab.judge.replay): import now what a
        replay needs, while the check's sandbox works; never the file."""
        import warnings

        import triton  # noqa: F401

        import gpulab.sandbox.replay  # noqa: F401 - torch

        warnings.filterwarnings(
            "ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter"
        )
        if self.device == "cpu":
            _fix_interpreter()
        return Ok()

    def on_replay(self, msg: ReplayRequest) -> Replayed:
        from gpulab.sandbox.replay_run import replay

        if self.module is not None:  # a sandbox that ran the learner's file never replays
            raise ProtocolError("a replay asked of the check's own sandbox")
        if self.device == "cpu":
            _fix_interpreter()  # the check's sandbox ran the kernels so: the same numbers
        return replay(self, msg)

    def on_replay_time(self, msg: ReplayTimeRequest) -> ReplayTimed:
        from gpulab.sandbox.replay_run import replay_time

        if self.module is not None:  # as on_replay: never where the file ran
            raise ProtocolError("a replay asked of the check's own sandbox")
        return replay_time(self, msg)

    def on_audit_end(self, msg: AuditEnd) -> Audited:
        from gpulab.sandbox.calls import audit_end

        return audit_end(self)

    def on_call(self, msg: CallRequest | PlainCall) -> Returned | PlainReturned:
        if isinstance(msg, PlainCall):
            from gpulab.sandbox.plain import plain_call

            return plain_call(self, msg)
        from gpulab.sandbox.calls import guarded_call

        return guarded_call(self, msg)

    def on_dynamo(self, msg: DynamoRequest) -> Traced:
        from gpulab.sandbox.dynamo import dynamo_request

        return dynamo_request(self, msg)

    def on_dynamo_config(self, msg: DynamoConfigRequest) -> DynamoConfig:
        from gpulab.sandbox.dynamo import config_request

        return config_request(self, msg)

    def on_modes(self, msg: ModesRequest) -> Modes:
        from gpulab.sandbox.dynamo import modes_request

        return modes_request(self, msg)

    def on_compiled(self, msg: CompileRequest) -> CompiledSteps:
        from gpulab.sandbox.dynamo import compiled_request

        return compiled_request(self, msg)

    def on_compile_stream(self, msg: StreamRequest) -> Stream:
        from gpulab.sandbox.recompiles import stream_request

        return stream_request(self, msg)

    def on_copy_bench(self, msg: BenchRequest) -> Bench:
        from gpulab.sandbox.ceiling import bench_request

        return bench_request(self, msg)

    def on_matmul_bench(self, msg: MatmulBenchRequest) -> Bench:
        from gpulab.sandbox.flops import matmul_bench_request

        return matmul_bench_request(self, msg)

    def on_jax_export(self, msg: ExportRequest) -> Exported:
        from gpulab.sandbox.jax_export import export_request

        return export_request(self, msg)

    def on_train(self, msg: TrainRequest) -> Trained | Raised:
        from gpulab.sandbox.training import train_request

        return train_request(self, msg)

    def on_bottleneck(self, msg: BottleneckRequest) -> Blocks:
        from gpulab.sandbox.bottleneck import block_request

        return block_request(self, msg)

    def on_overhead(self, msg: OverheadRequest) -> Overhead:
        from gpulab.sandbox.overhead import overhead_request

        return overhead_request(self, msg)

    def on_compile_ahead(self, msg: CompileAhead) -> CompiledAhead:
        """The cases' kernels compiled ahead, side by side (speed only)."""
        from gpulab.sandbox.ahead import ahead_request

        return ahead_request(self, msg)

    def on_time(self, msg: TimeRequest) -> Timed:
        from gpulab.sandbox.calls import timed_batch

        return timed_batch(self, msg)

    def on_explain(self, msg: ExplainRequest) -> Explained:
        """Launch and compile facts for `--explain` (advice, not part of the grade)."""
        from gpulab.explain.sandbox.plugin import explain_request
        from gpulab.sandbox.learner import load_module

        return explain_request(self, msg, load_module)

    def on_explain_prepare(self, msg: ExplainPrepare) -> Prepared:
        from gpulab.explain.sandbox.plugin import prepare_request
        from gpulab.sandbox.learner import load_module

        return prepare_request(self, msg, load_module)

    def on_explain_compile(self, msg: ExplainCompile) -> ExplainCompiled:
        from gpulab.explain.sandbox.plugin import compile_request

        return compile_request(self, msg)

    def on_profile(self, msg: ProfileRequest) -> Profiled:
        """One call under Nsight Compute for `--explain` (advice, not part of the grade)."""
        from gpulab.explain.sandbox.profile import profile_request

        return profile_request(self, msg)

    # --- helpers ------------------------------------------------------------------

    def span_audit(self, sum_width: int) -> Any:
        """The shared profile of the correctness calls, started by the first
        (audit.SpanAudit); one that was closed is not reopened."""
        from gpulab.sandbox.audit import SpanAudit

        if self.span is None:
            self.span = SpanAudit(self.device, sum_width)
        elif self.span.result is not None:
            raise ProtocolError("a graded call for a profile that has ended")
        return self.span

    def function(self, name: str) -> Any:
        from gpulab.sandbox.learner import get_function

        try:
            return get_function(self.module, name, self.file)
        except Exception as exc:  # LearnerError
            raise LearnerFailure(
                getattr(exc, "summary", str(exc)), getattr(exc, "message", "")
            ) from None


@dataclass(frozen=True, slots=True)
class Route:
    """How the sandbox answers one type of request: `read` makes the frame
    its typed request (the frame class's own `parse`, or, for `call`, which
    is a CallRequest or a PlainCall, gpulab.wire.requests' reader), `answer` is the Server's method that replies to it (None:
    `exit`, which ends the loop unanswered)."""

    read: Callable[[JsonObject], Request]
    answer: Callable[[Server, Any], Frame] | None


# Every request the sandbox answers, by its `type`: a type not here is
# refused by name (a `broken` reply), before anything reads the frame.
ROUTES: dict[str, Route] = {
    # start-up, the file, shared memory
    LoadRequest.TYPE: Route(LoadRequest.parse, Server.on_load),
    ArenaRequest.TYPE: Route(ArenaRequest.parse, Server.on_arena),
    Warm.TYPE: Route(Warm.parse, Server.on_warm),
    Prepare.TYPE: Route(Prepare.parse, Server.on_prepare),
    Exit.TYPE: Route(Exit.parse, None),
    # the kernel path (gpulab.wire.calls, timed_batch, sandbox_start);
    # `call` is a PlainCall too, told apart by gpulab.wire.requests
    "call": Route(requests.request, Server.on_call),
    AuditEnd.TYPE: Route(AuditEnd.parse, Server.on_audit_end),
    CompileAhead.TYPE: Route(CompileAhead.parse, Server.on_compile_ahead),
    TimeRequest.TYPE: Route(TimeRequest.parse, Server.on_time),
    # the replay's sandbox
    ReplayRequest.TYPE: Route(ReplayRequest.parse, Server.on_replay),
    ReplayTimeRequest.TYPE: Route(ReplayTimeRequest.parse, Server.on_replay_time),
    # torch.compile and Dynamo (lesson 06)
    DynamoRequest.TYPE: Route(DynamoRequest.parse, Server.on_dynamo),
    DynamoConfigRequest.TYPE: Route(DynamoConfigRequest.parse, Server.on_dynamo_config),
    ModesRequest.TYPE: Route(ModesRequest.parse, Server.on_modes),
    CompileRequest.TYPE: Route(CompileRequest.parse, Server.on_compiled),
    StreamRequest.TYPE: Route(StreamRequest.parse, Server.on_compile_stream),
    OverheadRequest.TYPE: Route(OverheadRequest.parse, Server.on_overhead),
    # the learner's own benchmarks and exports
    BenchRequest.TYPE: Route(BenchRequest.parse, Server.on_copy_bench),
    MatmulBenchRequest.TYPE: Route(MatmulBenchRequest.parse, Server.on_matmul_bench),
    ExportRequest.TYPE: Route(ExportRequest.parse, Server.on_jax_export),
    # training and profiling (lesson 07)
    TrainRequest.TYPE: Route(TrainRequest.parse, Server.on_train),
    BottleneckRequest.TYPE: Route(BottleneckRequest.parse, Server.on_bottleneck),
    # --explain (advice, never part of the grade)
    ExplainRequest.TYPE: Route(ExplainRequest.parse, Server.on_explain),
    ExplainPrepare.TYPE: Route(ExplainPrepare.parse, Server.on_explain_prepare),
    ExplainCompile.TYPE: Route(ExplainCompile.parse, Server.on_explain_compile),
    ProfileRequest.TYPE: Route(ProfileRequest.parse, Server.on_profile),
}


def route_of(msg: JsonObject) -> Route:
    """The route of a frame's type; a ProtocolError naming a type the
    sandbox does not answer."""
    kind = msg.get("type")
    route = ROUTES.get(kind) if isinstance(kind, str) else None
    if route is None:
        raise ProtocolError(f"a request of unknown type {protocol.text(kind, 40)!r}")
    return route


if __name__ == "__main__":
    main()
