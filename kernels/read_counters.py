"""Reference for lesson 07, step 2: what limits each recorded kernel, and
the counters that show it (`gpulab counters NAME`).

- rope_fwd: DRAM at 78.9% of its peak, what an elementwise copy reaches
  (torch.neg: 79.2%), the SMs at 37%: DRAM bandwidth.
- matmul_8k: the SMs at 91.9% (the tensor cores), the DRAM at 24.6%:
  compute, though only 12.5% of the warps an SM can hold are there.
- softmax_32k: neither roof (DRAM 58.6%, SMs 34.1%); 117 registers a thread
  leave room for one 512-thread program an SM, 25% occupancy (23.7%
  achieved): too few bytes in flight. Latency.
- torch_softmax_32k: the DRAM at 42.2%, the SMs' issue slots 72.7% busy at
  95% occupancy: instructions, not bytes. Compute.
- softmax_three_pass: 402.7 MB read (three times the 134.2 MB of x) and
  113.6 MB written in 134.88 µs: 3.83 TB/s, 80% of the H200's 4.8. DRAM
  bandwidth, spent on bytes a one-pass kernel never reads.
"""

LIMITS = ("dram", "l2", "compute", "latency")

FINDINGS = {
    "rope_fwd": {
        "limit": "dram",
        "evidence": {"DRAM Throughput": 78.89, "Compute (SM) Throughput": 37.09},
    },
    "matmul_8k": {
        "limit": "compute",
        "evidence": {"Compute (SM) Throughput": 91.85, "DRAM Throughput": 24.57},
    },
    "softmax_32k": {
        "limit": "latency",
        "evidence": {
            "DRAM Throughput": 58.64,
            "Compute (SM) Throughput": 34.14,
            "Registers Per Thread": 117,
            "Theoretical Occupancy": 25,
            "Achieved Occupancy": 23.73,
        },
    },
    "torch_softmax_32k": {
        "limit": "compute",
        "evidence": {"Issue Slots Busy": 72.73, "DRAM Throughput": 42.21},
    },
    "softmax_three_pass": {
        "limit": "dram",
        "evidence": {"dram__bytes_read.sum": 402675968, "gpu__time_duration.sum": 134880},
    },
}


def diagnose(kernel: str) -> dict:
    return FINDINGS[kernel]
