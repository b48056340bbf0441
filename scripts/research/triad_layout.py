"""How Triton lays out lesson 01's triad block: elements per thread, and loads.

    python scripts/research/triad_layout.py [OUT.json]

No GPU needed: the reference triad kernel (kernels/bandwidth.py) is compiled
for sm_90 on the CPU (gpulab.measure.compile_info), as the reference launches
it (BLOCK = 1024, 4 warps), in fp32, fp16 and bf16, with n a multiple of 16
(Triton's specialisation of a launch whose n divides by 16) and without.
For each it records the TTGIR layout (`sizePerThread`) and the PTX global
loads. Lesson 01 quotes the answer (issue 47, error 1).
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import platform
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> int:
    import torch
    import triton

    from gpulab.measure.compile_info import compile_kernel

    spec = importlib.util.spec_from_file_location("triad_ref", REPO / "kernels" / "bandwidth.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fn = mod.triad_kernel
    rows = []
    for dtype in ("fp32", "fp16", "bf16"):
        for divisible in (True, False):
            sig = {
                n: "constexpr"
                if n == "BLOCK"
                else f"*{dtype}"
                if n.endswith("_ptr")
                else "fp32"
                if n == "alpha"
                else "i32"
                for n in fn.arg_names
            }
            asm: dict[str, str] = {}
            info = compile_kernel(
                fn,
                sig,
                {"BLOCK": 1024},
                arch="sm_90",
                options={"num_warps": 4},
                divisible=("n",) if divisible else (),
                asm_hook=asm.update,
            )
            ttgir, ptx = asm.get("ttgir", ""), asm.get("ptx", "")
            per_thread = re.findall(r"sizePerThread = \[(\d+)\]", ttgir)
            loads = re.findall(r"ld\.global[.\w]*", ptx)
            rows.append(
                {
                    "dtype": dtype,
                    "n_multiple_of_16": divisible,
                    "compiled": info.ok,
                    "size_per_thread": int(per_thread[0]) if per_thread else None,
                    "global_loads": {k: loads.count(k) for k in sorted(set(loads))},
                }
            )
    out = {
        "what": "kernels/bandwidth.py triad_kernel compiled for sm_90, BLOCK 1024, 4 warps",
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()} CPU, no GPU (compiled, not run)",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "rows": rows,
    }
    text = json.dumps(out, indent=2) + "\n"
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
