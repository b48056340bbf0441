"""Counting while Triton's interpreter runs: the hooks that feed
gpulab.sandbox.costcount's `Counts` (which says what is counted and why).

`counting()` patches the interpreter's builder and its grid executor for as
long as it is open and puts them back after; `trace_launch` is one launch
under it, with per-element maps (a puzzle's view, issue 47).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from gpulab.sandbox.costcount import ARITH, SPECIAL, Counts, LaunchJson


@contextlib.contextmanager
def counting(maps: bool = False) -> Iterator[Counts]:
    """Count what kernels run by Triton's interpreter do while this is open."""
    import numpy as np
    from triton.runtime import interpreter as interp

    counts = Counts(maps)
    builder = interp.interpreter_builder
    executor = interp.GridExecutor
    saved_builder: dict[str, Any] = {}
    saved_exec = executor.__call__
    saved_init = executor._init_args_hst

    def patch(name: str, make: Any) -> None:
        if hasattr(builder, name):
            saved_builder[name] = builder.__dict__.get(name, _MISSING)
            setattr(builder, name, make(getattr(builder, name)))

    def init_args(self: Any, args_dev: Any, kwargs: Any) -> Any:
        args_hst, kwargs_hst = saved_init(self, args_dev, kwargs)
        named = dict(zip(self.arg_names, args_hst, strict=False))
        named.update(kwargs_hst)
        counts.safely(counts.begin, getattr(self.fn, "__name__", "kernel"), named)
        return args_hst, kwargs_hst

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return saved_exec(self, *args, **kwargs)
        finally:
            counts.current = None

    def set_grid_idx(orig: Any) -> Any:
        def wrapped(x: int, y: int, z: int, *rest: Any) -> Any:
            out = orig(x, y, z, *rest)
            counts.safely(counts.program, x, y, z, builder.grid_dim)
            return out

        return wrapped

    # Block pointers, tensor descriptors and plain pointers all end in these
    # two (Triton 3.6 to 3.9), so each access is counted once.
    def masked_load(orig: Any) -> Any:
        def wrapped(ptrs: Any, mask: Any, other: Any, *rest: Any, **kw: Any) -> Any:
            counts.safely(counts.access, "load", ptrs, mask)
            return orig(ptrs, mask, other, *rest, **kw)

        return wrapped

    def masked_store(orig: Any) -> Any:
        def wrapped(ptrs: Any, value: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
            counts.safely(counts.access, "store", ptrs, mask)
            return orig(ptrs, value, mask, *rest, **kw)

        return wrapped

    def atomic_rmw(orig: Any) -> Any:
        def wrapped(op: Any, ptr: Any, val: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
            # An atomic reads and writes its element: counted as both.
            counts.safely(counts.access, "load", ptr, mask)
            counts.safely(counts.access, "store", ptr, mask)
            return orig(op, ptr, val, mask, *rest, **kw)

        return wrapped

    def dot(orig: Any) -> Any:
        def wrapped(a: Any, b: Any, *rest: Any, **kw: Any) -> Any:
            counts.safely(counts.dot, np.shape(a.data), np.shape(b.data))
            return orig(a, b, *rest, **kw)

        return wrapped

    def elementwise(flops: int, special: bool) -> Any:
        def make(orig: Any) -> Any:
            def wrapped(*args: Any, **kw: Any) -> Any:
                out = orig(*args, **kw)
                data = getattr(out, "data", None)
                if data is not None and getattr(data.dtype, "kind", "") == "f":
                    counts.safely(counts.arith, int(data.size), flops, special)
                return out

            return wrapped

        return make

    try:
        executor._init_args_hst = init_args
        executor.__call__ = call
        patch("set_grid_idx", set_grid_idx)
        patch("create_masked_load", masked_load)
        patch("create_masked_store", masked_store)
        patch("create_atomic_rmw", atomic_rmw)
        patch("create_dot", dot)
        patch("create_fma", elementwise(2, False))
        for name in ARITH:
            patch(name, elementwise(1, False))
        for name in SPECIAL:
            patch(name, elementwise(1, True))
        yield counts
    finally:
        executor._init_args_hst = saved_init
        executor.__call__ = saved_exec
        for name, was in saved_builder.items():
            if was is _MISSING:
                with contextlib.suppress(AttributeError):
                    delattr(builder, name)
            else:
                setattr(builder, name, was)


_MISSING = object()


def trace_launch(kernel: Any, grid: Any, *args: Any, **kwargs: Any) -> LaunchJson:
    """One launch, `kernel[grid](*args, **kwargs)`, run by the interpreter with
    per-element maps: its counts, as `Counts.to_json()` gives a launch, with
    each small tensor's "map" (per element and per program, "programs":
    {id: {"loaded", "stored", "masked"}}). For a puzzle that shows what each
    program loaded (issue 47); gpulab.gpu.loadmap.launch_renderable draws it.
    TRITON_INTERPRET=1 must have been set before the kernel was decorated."""
    with counting(maps=True) as counts:
        kernel[grid](*args, **kwargs)
    found = counts.to_json()["launches"]
    if not found:
        raise RuntimeError("no launch was counted: is TRITON_INTERPRET=1 set?")
    return found[0]
