"""`gpulab bench`: runs gpulab.bench in a child process (torch stays out of the CLI)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any


def run(args: Any) -> int:
    cmd = [sys.executable, "-m", "gpulab.bench", *args.kernels]
    if args.json:
        cmd += ["--json", args.json]
    if getattr(args, "rounds", 1) != 1:
        cmd += ["--rounds", str(args.rounds)]
    try:
        return subprocess.run(cmd).returncode
    except KeyboardInterrupt:
        return 130
