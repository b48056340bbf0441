"""Record each Triton launch of the learner's code with what compiling it
needs: the function, its argument types, constexprs, num_warps/num_stages,
and the grid (evaluated, so programs can be counted against SMs).

Runs in the sandbox only (it touches the learner's kernels). `dry=True`
(the CPU, where there is no GPU to launch on) records and skips the launch;
an autotuned kernel, which nothing can time there, is recorded once for
each config its autotuner would try on these arguments (after the kernel's
own pruning): launches of one `group`, `candidate` 0..n-1. The judge then
explains the one the autotuner would most likely keep (diagnosis/candidates.py).
"""

from __future__ import annotations

import math
from typing import Any

from gpulab.explain.facts import TracedLaunch

_DTYPES = {
    "float16": "fp16",
    "bfloat16": "bf16",
    "float32": "fp32",
    "float64": "fp64",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "bool": "i1",
    "float8_e4m3fn": "fp8e4nv",
    "float8_e5m2": "fp8e5",
}


def arg_type(v: Any) -> str | None:
    """A Triton signature type for a runtime argument; None if not handled."""
    import torch

    if isinstance(v, torch.Tensor):
        return "*" + _DTYPES.get(str(v.dtype).replace("torch.", ""), "fp32")
    if isinstance(v, bool):
        return "i1"
    if isinstance(v, int):
        return "i32" if -(2**31) <= v < 2**31 else "i64"
    if isinstance(v, float):
        return "fp32"
    return None


def specialization(param: Any, v: Any) -> tuple[str | None, str | None]:
    """(type, key) as Triton's launcher specialises `v` for `param`: an int
    1 becomes ("constexpr", 1), a multiple of 16 gets key "D". Triton's own
    function where it has one (3.4+), honouring the kernel's
    do_not_specialize lists; else `arg_type` and no key."""
    try:
        from triton._C.libtriton import native_specialize_impl
        from triton.backends.compiler import BaseBackend
    except ImportError:  # pragma: no cover - an older Triton
        return arg_type(v), None
    if isinstance(v, bool) or arg_type(v) is None:
        return arg_type(v), None
    specialize = not getattr(param, "do_not_specialize", False)
    align = not getattr(param, "do_not_specialize_on_alignment", False)
    try:
        t, key = native_specialize_impl(BaseBackend, v, False, specialize, align)[:2]
    except Exception:  # noqa: BLE001 - anything it cannot take: the plain type
        return arg_type(v), None
    if t == "constexpr":
        return t, None
    return arg_type(v), (key if isinstance(key, str) else None)


class LaunchTracer:
    def __init__(self, dry: bool) -> None:
        self.dry = dry
        self.launches: list[TracedLaunch] = []
        self._patched: list[tuple[type, str, Any]] = []
        self.autotuned = 0
        self._groups = 0

    def __enter__(self) -> LaunchTracer:
        from triton.runtime import jit

        self._patch(jit.JITFunction, "run", self._run_wrapper)
        try:
            from triton.runtime.interpreter import InterpretedFunction

            self._patch(InterpretedFunction, "run", self._run_wrapper)
        except ImportError:  # pragma: no cover
            pass
        if self.dry:
            from triton.runtime.autotuner import Autotuner

            self._patch(Autotuner, "run", self._autotune_wrapper)
        return self

    def __exit__(self, *exc: object) -> None:
        for cls, attr, original in reversed(self._patched):
            setattr(cls, attr, original)
        self._patched.clear()

    def _patch(self, cls: type, attr: str, make: Any) -> None:
        original = getattr(cls, attr)
        self._patched.append((cls, attr, original))
        setattr(cls, attr, make(original))

    def _run_wrapper(self, original: Any) -> Any:
        tracer = self

        def run(fn: Any, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> Any:
            if not warmup:
                tracer.record(fn, args, kwargs, grid)
            if tracer.dry:
                return None
            return original(fn, *args, grid=grid, warmup=warmup, **kwargs)

        return run

    def _autotune_wrapper(self, original: Any) -> Any:
        tracer = self

        def run(tuner: Any, *args: Any, **kwargs: Any) -> Any:
            configs = list(getattr(tuner, "configs", []) or [])
            if not configs:
                return original(tuner, *args, **kwargs)
            try:  # the kernel's own pruning (early_config_prune, perf_model)
                tuner.nargs = dict(zip(tuner.arg_names, args, strict=False))
                configs = list(tuner.prune_configs(kwargs)) or configs
            except Exception:  # noqa: BLE001 - a pruner that needs real tensors
                pass
            tracer.autotuned = max(tracer.autotuned, len(configs))
            group, tracer._groups = tracer._groups, tracer._groups + 1
            for i, config in enumerate(configs):
                first = len(tracer.launches)
                tuner.fn.run(*args, **kwargs, **config.all_kwargs())
                for la in tracer.launches[first:]:
                    la["group"], la["candidate"], la["of"] = group, i, len(configs)
            return None

        return run

    def record(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any) -> None:
        """One launch of `fn`: its arguments, and the keyword arguments the
        launch was given (the kernel's and Triton's own: any values)."""
        params = list(getattr(fn, "params", []))
        names = [p.name for p in params] or list(getattr(fn, "arg_names", []))
        bound = dict(zip(names, args, strict=False))
        bound.update({k: v for k, v in kwargs.items() if k in names})
        for p in params:
            if p.name not in bound and p.has_default:
                bound[p.name] = p.default
        constexprs: dict[str, Any] = {}  # by name, as the learner's code passed them
        sig: dict[str, str] = {}
        problem = ""
        divisible: list[str] = []  # integers a multiple of 16, as Triton specialises
        ones: list[str] = []  # integers equal to 1: constexprs to Triton, not to the author
        tensors: dict[
            str, tuple[int, int]
        ] = {}  # name -> (storage address, bytes): which launches share a buffer
        for i, name in enumerate(names):
            is_ce = params[i].is_constexpr if params else False
            v = bound.get(name)
            if is_ce:
                sig[name] = "constexpr"
                constexprs[name] = v
            elif v is None:
                sig[name] = "constexpr"
                constexprs[name] = None
            else:
                t, key = specialization(params[i] if params else None, v)
                if t == "constexpr":  # Triton compiles a launch's 1s in
                    sig[name] = "constexpr"
                    constexprs[name] = v
                    ones.append(name)
                    continue
                if key == "D" and t is not None and not t.startswith("*"):
                    divisible.append(name)
                if t and t.startswith("*"):
                    st = v.untyped_storage()
                    tensors[name] = (st.data_ptr(), st.nbytes())
                if t is None:
                    problem = f"argument {name} is a {type(v).__name__} (TMA descriptors are not analysed)"
                sig[name] = t or "i32"
        g = grid(dict(bound, **kwargs)) if callable(grid) else grid
        g = tuple(int(x) for x in (g if isinstance(g, (tuple, list)) else (g,))) if g else (1,)
        self.launches.append(
            {
                "kernel": getattr(getattr(fn, "fn", fn), "__name__", "?"),
                "fn": fn,
                "signature": sig,
                "constexprs": constexprs,
                "divisible": divisible,
                "ones": ones,
                "grid": list(g),
                "programs": math.prod(g),
                "num_warps": int(kwargs.get("num_warps") or 4),
                "num_stages": int(kwargs.get("num_stages") or 3),
                "problem": problem,
                "tensors": tensors,
            }
        )


__all__ = ["LaunchTracer", "arg_type"]
