"""The sandbox's policy and the judge's caches, decided by the judge for each check.

What the sandbox may read, write and import (gpulab.sandbox.isolation applies
it), and the compiler caches a check keeps per submission file: where they
are, who may read them, and how they are trimmed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import site
import sys
from pathlib import Path

from gpulab.sandbox.namespaces import DEVICES
from gpulab.wire.check_request import CheckRequest
from gpulab.wire.sandbox_start import Policy

TRACE = "trace"
GIB = 1 << 30


def cache_dir(request: CheckRequest, private: Path) -> Path:
    """Compiler caches (Triton, Inductor) kept per submission file, so a
    second check of the same file skips compiling and one submission can't
    plant a cache entry for another."""
    ws = request.workspace
    if not ws:
        return private / "cache"
    key = hashlib.sha256(str(Path(request.file).resolve()).encode()).hexdigest()[:16]
    return Path(ws) / ".gpulab" / "cache" / key


def replay_cache(request: CheckRequest, own: Path) -> Path:
    """The replay's compiler cache on a GPU, kept per submission file beside
    the check's and apart from it: the check's sandbox writes its own cache
    and could plant a compiled kernel there, which must never run in the
    replay. Only replays write this one, and a replay runs only the kernels
    gpulab.sandbox.replay_source keeps, so what Triton leaves here is its own
    compile of that text (a second check of the file skips compiling). In
    the replay's own folder where there is no workspace or it is read-only."""
    ws = request.workspace
    if not ws:
        return own / "triton"
    key = hashlib.sha256(str(Path(request.file).resolve()).encode()).hexdigest()[:16]
    cache = Path(ws) / ".gpulab" / "replay-cache" / key
    try:
        cache.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            cache.parent.chmod(0o700)
        trim_cache(cache)
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        return own / "triton"
    return cache


def owner_only(cache: Path) -> None:
    """The caches' folder (`<workspace>/.gpulab/cache`) made one only its
    owner can enter. A sandbox writes its file's cache as the user and may
    chmod what it writes there: a copy of /usr/bin/id or bash with the
    setuid bit, or a folder every user may write. Behind a folder that
    others cannot enter, nobody else can run the one (it would run as the
    user who checked) or fill the other (a compiler cache entry for this
    user's next check). The sandbox cannot reach this folder with
    namespaces (only its own cache is bound); where they are refused it
    can chmod it, so the judge sets it again as the check ends."""
    if cache.parent.name == "cache" and cache.parent.parent.name == ".gpulab":
        with contextlib.suppress(OSError):
            cache.parent.chmod(0o700)


# A file's compiler cache as its check leaves it, at most: past either, it
# is emptied (a GPU check's Triton cache is a few MB, a few hundred files,
# Inductor's a few folders deep).
CACHE_BYTES = 1 << 30
CACHE_ENTRIES = 50_000
CACHE_DEPTH = 32


def trim_cache(cache: Path) -> str:
    """Empty a file's compiler cache that its check filled past the limits
    or left anything odd in; "" when it was left as it was, else a note
    saying what was found. The sandbox writes it as the user, 256 MiB a file
    but as many files and folders as it likes, and what it leaves stays on
    the user's disk for good and is bound into the file's next check.
    Counted without recursion and without following links
    (gpulab.safetree): a cache of 1500 nested folders made os.walk raise
    RecursionError, and every later check of that file failed with it.
    Anything but plain files and folders (a link, a fifo, a folder it cannot
    read) is not reasoned about: the cache is set aside (renamed, so the
    check goes on at once) and removed. Never raises."""
    from gpulab.safetree import clear_trash, set_aside, survey

    try:
        found = survey(
            cache, max_depth=CACHE_DEPTH, max_entries=CACHE_ENTRIES, max_bytes=CACHE_BYTES
        )
        if found.clean:
            clear_trash(cache.parent)  # what an earlier trim could not finish
            return ""
        # A spare made for the next check finds its cache gone and starts
        # afresh (judge(): `prepared.cache.is_dir()`).
        set_aside(cache)
    except Exception as exc:  # noqa: BLE001 - never the check's failure
        return f"gpulab could not look through this file's compiler cache ({exc})."
    if found.odd:
        return (
            f"gpulab emptied this file's compiler cache ({cache}): it held {found.odd}, "
            "which a compiler never leaves there. Your kernels compile afresh."
        )
    return (
        f"gpulab emptied this file's compiler cache ({cache}): it held more than "
        f"{CACHE_ENTRIES} entries or {CACHE_BYTES >> 20} MiB. Your kernels compile afresh."
    )


