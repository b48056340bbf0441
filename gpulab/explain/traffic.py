"""Rules about bytes: how many a kernel moves beyond the minimum, and
whether it keeps enough of them in flight.

- `_grouping`: a tiled product in row-major program order re-reads panels
  from HBM once they no longer fit in L2 together (lesson 03).
- `_in_flight`: Little's law for memory-bound kernels without a loop.
- `_tile_reuse`: a tl.dot loop's FLOPs per byte brought on chip against what
  the tensor cores need, even fed from shared memory.
- `_intermediates`: buffers one kernel writes and another reads back.
"""

from __future__ import annotations

import math

from gpulab.explain.facts import CaseFacts, Facts, Finding
from gpulab.explain.findings import _finding, _launch_label, _main_launch
from gpulab.explain.kinds import Sections

# HBM's latency under load, about 0.6 µs (lesson 05, "The kernel"): by
# Little's law an SM must keep bandwidth × latency / SMs bytes in flight
# (about 22 KiB on an H200) for the memory system to run at full rate.
HBM_LATENCY_S = 0.6e-6
# An SM's shared memory serves 128 bytes a clock (32 banks of 4 bytes),
# and its FP32 peak is lanes × 2 FLOP a clock: so shared memory delivers
# FP32-peak × 64 / lanes bytes/s over the GPU. 128 FP32 lanes an SM from
# sm_80 on, 64 on sm_75 (CUDA C++ Programming Guide, throughput tables).
SMEM_BYTES_PER_CLOCK = 128


def _grouping(f: Facts, case: CaseFacts, sections: Sections) -> list[Finding]:
    """A tiled product in row-major program order re-reads B from HBM once
    its panels no longer fit in L2 together (lesson 03)."""
    la, info = _main_launch(case, f["compiled"])
    if not info or not info.get("dot") or info.get("grouped"):
        return []
    gpu, ce = f["gpu"], la.get("constexprs") or {}
    bm, bn, k = ce.get("BLOCK_M"), ce.get("BLOCK_N"), (case.get("sizes") or {}).get("K")
    n, sms = (case.get("sizes") or {}).get("N"), gpu.get("sms") or 0
    l2 = (gpu.get("l2_mb") or 0) * 2**20
    if not (bm and bn and k and n and sms and l2):
        return []
    if not isinstance(bm, (int, float)) or not isinstance(bn, (int, float)):
        return []  # a constexpr that is no number (its repr): no tile to reason about
    elt = case.get("elt", 2)
    per_wave = sms * max(1, info.get("blocks_per_sm") or 1)
    cols = min(per_wave, math.ceil(n / bn))
    rows = math.ceil(per_wave / max(1, math.ceil(n / bn)))
    footprint = (rows * bm + cols * bn) * k * elt
    if footprint <= 0.6 * l2:
        return []
    return [
        _finding(
            "extra_bytes",
            sections,
            min(0.6, 0.3 * footprint / l2),
            f"{_launch_label(la, info)} visits tiles row by row: one wave of {per_wave} "
            f"programs touches {rows} panels of A and {cols} of B, {footprint / 2**20:.0f} MiB "
            f"against {gpu.get('l2_mb'):.0f} MB of L2 ({case['name']}), so panels are read "
            "from HBM again and again",
            "Order the programs in groups (GROUP_M rows of tiles share B's panels while they "
            "are in L2)",
        )
    ]


def _in_flight(f: Facts, case: CaseFacts, sections: Sections) -> list[Finding]:
    """Little's law for a memory-bound kernel without a loop: the programs
    resident on an SM issue all their loads at once, so what is in flight
    is resident programs × bytes a program moves."""
    if f.get("kind") == "compute":
        return []
    la, info = _main_launch(case, f["compiled"])
    gpu = f["gpu"]
    sms, bw, nbytes = gpu.get("sms") or 0, gpu.get("bandwidth") or 0, case.get("bytes") or 0
    programs = la.get("programs") or 0
    if not info or not info.get("fits") or info.get("loops") or not (sms and bw and nbytes):
        return []
    if programs < 4 * sms:  # too_few_programs / tail_wave say what matters there
        return []
    per_program = nbytes / programs
    resident = info.get("blocks_per_sm") or 1
    have, need = resident * per_program, bw * HBM_LATENCY_S / sms
    if have >= 0.8 * need:
        return []
    return [
        _finding(
            "low_occupancy",
            sections,
            0.6 * (1 - have / need),
            f"{_launch_label(la, info)} moves {per_program:.0f} bytes a program "
            f"({programs} programs, {case['name']}) and {resident} programs fit on one SM "
            f"(limited by {info.get('limited_by')}): about {have / 1024:.1f} KiB in flight per "
            f"SM, where the {gpu['name']}'s {bw / 1e12:.2f} TB/s × ~{HBM_LATENCY_S * 1e6:.1f} µs "
            f"latency needs {need / 1024:.0f} KiB per SM (Little's law): at most "
            f"{have / need:.0%} of the bandwidth",
            "Give each program more to move (a BLOCK of 1024 elements or more, with "
            "num_warps=4 so each thread loads 16 bytes at a time), so fewer, larger programs "
            "keep more bytes in flight",
        )
    ]


