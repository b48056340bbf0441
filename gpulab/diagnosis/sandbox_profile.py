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


def random_inputs(obj: Any, device: str, gen: Any) -> Any:
    """The judge's argument description -> values, floating tensors filled
    with N(0, 1) (values can matter: a causal mask, a NaN path), the others
    with zeros (an index of zeros is always in range)."""
    import torch

    if isinstance(obj, dict) and "__tensor__" in obj:
        t = obj["__tensor__"]
        shape, stride, off = list(t["shape"]), list(t["stride"]), int(t.get("offset", 0))
        need = off + sum((s - 1) * st for s, st in zip(shape, stride, strict=True)) + 1
        dtype = getattr(torch, t["dtype"])
        base = torch.empty(max(need, 1) if all(shape) else 1, dtype=dtype, device=device)
        if base.is_floating_point():
            base.normal_(generator=gen)
        else:
            base.zero_()
        return base.as_strided(shape, stride, off)
    if isinstance(obj, dict) and "__tuple__" in obj:
        return tuple(random_inputs(v, device, gen) for v in obj["__tuple__"])
    if isinstance(obj, list):
        return [random_inputs(v, device, gen) for v in obj]
    if isinstance(obj, dict):
        return {k: random_inputs(v, device, gen) for k, v in obj.items()}
    return obj


def profile_request(server: Any, msg: dict[str, Any]) -> dict[str, Any]:
    """{"function", "case": {name, args, kwargs}, "warmup", "seed"} ->
    {"type": "profiled", "kernels": [names launched in the profiled call]}."""
    import torch

    from gpulab.diagnosis.trace import LaunchTracer

    start = time.monotonic()
    fn = server.function(msg["function"])  # a LearnerFailure is the serve loop's reply
    case = msg.get("case") or {}
    cuda = server.device == "cuda"
    gen = torch.Generator(device=server.device).manual_seed(int(msg.get("seed", 0)))
    args = random_inputs(case.get("args", []), server.device, gen)
    kwargs = random_inputs(case.get("kwargs", {}), server.device, gen)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    tracer = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(int(msg.get("warmup", 1))):  # compiling, autotuning, choosing
                fn(*args, **kwargs)
            sync()
            warmed = time.monotonic()
            if cuda:
                torch.cuda.profiler.start()  # cudaProfilerStart: ncu counts from here
            try:
                with LaunchTracer(dry=False) as tracer:
                    fn(*args, **kwargs)
                sync()
            finally:
                if cuda:
                    torch.cuda.profiler.stop()
    except Exception as exc:  # noqa: BLE001 - advice only: say why
        return {
            "type": "profiled",
            "error": f"{type(exc).__name__}: {exc}"[:300],
            "kernels": [la["kernel"] for la in (tracer.launches if tracer else [])],
        }
    done = time.monotonic()
    return {
        "type": "profiled",
        "case": case.get("name", "?"),
        "kernels": [la["kernel"] for la in tracer.launches],
        "steps": {"warmup": round(warmed - start, 2), "profiled": round(done - warmed, 2)},
    }


__all__ = ["profile_request", "random_inputs"]
