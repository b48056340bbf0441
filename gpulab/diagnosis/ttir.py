"""Read a kernel's Triton IR (TTIR) for the facts its speed hangs on.

- loads per pointer argument: how many `tt.load` sites read through each
  argument (following tt.addptr / splat / broadcast / expand_dims and loop
  iter_args back to the argument). Two sites on one input are two passes
  over it: a row read twice, thrice.
- atomics (`tt.atomic_rmw`, `tt.atomic_cas`), loops (`scf.for`/`scf.while`),
  `tt.dot`, and whether program ids are grouped (a `min` over them, as the
  grouped order of lesson 03 computes).

Text in, plain data out; no triton import.
"""

from __future__ import annotations

import re
from typing import Any

_ARG = re.compile(r"%([\w.]+): !tt\.ptr<")
_DEF = re.compile(r"^\s*%([\w.#]+)(?::\d+)? = (\"?[\w.]+\"?) (.*)$")
_USE = re.compile(r"%([\w.]+)")
_ITER = re.compile(r"%([\w.]+) = %([\w.]+)")
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


def analyse(ttir: str) -> dict[str, Any]:
    origin: dict[str, str] = {}
    loads: dict[str, int] = {}
    atomics = loops = 0
    dot = False
    pid_vals: set[str] = set()
    grouped = False
    for line in ttir.splitlines():
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
                loads[src] = loads.get(src, 0) + 1
        elif op.startswith("tt.atomic"):
            atomics += 1
        elif op == "tt.dot" or op.startswith("ttng.warp_group_dot"):
            dot = True
        if op == "tt.get_program_id":
            pid_vals.add(name)
        elif op.startswith("arith.") and any(u in pid_vals for u in uses):
            pid_vals.add(name)
            if op == "arith.minsi":
                grouped = True
        # A loop's results carry its iter_args' origin (a pointer advanced in a loop).
    return {"loads": loads, "atomics": atomics, "loops": loops, "dot": dot, "grouped": grouped}


__all__ = ["analyse"]
