"""`gpulab bench`: runs gpulab.targets.bench in a child process (torch stays out of the CLI)."""

from __future__ import annotations

import subprocess
from typing import Any

from gpulab.lab import child


def run(args: Any) -> int:
    cmd = child.python_module("gpulab.targets.bench", *args.kernels)
    if args.json:
        cmd += ["--json", args.json]
    if getattr(args, "rounds", 1) != 1:
        cmd += ["--rounds", str(args.rounds)]
    try:
        return subprocess.run(cmd, env=child.env()).returncode
    except KeyboardInterrupt:
        return 130
