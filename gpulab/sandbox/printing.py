"""`print(x)` in a learner's wrapper: the tensor's values, without torch maths.

torch's own tensor formatting (`torch._tensor_str`) works out its number
format with torch ops: `abs`, `ceil`, `masked_select`, `__and__`, `eq`,
`div`... The profiler's audit (gpulab.sandbox.audit) sees them run inside
the graded call and fails it as torch doing the maths, so printing an input
to look at it read as cheating (issue 48).

So the sandbox formats a plain tensor itself: it reads the values to show
(all of them up to torch's print threshold, else the edge items torch shows)
with views and copies only, and lays them out in Python, as torch does. No
op it runs is outside the audit's wrapper set, so nothing is exempted on the
CPU and nothing here can hide a learner's maths: the methods it calls are
torch's, taken before any learner code runs, and a tensor subclass (whose
`__torch_function__` is the learner's code) is printed by torch's own
formatter, audited as before.

On a GPU the values must cross to the host: those copies run inside a range
of gpulab's (`audit.printing`), which the audit lets pass as a print's, at
most PRINT_VALUES values a process: enough to look at inputs and results,
far too few to do a large case's maths on the CPU (and every case must pass).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

from gpulab.sandbox import audit

# torch's methods as they are before any learner code runs: a wrapper that
# replaces `Tensor.reshape` does not run inside a print.
_DETACH = torch.Tensor.detach
_RESHAPE = torch.Tensor.reshape
_TO = torch.Tensor.to
_TOLIST = torch.Tensor.tolist
_ORIGINAL_REPR: Any = torch.Tensor.__repr__  # (untyped in torch)
_PLAIN = (torch.Tensor, torch.nn.Parameter)

# Values a process may copy from the GPU to print them (see the docstring).
PRINT_VALUES = 20_000
MAX_RUNS = 2_000  # slices a summarised tensor may be read in (ndim > 4 is cut)
_copied = 0

# dtypes torch's repr does not name (the defaults).
_UNNAMED = (torch.float32, torch.int64, torch.bool)


def install() -> None:
    """Print plain tensors with `tensor_text` from now on (the sandbox calls
    this before the learner's file runs)."""
    torch.Tensor.__repr__ = _repr  # type: ignore[method-assign, assignment]


def _repr(self: torch.Tensor, *, tensor_contents: Any = None) -> str:
    if type(self) not in _PLAIN or tensor_contents is not None or self.is_complex():
        return str(_ORIGINAL_REPR(self, tensor_contents=tensor_contents))
    try:
        return tensor_text(self)
    except Exception:  # noqa: BLE001 - a tensor this cannot read: torch's own words
        return str(_ORIGINAL_REPR(self))


def tensor_text(t: torch.Tensor) -> str:
    """`t` as torch prints it (`tensor([[ 0.1000, -2.0000], ...])`), honouring
    torch.set_printoptions' precision, threshold, edgeitems and linewidth."""
    opts = torch._tensor_str.PRINT_OPTS
    shape = tuple(t.shape)
    suffix = _suffix(t)
    if t.is_meta:
        return f"tensor(..., size={shape}{suffix})"
    numel = math.prod(shape)
    if numel == 0:
        return f"tensor([], size={shape}{suffix})" if len(shape) > 1 else f"tensor([]{suffix})"
    summarise = numel > opts.threshold
    values = _read(t, shape, summarise, opts.edgeitems)
    if values is None:
        return f"tensor(<{numel} values not shown: {_why_not()}>, size={shape}{suffix})"
    cells = _cells(values, t.dtype, opts)
    indent = len("tensor(")
    body = _layout(cells, shape, summarise, opts.edgeitems, indent, opts.linewidth)
    return f"tensor({body}{suffix})"


def _why_not() -> str:
    return (
        f"gpulab prints at most {PRINT_VALUES} values from the GPU in a check"
        if _copied >= PRINT_VALUES
        else "too many dimensions to summarise"
    )


def _suffix(t: torch.Tensor) -> str:
    parts = []
    if t.device.type != "cpu":
        parts.append(f"device='{t.device}'")
    if t.dtype not in _UNNAMED:
        parts.append(f"dtype={t.dtype}")
    if t.grad_fn is not None:
        parts.append(f"grad_fn=<{type(t.grad_fn).__name__}>")
    elif t.requires_grad:
        parts.append("requires_grad=True")
    return "".join(", " + p for p in parts)


def _kept(size: int, summarise: bool, edge: int) -> list[int]:
    """The indices of one dimension that are shown."""
    if not summarise or size <= 2 * edge:
        return list(range(size))
    return [*range(edge), *range(size - edge, size)]


def _read(t: torch.Tensor, shape: tuple[int, ...], summarise: bool, edge: int) -> Any:
    """The shown values as nested lists (per `_kept`), read with views and
    copies only; None when they may not be read (the GPU's budget)."""
    global _copied
    if not shape:
        with _quiet(t):
            return _TOLIST(_TO(_DETACH(t), "cpu"))
    kept = [_kept(s, summarise, edge) for s in shape]
    runs = math.prod(len(k) for k in kept[:-1]) * (1 if len(kept[-1]) == shape[-1] else 2)
    count = math.prod(len(k) for k in kept)
    if runs > MAX_RUNS:
        return None
    on_gpu = t.device.type != "cpu"
    if on_gpu and _copied + count > PRINT_VALUES:
        _copied = PRINT_VALUES
        return None
    with _quiet(t):
        flat = _RESHAPE(_DETACH(t), -1)  # a copy when t is not contiguous
        strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]

        def rows(d: int, base: int) -> list[Any]:
            if d == len(shape) - 1:
                last = kept[d]
                if len(last) == shape[d]:
                    pieces = [(0, shape[d])]
                else:
                    pieces = [(0, edge), (shape[d] - edge, shape[d])]
                out: list[Any] = []
                for a, b in pieces:
                    out += _TOLIST(_TO(flat[base + a : base + b], "cpu"))
                return out
            return [rows(d + 1, base + i * strides[d]) for i in kept[d]]

        values = rows(0, 0)
    if on_gpu:
        _copied += count
    return values


