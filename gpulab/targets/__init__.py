"""The child-process targets of gpulab's commands beside a check: `gpulab bench`,
the profile target of `gpulab profile`, the wrong case rerun by `gpulab debug`, the
recorded calls `gpulab counters` hands Nsight Compute. Each drives a grader or the
learner's file in its own process; they may import torch, triton and the judge."""
