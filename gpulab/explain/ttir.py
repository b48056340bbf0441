"""Read a kernel's Triton IR (TTIR) for the facts its speed hangs on.

- passes per pointer argument: the `tt.load` sites that read through each
  argument (following tt.addptr / splat / broadcast / expand_dims and loop
  iter_args back to the argument), counted as passes over it: one per loop
  (or the straight code) that loads it, plus a load of the very same
  pointer again in one place. Loads of different pointers in one place are
  parts of the input (rotate-half RoPE's two halves), not passes; loads of
  it in three loops one after the other are a row read three times.
- atomics (`tt.atomic_rmw`, `tt.atomic_cas`), loops (`scf.for`/`scf.while`),
  `tt.dot`, and whether program ids are grouped (a `min` over them, as the
  grouped order of lesson 03 computes).
- per trip of the loops: the bytes the loads inside a loop read and the
  FLOPs of the `tt.dot`s inside it, whose ratio is the tile's reuse (FLOP
  per byte brought on chip: BLOCK_M·BLOCK_N/(BLOCK_M+BLOCK_N)·2/elt for a
  matmul tile), and the bytes loaded outside any loop (a program's whole
  traffic when it has no loop).

Text in, plain data out; no triton import.
"""

from __future__ import annotations

import re

from gpulab.explain.facts import CodeFacts

_ARG = re.compile(r"%([\w.]+): !tt\.ptr<")
_DEF = re.compile(r"^\s*%([\w.#]+)(?::\d+)? = (\"?[\w.]+\"?) (.*)$")
_USE = re.compile(r"%([\w.]+)")
_ITER = re.compile(r"%([\w.]+) = %([\w.]+)")
_TENSOR = re.compile(r"tensor<((?:\d+x)*)([^<>]*?)(?:<([\w]+)>)?>")
_PTR = re.compile(r"!tt\.ptr<(\w+)>")
_BITS = re.compile(r"(\d+)$")
_FOLLOW = {
    "tt.addptr",
    "tt.splat",
    "tt.broadcast",
    "tt.expand_dims",
    "tt.reshape",
    "tt.make_tensor_ptr",
    "tt.advance",
    "tt.trans",
    "arith.select",
}


def _elt_bytes(name: str) -> int:
    """bf16 -> 2, f32 -> 4, i1 -> 1 (MLIR element type names)."""
    m = _BITS.search(name)
    return max(1, int(m.group(1)) // 8) if m else 4


def _load_bytes(line: str) -> int:
    """Bytes one `tt.load` reads: its pointer type, a tensor of pointers or one."""
    typ = line.rsplit(" : ", 1)[-1]
    m = _TENSOR.search(typ)
    if m and m.group(3):
        n = 1
        for d in m.group(1).split("x")[:-1]:
            n *= int(d)
        return n * _elt_bytes(m.group(3))
    p = _PTR.search(typ)
    return _elt_bytes(p.group(1)) if p else 0


def _dot_flops(line: str) -> int:
    """2·M·N·K of a `tt.dot` (operand types MxK and KxN)."""
    dims = [m.group(1).split("x")[:-1] for m in _TENSOR.finditer(line.rsplit(" : ", 1)[-1])]
    if len(dims) < 2 or len(dims[0]) < 2 or len(dims[1]) < 2:
        return 0
    (mm, kk), nn = map(int, dims[0][-2:]), int(dims[1][-1])
    return 2 * mm * nn * kk


def analyse(ttir: str) -> CodeFacts:
    origin: dict[str, str] = {}
    scopes: list[int] = []  # one per open brace: the loop it opens (its number), or 0
    n_loops = 0
    sites: dict[str, list[tuple[int, str]]] = {}  # arg -> (innermost loop, pointer) per load
    loop_bytes = loop_flops = straight_bytes = 0
    loads: dict[str, int] = {}
    atomics = loops = 0
    dot = False
    pid_vals: set[str] = set()
    grouped = False
    for line in ttir.splitlines():
        in_loop = any(scopes)
        region = next((r for r in reversed(scopes) if r), 0)
        is_loop = "scf.for" in line or "scf.while" in line
        for ch in line if "{" in line or "}" in line else "":
            if ch == "{":
                n_loops += is_loop
                scopes.append(n_loops if is_loop else 0)
            elif ch == "}" and scopes:
                scopes.pop()
        if "tt.func" in line:
            for name in _ARG.findall(line):
                origin[name] = name
        if "scf.for" in line or "scf.while" in line:
            loops += 1
            for new, old in (
                _ITER.findall(line.split("iter_args", 1)[-1]) if "iter_args" in line else ()
            ):
                if old in origin:
                    origin[new] = origin[old]
        m = _DEF.match(line)
        if not m:
            if "tt.atomic" in line:
                atomics += 1
            continue
        name, op, rest = m.group(1), m.group(2).strip('"'), m.group(3)
        uses = _USE.findall(rest)
        if op in _FOLLOW:
            src = next((origin[u] for u in uses if u in origin), None)
            if src:
                origin[name] = src
        elif op == "tt.load" and uses:
            src = origin.get(uses[0])
            if src:
                sites.setdefault(src, []).append((region, uses[0]))
            if in_loop:
                loop_bytes += _load_bytes(rest)
            else:
                straight_bytes += _load_bytes(rest)
        elif op.startswith("tt.atomic"):
            atomics += 1
        elif op == "tt.dot" or op.startswith("ttng.warp_group_dot"):
            dot = True
            if in_loop:
                loop_flops += _dot_flops(rest)
        if op == "tt.get_program_id":
            pid_vals.add(name)
        elif op.startswith("arith.") and any(u in pid_vals for u in uses):
            pid_vals.add(name)
            if op == "arith.minsi":
                grouped = True
        # A loop's results carry its iter_args' origin (a pointer advanced in a loop).
    for src, found in sites.items():
        loads[src] = len({r for r, _ in found}) + len(found) - len(set(found))
    return {
        "loads": loads,
        "atomics": atomics,
        "loops": loops,
        "dot": dot,
        "grouped": grouped,
        "loop_load_bytes": loop_bytes,
        "loop_dot_flops": loop_flops,
        "load_bytes": straight_bytes,
    }


__all__ = ["analyse"]