def _tile_reuse(f: Facts, case: CaseFacts, sections: Sections) -> list[Finding]:
    """A tl.dot loop's FLOPs per byte it brings on chip, against what the
    tensor cores need even if every byte came from shared memory."""
    if f.get("kind") != "compute":
        return []
    gpu, flops = f["gpu"], f["gpu"].get("flops") or {}
    peak, fp32 = flops.get(case.get("dtype", "")), flops.get("fp32")
    la, info = _main_launch(case, f["compiled"])
    if not info or not (info.get("loop_dot_flops") and info.get("loop_load_bytes")):
        return []
    if not (peak and fp32 and info.get("tensor_cores")):
        return []
    lanes = 64 if str(gpu.get("arch", "")).startswith("sm_75") else 128
    smem = fp32 * SMEM_BYTES_PER_CLOCK / (2 * lanes)
    reuse = info["loop_dot_flops"] / info["loop_load_bytes"]
    cap = reuse * smem / peak
    if cap >= 0.85:
        return []
    return [
        _finding(
            "wrong_roof",
            sections,
            1 - cap,
            f"{_launch_label(la, info)} brings {info['loop_load_bytes']} bytes on chip per "
            f"step of its loop for {info['loop_dot_flops']} FLOPs of tl.dot: "
            f"{reuse:.0f} FLOP per byte. Even from shared memory ({SMEM_BYTES_PER_CLOCK} "
            f"bytes a clock an SM, {smem / 1e12:.0f} TB/s on the {gpu['name']}) that feeds "
            f"the tensor cores ({peak / 1e12:.0f} TFLOP/s {case['dtype']}) at most "
            f"{cap:.0%} of the time ({case['name']})",
            "Use bigger tiles (BLOCK_M × BLOCK_N of 128 × 128 or more, num_warps=8): each "
            "element loaded is then reused 128 times",
            cause="tile_reuse",
        )
    ]


def _intermediates(f: Facts, case: CaseFacts, sections: Sections) -> list[Finding]:
    """Buffers one kernel writes and a later one reads back (the sandbox
    found them shared between launches): a round trip through HBM."""
    gpu = f["gpu"]
    bw, nbytes = gpu.get("bandwidth") or 0, case.get("bytes") or 0
    inter = [i for i in case.get("intermediates") or [] if i.get("bytes")]
    if not (inter and bw and nbytes):
        return []
    extra = sum(2 * i["bytes"] for i in inter)  # written once, read at least once
    peak = (gpu.get("flops") or {}).get(case.get("dtype", ""))
    ideal = max(nbytes / bw, (case.get("flops") or 0) / peak if peak else 0)
    t_extra = extra / bw
    if t_extra < 0.1 * ideal:
        return []
    worst = max(inter, key=lambda i: i["bytes"])
    return [
        _finding(
            "extra_bytes",
            sections,
            min(0.9, t_extra / (ideal + t_extra)),
            f"{worst['name']} ({worst['bytes'] / 2**20:.0f} MiB) is written by "
            f"{worst['kernels'][0]} and read back by {', '.join(worst['kernels'][1:])}"
            + (f", and {len(inter) - 1} more buffer(s) like it" if len(inter) > 1 else "")
            + f": {extra / 2**20:.0f} MiB of HBM traffic the exercise does not need, "
            f"against its minimum of {nbytes / 2**20:.0f} MiB ({case['name']})",
            "Fuse the kernels: compute the intermediate in registers and use it in the same "
            "program, so it never goes to HBM",
        )
    ]


__all__ = ["_grouping", "_in_flight", "_intermediates", "_tile_reuse"]
