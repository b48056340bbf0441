"""The sandbox's loop: confine, import the learner's file, answer calls.

Frames come from the judge on the socket named by argv[1] (gpulab.check.protocol).
The sandbox reports what it saw (the guards' findings, the kernel launches,
the learner's exceptions) as plain data; the judge decides.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any

from gpulab.check import protocol
from gpulab.check.frames import CallRequest
from gpulab.check.protocol import ProtocolError, read_frame, write_frame
from gpulab.sandbox.failure import LearnerFailure
from gpulab.sandbox.isolation import Policy, apply


def main() -> None:
    fd = int(sys.argv[1])
    try:
        # PR_SET_PDEATHSIG: if the judge dies, so does the sandbox.
        import ctypes

        ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    config = read_frame(fd)
    # The judge's import path, in its order (PYTHONPATH before site-packages).
    judge_path = [p for p in config.get("sys_path", []) if isinstance(p, str)]
    sys.path[:] = judge_path + [p for p in sys.path if p not in judge_path]
    policy = Policy(**config["policy"])
    if config["device"] == "cuda":
        # Start CUDA before confining: the driver's start-up writes under
        # /proc that nothing after it needs (measured on the H200 machine).
        import torch

        torch.cuda.init()
        torch.empty(1, device="cuda")
        import gpulab.sandbox.calls  # noqa: F401 - takes torch's originals before any learner code
    try:
        in_force = apply(policy)
    except OSError as exc:
        write_frame(
            fd, {"type": "fatal", "summary": f"the sandbox could not confine itself: {exc}"}
        )
        os._exit(3)
    # What the keeper could make (gpulab.sandbox.namespaces), first in the list.
    in_force.insert(0, "namespaces: " + os.environ.pop("GPULAB_NAMESPACES", "none (no keeper)"))
    # Sent before any learner code runs, so this report is the sandbox's own.
    write_frame(fd, {"type": "ready", "isolation": in_force})
    server = Server(fd, config)
    try:
        server.serve()
    except (EOFError, ProtocolError):
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no interpreter teardown: a learner's atexit hook can't hang the check


def _in_span(msg: dict[str, Any]) -> bool:
    """A request that may run while the correctness calls' profile is on:
    one of those calls, an arena for one, or the request that ends it."""
    kind = msg.get("type")
    if kind in ("arena", "audit_end"):
        return True
    if kind != "call" or msg.get("plain"):
        return False
    guards = CallRequest.parse(msg).guards
    return guards is not None and guards.audit_span


def _decoded(value: Any) -> bytes | None:
    if not isinstance(value, str):
        return None
    import base64

    return base64.b64decode(value, validate=True)


class Server:
    def __init__(self, fd: int, config: dict[str, Any]) -> None:
        self.fd, self.config = fd, config
        self.device = config["device"]
        self.file = config["file"]
        self.module: Any = None
        # The file's bytes as the judge read them (config, or the first load).
        self.source: bytes | None = _decoded(config.get("source"))
        self.problem = protocol.text(config.get("problem"), 2000)
        self.arenas: dict[int, Any] = {}
        self.flusher: Any = None
        self.explain_pending: dict[str, Any] = {}  # --explain's kernels not compiled yet
        self.explain_module: Any = None  # the learner's file imported for a GPU (CPU --explain)
        self.span: Any = None  # the correctness calls' shared profile (audit.SpanAudit)

    def serve(self) -> None:
        while True:
            msg = read_frame(self.fd)
            kind = msg["type"]
            if kind == "exit":
                return
            try:
                if self.span is not None and not _in_span(msg):
                    # The profile never runs under timing or another request's own
                    # profiler; its findings wait for `audit_end`.
                    self.span.close()
                reply = getattr(self, f"on_{kind}")(msg)
            except LearnerFailure as exc:
                reply = {"type": "raised", "summary": exc.summary, "message": exc.message}
            except Exception as exc:  # noqa: BLE001 - a sandbox bug or bad request
                reply = {
                    "type": "broken",
                    "summary": f"{type(exc).__name__}: {exc}",
                    "message": traceback.format_exc(),
                }
            write_frame(self.fd, reply)

    # --- requests ---------------------------------------------------------------

    def on_load(self, msg: dict[str, Any]) -> dict[str, Any]:
        from gpulab.sandbox.learner import LearnerError, load_module

        if self.device == "cpu":
            import warnings

            # The interpreter evaluates masked-off lanes too (numpy warns about
            # -inf - -inf there); that noise is not the learner's output.
            warnings.filterwarnings(
                "ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter"
            )
        if self.module is None:
            if "dynamo" in msg.get("before_load", []):
                from gpulab.sandbox import dynamo

                dynamo.snapshot()
            if "jax" in msg.get("before_load", []):
                from gpulab.sandbox import jax_export

                jax_export.configure(self.device)  # before the file can start a backend
            if isinstance(msg.get("source"), str):
                self.source = _decoded(msg["source"])
            problem = protocol.text(msg.get("problem"), 2000) or self.problem
            if self.source is None and problem:  # the judge could not read the file
                raise LearnerFailure(problem)
            try:
                self.module = load_module(self.file, data=self.source)
            except LearnerError as exc:
                raise LearnerFailure(exc.summary, exc.message) from None
        names = [n for n in msg.get("functions", []) if callable(getattr(self.module, n, None))]
        return {"type": "loaded", "functions": names}

    def on_arena(self, msg: dict[str, Any]) -> dict[str, Any]:
        import socket

        from gpulab.sandbox import tensors

        spec = protocol.ArenaSpec(**msg["arena"])
        # The memory itself follows the frame as a descriptor (SCM_RIGHTS).
        with socket.socket(fileno=os.dup(self.fd)) as sock:
            _, fds, _, _ = socket.recv_fds(sock, 1, 1)
        if len(fds) != 1:
            raise ProtocolError("an arena frame without its memory")
        self.arenas[spec.id] = tensors.open_arena(spec, fds[0])
        return {"type": "ok"}

    def on_warm(self, msg: dict[str, Any]) -> dict[str, Any]:
        """A sandbox started ahead of its check (gpulab.judge.main.Prepared):
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
        return {"type": "ok"}

    def on_prepare(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The replay's sandbox (gpulab.judge.replay): import now what a
        replay needs, while the check's sandbox works; never the file."""
        import warnings

        import triton  # noqa: F401

        import gpulab.sandbox.replay  # noqa: F401 - torch

        warnings.filterwarnings(
            "ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter"
        )
        return {"type": "ok"}

    def on_replay(self, msg: dict[str, Any]) -> dict[str, Any]:
        from gpulab.sandbox.replay import replay

        if self.module is not None:  # a sandbox that ran the learner's file never replays
            raise ProtocolError("a replay asked of the check's own sandbox")
        return replay(self, msg)

    def on_audit_end(self, msg: dict[str, Any]) -> dict[str, Any]:
        from gpulab.sandbox.calls import audit_end

        return audit_end(self)

    def on_call(self, msg: dict[str, Any]) -> dict[str, Any]:
        if msg.get("plain"):
            from gpulab.sandbox.plain import plain_call

            return plain_call(self, msg)
        from gpulab.sandbox.calls import guarded_call

        return guarded_call(self, msg)

    def on_dynamo(self, msg: dict[str, Any]) -> dict[str, Any]:
        from gpulab.sandbox.dynamo import dynamo_request

        return dynamo_request(self, msg)

    def on_dynamo_config(self, msg: dict[str, Any]) -> dict[str, Any]:
        from gpulab.sandbox.dynamo import config_request

        return config_request(self, msg)

    def on_modes(self, msg: dict[str, Any]) -> dict[str, Any]:
        from gpulab.sandbox.dynamo import modes_request

        return modes_request(self, msg)

    def on_compiled(self, msg: dict[str, Any]) -> dict[str, Any]:
        from gpulab.sandbox.dynamo import compiled_request

        return compiled_request(self, msg)

    def on_compile_stream(self, msg: dict[str, Any]) -> dict[str, Any]:
        from gpulab.sandbox.recompiles import stream_request

        return stream_request(self, msg)

    def on_copy_bench(self, msg: dict[str, Any]) -> dict[str, Any]:
        from gpulab.sandbox.ceiling import bench_request

        return bench_request(self, msg)

    def on_jax_export(self, msg: dict[str, Any]) -> dict[str, Any]:
        from gpulab.sandbox.jax_export import export_request

        return export_request(self, msg)

    def on_train(self, msg: dict[str, Any]) -> dict[str, Any]:
        from gpulab.sandbox.training import train_request

        return train_request(self, msg)

    def on_bottleneck(self, msg: dict[str, Any]) -> dict[str, Any]:
        from gpulab.sandbox.bottleneck import block_request

        return block_request(self, msg)

    def on_compile_ahead(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The cases' kernels compiled ahead, side by side (speed only)."""
        from gpulab.sandbox.ahead import ahead_request

        return ahead_request(self, msg)

    def on_time(self, msg: dict[str, Any]) -> dict[str, Any]:
        from gpulab.sandbox.calls import timed_batch

        return timed_batch(self, msg)

    def on_explain(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Launch and compile facts for `--explain` (advice, not part of the grade)."""
        from gpulab.diagnosis.sandbox_side import explain_request

        return explain_request(self, msg)

    def on_explain_prepare(self, msg: dict[str, Any]) -> dict[str, Any]:
        from gpulab.diagnosis.sandbox_side import prepare_request

        return prepare_request(self, msg)

    def on_explain_compile(self, msg: dict[str, Any]) -> dict[str, Any]:
        from gpulab.diagnosis.sandbox_side import compile_request

        return compile_request(self, msg)

    def on_profile(self, msg: dict[str, Any]) -> dict[str, Any]:
        """One call under Nsight Compute for `--explain` (advice, not part of the grade)."""
        from gpulab.diagnosis.sandbox_profile import profile_request

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


if __name__ == "__main__":
    main()