@contextlib.contextmanager
def _quiet(t: torch.Tensor) -> Iterator[None]:
    """The reads as gpulab's own: hidden from the op guards' modes (and the
    replay's record), and on a GPU inside a print's range for the audit."""
    with _disable_current_modes(), torch._C.DisableTorchFunction(), torch.no_grad():
        if t.device.type != "cpu":
            with audit.printing():
                yield
        else:
            yield


def _flatten(values: Any) -> Iterator[Any]:
    if isinstance(values, list):
        for v in values:
            yield from _flatten(v)
    else:
        yield values


def _cells(values: Any, dtype: torch.dtype, opts: Any) -> Any:
    """The values as strings of one width, in the same nesting."""
    if dtype == torch.bool:
        fmt = str
    elif not dtype.is_floating_point:
        fmt = str
    else:
        fmt = _float_format([v for v in _flatten(values) if isinstance(v, float)], opts)
    texts: Any = _map(values, fmt)
    # As torch: the width of the finite values (an inf or nan may stick out).
    finite = [s for s in _flatten(texts) if s not in ("inf", "-inf", "nan")]
    width = max((len(s) for s in finite), default=0)
    return _map(texts, lambda s: s.rjust(width))


def _map(values: Any, fn: Any) -> Any:
    return [_map(v, fn) for v in values] if isinstance(values, list) else fn(values)


def _float_format(values: list[float], opts: Any) -> Any:
    """torch's choice: whole numbers as `3.`, else fixed `precision` places,
    or scientific when the finite values span too much (or sci_mode says so)."""
    finite = [abs(v) for v in values if math.isfinite(v)]
    nonzero = [v for v in finite if v != 0]
    p = opts.precision

    def special(v: float) -> str | None:
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return None

    if opts.sci_mode is None:
        lo, hi = (min(nonzero), max(nonzero)) if nonzero else (0.0, 0.0)
        sci = bool(nonzero) and (hi / lo > 1000.0 or hi > 1e8 or lo < 1e-4)
    else:
        sci = bool(opts.sci_mode)
    whole = all(v == math.floor(v) for v in finite)
    if whole and not sci:
        return lambda v: special(v) or f"{v:.0f}."
    if sci:
        return lambda v: special(v) or f"{v:.{p}e}"
    return lambda v: special(v) or f"{v:.{p}f}"


def _layout(
    cells: Any, shape: tuple[int, ...], summarise: bool, edge: int, indent: int, width: int
) -> str:
    """Nested brackets as torch lays them out: a row wraps at `width`, rows
    of a matrix one a line, blank lines between higher dimensions, `...`
    where a summarised dimension leaves values out."""
    if not shape:
        return str(cells)

    def cut(items: list[str], size: int) -> list[str]:
        if summarise and size > 2 * edge:
            return [*items[:edge], "...", *items[edge:]]
        return items

    def block(c: Any, d: int, at: int) -> str:
        if d == len(shape) - 1:
            items = cut(list(c), shape[d])
            per_line = max(1, (width - at - 1) // (len(items[0]) + 2))
            lines = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
            return "[" + (",\n" + " " * (at + 1)).join(lines) + "]"
        subs = cut([block(s, d + 1, at + 1) for s in c], shape[d])
        gap = ",\n" + "\n" * (len(shape) - d - 2) + " " * (at + 1)
        return "[" + gap.join(subs) + "]"

    return block(cells, 0, indent)
