"""How gpulab prints quantities: FLOPs and bytes with SI prefixes,
durations, arithmetic intensity, tokens per second, and errors that may be
NaN or infinite.

`gpulab serving` and the lab's Serving pane print the same numbers with these,
so the two never disagree about a result (their copies had drifted apart: the
CLI printed an hour-long prefill as "5.2e+03 s").
"""

from __future__ import annotations

_PREFIXES = (
    (1e24, "Y"),
    (1e21, "Z"),
    (1e18, "E"),
    (1e15, "P"),
    (1e12, "T"),
    (1e9, "G"),
    (1e6, "M"),
    (1e3, "k"),
)
_DURATIONS = ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"), (1e-3, "ms"))


def value_text(x: float, spec: str = ".3g") -> str:
    """A value as a learner reads it: NaN and inf by name (format() writes
    'nan', which reads as a typo), everything else to `spec`."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return format(x, spec)


def si(x: float, unit: str) -> str:
    """3 significant digits and an SI prefix: '1.2 TB', '640 G' (unit "")."""
    for div, prefix in _PREFIXES:
        if abs(x) >= div:
            return f"{x / div:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def duration(s: float) -> str:
    """Seconds in the largest unit that keeps a leading digit: '1.44 h', '3.1 ms', '12 µs'."""
    for div, unit in _DURATIONS:
        if s >= div:
            return f"{s / div:.3g} {unit}"
    return f"{s * 1e6:.3g} µs"


def intensity(x: float) -> str:
    """FLOP/byte: '31.9', '2,048'; 3 significant digits outside 100..1e6 (column width)."""
    return f"{x:.3g}" if x < 100 or x >= 1e6 else f"{x:,.0f}"


def tokens(x: float) -> str:
    """Tokens per second, whole, with thousands separators: '1,194'."""
    return f"{x:,.0f}"
