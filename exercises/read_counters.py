"""Lesson 07, step 2 of 3 — read the counters: what limits each kernel?

gpulab ships Nsight Compute's counters for five kernels, recorded on an
H200 with `ncu --set full --clock-control none` (the lesson's "Reading
Nsight Compute's counters"). List them with `gpulab counters`; show one
with `gpulab counters softmax_32k`, section by section as ncu's details
page prints them. On a GPU with Nsight Compute, `gpulab counters NAME
--ncu` profiles the same kernel on yours.

For each kernel, name its limit, one of LIMITS:

  "dram"      DRAM bandwidth: the DRAM is as busy as it gets
  "l2"        L2 bandwidth: the L2 is, and the DRAM is not
  "compute"   the SMs: their math pipes, or issuing instructions
  "latency"   neither roof: too little in flight to keep a unit busy
              (few warps, each stalled waiting)

and cite the counters that show it, by the names `gpulab counters`
prints, with the values the recording holds:

  {"limit": "compute", "evidence": {"Compute (SM) Throughput": 91.85,
                                    "DRAM Throughput": 24.57}}

The check asks `diagnose(kernel)` for each of the five kernels: the limit
must be the one the counters show, and the evidence must show it (a
counter the recording lacks, or a value it does not hold, is named).

Grade: pass or fail, no letter.
"""

LIMITS = ("dram", "l2", "compute", "latency")


def diagnose(kernel: str) -> dict:
    findings = {
        # TODO: for each kernel, its limit and the counters that show it.
        "rope_fwd": {"limit": "TODO", "evidence": {}},
        "matmul_8k": {"limit": "TODO", "evidence": {}},
        "softmax_32k": {"limit": "TODO", "evidence": {}},
        "torch_softmax_32k": {"limit": "TODO", "evidence": {}},
        "softmax_three_pass": {"limit": "TODO", "evidence": {}},
    }
    return findings[kernel]


if __name__ == "__main__":
    for name in ("rope_fwd", "matmul_8k", "softmax_32k", "torch_softmax_32k",
                 "softmax_three_pass"):
        print(name, diagnose(name))
