"""bf16 as bits, in NumPy: what the interpreter's bf16 fixes store
(gpulab.sandbox.interpreter_fixes and interpreter_reduce both use them)."""

from __future__ import annotations

from typing import Any

import numpy as np


def f64_to_bf16_bits(x: Any) -> np.ndarray[Any, Any]:
    """float64 values -> bf16 bits (uint16), rounded once to nearest even.

    Through fp32 by rounding to odd (inexact values keep a sticky last bit),
    so the second rounding, fp32 -> bf16, is the only one that counts:
    exact for every finite value, overflow to inf, NaN kept a NaN."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        f = x.astype(np.float32)
        back = f.astype(np.float64)
        inexact = (back != x) & np.isfinite(x)
        away = inexact & (np.abs(back) > np.abs(x))
        f = np.where(away, np.nextafter(f, np.float32(0)), f).astype(np.float32)
    bits = np.ascontiguousarray(f).view(np.uint32)
    bits = np.where(inexact, bits | np.uint32(1), bits).astype(np.uint32)
    return f32_bits_to_bf16_bits(bits)


def f32_bits_to_bf16_bits(bits: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """fp32 bits (uint32) -> bf16 bits (uint16), round to nearest even."""
    bits = bits.astype(np.uint32)
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    lsb = (bits >> np.uint32(16)) & np.uint32(1)
    rounded = (bits + np.uint32(0x7FFF) + lsb) >> np.uint32(16)
    quiet = (bits >> np.uint32(16)) | np.uint32(0x0040)
    return np.where(nan, quiet, rounded).astype(np.uint16)


def bf16_bits_to_f32(bits: Any) -> np.ndarray[Any, Any]:
    """bf16 bits (uint16) -> their exact float32 values."""
    wide = np.asarray(bits).astype(np.uint32) << np.uint32(16)
    return np.ascontiguousarray(wide).view(np.float32)
