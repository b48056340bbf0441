"""gpulab: a terminal lab and tutor for GPU programming.

This module stays light on purpose: `import gpulab` and `gpulab --help` load
none of torch, triton, jax or textual (a test proves it). Those are imported
inside the functions that need them, and torch/triton only ever in the child
process that runs a check.
"""

from __future__ import annotations

__version__ = "0.1.0"
