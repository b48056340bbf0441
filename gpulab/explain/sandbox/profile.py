"""The sandbox's part of `--explain`'s Nsight Compute step: one call of the
learner's function between cudaProfilerStart and cudaProfilerStop.

This sandbox runs under ncu (`--profile-from-start off`), so ncu counts the
kernels of that one call and nothing else: not the imports, not the inputs
being built, not the warm-up call that compiles and autotunes. No audit runs
here (its torch.profiler uses CUPTI, which conflicts with ncu's). Advice
only: the judge reads ncu's own output, not this reply, for the numbers.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from gpulab.wire.explain import Profiled, ProfileRequest


def profile_request(server: Any, msg: ProfileRequest) -> Profiled:
    """The function once on the case, between cudaProfilerStart and Stop ->
    the names of the kernels the profiled call launched."""
    import torch

    from gpulab.explain.sandbox.plugin import build
    from gpulab.explain.sandbox.trace import LaunchTracer

    start = time.monotonic()
    fn = server.function(msg.function)  # a LearnerFailure is the serve loop's reply
    case = msg.case
    cuda = server.device == "cuda"
    gen = torch.Generator(device=server.device).manual_seed(msg.seed)
    profiler: Any = torch.cuda.profiler  # untyped in torch
    args = build(case.get("args", []), server.device, gen)
    kwargs = build(case.get("kwargs", {}), server.device, gen)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    tracer = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(msg.warmup):  # compiling, autotuning, choosing
                fn(*args, **kwargs)
            sync()
            warmed = time.monotonic()
            if cuda:
                profiler.start()  # cudaProfilerStart: ncu counts from here
            try:
                with LaunchTracer(dry=False) as tracer:
                    fn(*args, **kwargs)
                sync()
            finally:
                if cuda:
                    profiler.stop()
    except Exception as exc:  # noqa: BLE001 - advice only: say why
        return Profiled(
            error=f"{type(exc).__name__}: {exc}"[:300],
            kernels=tuple(la["kernel"] for la in (tracer.launches if tracer else [])),
        )
    done = time.monotonic()
    return Profiled(
        case=str(case.get("name", "?")),
        kernels=tuple(la["kernel"] for la in tracer.launches),
        steps={"warmup": round(warmed - start, 2), "profiled": round(done - warmed, 2)},
    )


__all__ = ["profile_request"]
