"""The child processes that measure: the timing harness, the microbenchmarks,
`gpulab bench`, the profile target, the debug rerun, the ahead-of-time
compiles. Each runs as `python -m` in a child; they may import torch and triton."""