def policy_for(
    request: CheckRequest, device: str, private: Path, cache: Path, outbox: Path | None = None
) -> Policy:
    """The sandbox's policy (gpulab.sandbox.isolation applies it)."""
    pkg = Path(__file__).resolve().parents[1]  # the gpulab package
    learner = Path(request.file).resolve()
    read = [
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        *site.getsitepackages(),
        site.getusersitepackages(),
        "/usr",
        "/lib",
        "/lib64",
        "/bin",
        "/sbin",
        "/etc",
        "/opt",
        "/proc",
        "/sys",
        # The plain device nodes, not /dev: where namespaces are refused,
        # Landlock is all that stands between the sandbox and the host's
        # /dev, and a submission read the keys typed into the user's
        # terminal from /dev/pts. (The GPU's nodes are in the write list.)
        *DEVICES,
        str(pkg),
        str(learner),
    ]
    if os.environ.get("CUDA_HOME"):
        read.append(os.environ["CUDA_HOME"])
    # The judge's own import path (PYTHONPATH included), so the sandbox finds
    # the same packages; gpulab's parent folder (a checkout, with kernels/ in
    # it) is only listable.
    read += [p for p in import_path(learner) if Path(p) != pkg.parent]
    hidden = [str(pkg / "_content" / "kernels"), *grader_files(pkg), *other_copies(read, pkg)]
    content = request.content_root
    if content:
        hidden.append(str(Path(content) / "kernels"))
    # A folder exercise's reference and spec.py, wherever the course keeps
    # them; not the folder of the file checked (`gpulab dev check` grades
    # the reference itself).
    from gpulab.course.content import content_root
    from gpulab.course.exercise_folder import registered

    folders = registered(Path(content) if content else content_root())
    hidden += [str(f) for f in folders if not learner.is_relative_to(f)]
    if learner.parent.name == "kernels" or learner in {Path(h) for h in hidden}:
        # `gpulab dev check` grades the reference solutions themselves, with
        # the Hopper backends they load from kernels/hopper/ (unreadable, a
        # reference fell back to its portable path under the judge).
        hidden = [h for h in hidden if not learner.is_relative_to(Path(h))]
        read.append(str(learner.parent / "hopper"))
    # /dev/shm: the sandbox's own tmpfs in its mount namespace (Python and
    # CUDA may make files there); the host's only where namespaces are refused.
    from gpulab.judge import loader

    if TRACE in loader.records(request.exercise, request.content_root):
        # A folder of the judge's the sandbox writes its trace into, read
        # back without following links and copied into the workspace's
        # traces folder, which no sandbox may write: a link planted there
        # would outlive the check, for `gpulab profile` or nsys to follow.
        write_extra = [str(outbox)] if outbox else []
    else:
        write_extra = []
    write = [
        str(private),
        str(cache),
        *write_extra,
        "/dev/null",
        "/dev/zero",
        "/dev/shm",
        *(str(p) for p in Path("/dev").glob("nvidia*")),
    ]
    return Policy(
        read=[r for r in read if r and os.path.exists(r)],
        hidden=hidden,
        listable=[str(pkg.parent), str(learner.parent)],
        write=write,
        # The longest the lab may let the check run (a CPU check's cases may
        # be given more than its first limit: gpulab.judge.allowance).
        cpu_seconds=int(max(float(request.timeout or 300), request.timeout_cap or 0)) + 30,
        file_bytes=256 << 20,
        address_space=24 * GIB if device == "cpu" else None,
        blocked_modules=blocked_modules(),
    )


def other_copies(read: list[str], pkg: Path) -> list[str]:
    """Every `gpulab` folder on the sandbox's import path but the one it
    imports: an editable install (`pip install -e .`) leaves the course's
    content, reference solutions included, in site-packages/gpulab/_content,
    and an older install may hold a whole gpulab, graders and all. The
    sandbox imports gpulab from `pkg` alone, which comes first on its path."""
    out = []
    for root in read:
        other = Path(root) / "gpulab"
        with contextlib.suppress(OSError):
            if other.is_dir() and other.resolve() != pkg:
                out.append(str(other))
    return list(dict.fromkeys(out))


def blocked_modules() -> list[str]:
    """gpulab's modules a submission may not import: the judge's package
    (its machinery and, in gpulab.judge.graders, every grader), the lab's
    runner and the serving calculator (lesson 09's answer). The sandbox loads
    the learner's file with gpulab.sandbox.learner, outside the judge's
    package, so blocking the whole package costs it nothing."""
    names = ["gpulab.gpu.serving", "gpulab.lab.runner", "gpulab.judge", "gpulab.judge.graders"]
    names += [f"gpulab.judge.graders.{m}" for m in _modules("judge/graders")]
    return names + [f"gpulab.judge.{m}" for m in _modules("judge")]


def grader_files(pkg: Path) -> list[str]:
    """The grader modules' sources and every bytecode file Python may write
    for them (lesson 09's answer key unmarshals from its .pyc as easily as it
    reads from its .py). Listed whether or not they exist yet: Landlock then
    allows their folder's other files one by one, so one written later is
    unreadable too."""
    tag = sys.implementation.cache_tag
    out = []
    for name in blocked_modules():
        path = pkg.joinpath(*name.split(".")[1:])
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        out.append(str(path))
        for opt in ("", ".opt-1", ".opt-2"):
            out.append(str(path.parent / "__pycache__" / f"{path.stem}.{tag}{opt}.pyc"))
        # And those another Python wrote (a checkout run with 3.11 and 3.12):
        # a submission read serving.cpython-312.pyc beside the hidden 3.11 one.
        out += sorted(str(p) for p in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"))
    return list(dict.fromkeys(out))


def import_path(learner: Path) -> list[str]:
    """sys.path for the sandbox: the judge's, without the current folder or
    the submission's folder (a `torch.py` there must not shadow torch)."""
    try:
        here = Path.cwd().resolve()
    except FileNotFoundError:  # its folder removed under it: a spare the lab is closing
        here = learner.parent
    out = []
    for p in sys.path:
        if not p or not os.path.isdir(p):
            continue
        if Path(p).resolve() in (learner.parent, here):
            continue
        out.append(str(Path(p).resolve()))
    return list(dict.fromkeys(out))


def _modules(package: str) -> list[str]:
    folder = Path(__file__).resolve().parents[1] / package
    return sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")
