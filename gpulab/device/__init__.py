"""The device wing: what the GPU is, what it can do, and how to time it.

The probe (NVML, torch asked in a child, the CPU), the microbenchmarks that
measure the ceilings and the cache they leave, the timing harness every
measurement uses (CUDA events, L2 flush, adaptive stopping), the per-GPU
timing lock, and the one place NVML is opened (`gpulab.device.nvml`).

Grading depends on this wing, never the other way round (an import-linter
contract in pyproject.toml says so). Nothing is imported here: `timing` and
`microbench_kernels` import torch and triton, and only child processes
import them.
"""
