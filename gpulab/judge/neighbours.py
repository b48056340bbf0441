"""Who else had the GPU when the judge refused a timing.

The judge refuses a batch that leaves time unexplained (batches._judge_wall).
gpulab's own checks no longer cause that (gpulab.gpu.gpulock keeps every
other gpulab kernel off the GPU while one times), but any other program on
the box can: its kernels take turns with the learner's. The refusal then
names them, so that an honest learner runs the check again instead of
hunting a bug in their kernel.

The refusal stands either way: the judge cannot tell a neighbour's kernels
from work the submission hid in a process of its own, so a note here never
turns into a pass. Processes under the judge (the sandbox and anything it
started) are never named: they are the submission's.
"""

from __future__ import annotations

import os
from pathlib import Path

from gpulab.gpu import nvml


def _children() -> dict[int, list[int]]:
    """ppid -> pids, for every process this namespace can see."""
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and fields[1].isdigit():
            out.setdefault(int(fields[1]), []).append(int(entry.name))
    return out


def descendants(pid: int) -> set[int]:
    """`pid` and every process under it."""
    children, seen, todo = _children(), {pid}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


def _owner(pid: int) -> str:
    try:
        import pwd

        uid = (Path("/proc") / str(pid)).stat().st_uid
        return pwd.getpwuid(uid).pw_name
    except (OSError, KeyError, ImportError):
        return "?"


def others(cuda_index: int, mine: set[int] | None = None) -> list[str]:
    """The processes on the GPU besides this one and those under it, as
    "pid 1234 (python3, user bob)". Only processes this namespace can see:
    in a container NVML may list host pids, which name nothing here."""
    procs = nvml.gpu_processes(cuda_index)
    if not procs:
        return []
    mine = mine if mine is not None else descendants(os.getpid())
    return [
        f"pid {p['pid']} ({p.get('name') or '?'}, user {_owner(p['pid'])})"
        for p in procs
        if p["pid"] not in mine and (Path("/proc") / str(p["pid"])).exists()
    ]


def note(cuda_index: int | None = None, mine: set[int] | None = None) -> str:
    """A sentence to add to a refused timing, or "" when nothing else is there.
    `cuda_index`: the GPU, by default torch's current one."""
    if cuda_index is None:
        try:
            import torch

            cuda_index = torch.cuda.current_device()
        except Exception:  # noqa: BLE001 - no CUDA here: no neighbours to name
            return ""
    found = others(cuda_index, mine)
    if not found:
        return ""
    return (
        f" Also on this GPU during the check: {', '.join(found[:5])}"
        + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        + ". Their kernels run between yours and count against this batch:"
        " run the check again when the GPU is free (`gpulab probe` lists its processes)."
    )
