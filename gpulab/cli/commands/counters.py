"""`gpulab counters [NAME] [--ncu]`: Nsight Compute's counters for the
course's kernels (lesson 07's step read_counters).

No NAME: the recorded kernels. NAME: its counters as recorded on an H200,
section by section. --ncu: the same kernel profiled on this GPU with
Nsight Compute, laid out the same way (the step is graded on the
recordings, the same on every machine; this is to see your GPU's).

Exit codes: 0 shown, 1 ncu failed, 2 an unknown NAME, no ncu, or a
recording gpulab cannot read.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from typing import Any

from gpulab.cli.commands.common import UsageError, guarded
from gpulab.gpu import counters


@guarded
def run(args: Any) -> int:
    name = args.name
    if not name:
        print(counters.listing())
        return 0
    if name not in counters.RECORDINGS:
        raise UsageError(
            f"no recorded kernel {name!r}; there are: {', '.join(counters.RECORDINGS)}"
        )
    if not args.ncu:
        try:
            print(counters.render(name))
        except counters.CountersError as exc:
            raise UsageError(f"the recording cannot be read: {exc}") from None
        return 0
    return _live(name)


def _live(name: str) -> int:
    from gpulab.lab import child

    if name not in counters.LIVE:
        raise UsageError(
            f"{name} cannot be profiled again here; these can: {', '.join(counters.LIVE)}"
        )
    if shutil.which("ncu") is None:
        raise UsageError(
            "ncu is not on PATH: install Nsight Compute (it comes with the CUDA toolkit)"
        )
    argv = counters.ncu_argv(name, sys.executable)
    print("$ " + " ".join(argv), file=sys.stderr)
    done = subprocess.run(argv, capture_output=True, text=True, env=child.env(), check=False)
    try:
        kernel, rows = counters.parse_details(f"### {name}\n{done.stdout}", name)
    except counters.CountersError:
        print(done.stdout[-2000:] + done.stderr[-2000:], file=sys.stderr)
        print(f"ncu gave no counters (exit code {done.returncode})", file=sys.stderr)
        return 1
    head = [
        f"{name}: {counters.RECORDINGS[name].what}",
        f"kernel {kernel}, profiled now on this GPU (ncu --set full --clock-control none)",
    ]
    print(counters.render_rows(head, rows))
    return 0
