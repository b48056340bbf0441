"""Confinement the sandbox applies to itself before any learner code runs.

- Resource limits (CPU time, file size, address space on the CPU, core
  dumps, processes for a non-root user).
- Landlock (Linux 5.13+, unprivileged): reads only from the system's and
  Python's own folders, the learner's file and the sandbox's private folder;
  writes only to that folder and the Triton cache; no TCP; no signals to
  processes outside the sandbox (ABI 6+). The reference solutions and the
  grader's answer keys are not readable at all.
- For `--explain`'s Nsight Compute step only, the judge's `profiler` field
  opens ncu's install folder, read-only. Not TCP: ncu's injected library
  connects as the process starts, before this runs (docs/grading.md).
- An import blocker for the grader's own modules, so an honest mistake
  (`from gpulab.judge import ...`) gets a clear message even where
  Landlock is missing.

`apply(policy)` returns the names of what is in force, for `check --json`.
"""

from __future__ import annotations

import ctypes
import importlib.abc
import os
import resource
import sys
from pathlib import Path

from gpulab.sandbox.namespaces import ENV as NAMESPACES_ENV

# The policy as the judge sends it in the sandbox's config, typed there.
from gpulab.wire.sandbox_start import Policy as Policy

# --- Landlock (include/uapi/linux/landlock.h) ----------------------------------
_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446  # same on x86-64 and arm64
_RULE_PATH_BENEATH, _VERSION_FLAG = 1, 1
BIND_TCP, CONNECT_TCP = 1 << 0, 1 << 1
_PR_SET_NO_NEW_PRIVS = 38
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_DIR_WRITE = sum(1 << i for i in range(4, 13))  # remove, make char/dir/reg/sock/fifo/block/sym
REFER, TRUNCATE = 1 << 13, 1 << 14
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE
READ = EXECUTE | READ_FILE | READ_DIR
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when there is none."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        n = _libc().syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION_FLAG))
    except (OSError, AttributeError):
        return 0
    return max(0, int(n))


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _add(libc: ctypes.CDLL, ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # gone or unreadable: nothing to allow
    try:
        if not os.path.isdir(path):
            access &= FILE_RIGHTS
        attr = _PathBeneath(access, fd)
        if (
            libc.syscall(
                _SYS_ADD_RULE,
                ctypes.c_int(ruleset),
                ctypes.c_int(_RULE_PATH_BENEATH),
                ctypes.byref(attr),
                ctypes.c_uint32(0),
            )
            != 0
        ):
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


def readable_rules(trees: list[str], hidden: list[str]) -> list[str]:
    """Paths to allow so that every tree is readable except the hidden paths
    inside it: Landlock only allows, so a hidden path's siblings are allowed
    one by one at each level between the tree and it."""
    hidden_paths = {Path(h).resolve() for h in hidden}
    # Every folder with a hidden path somewhere under it: those are opened
    # child by child, anything else is allowed whole. As sets: scanning the
    # list of hidden paths and each one's parents for every child visited
    # took 1.9 s of each sandbox's start (202 hidden paths, 769 rules;
    # two sandboxes a check), a quarter of a CPU check (2026-12-06).
    holding = {parent for h in hidden_paths for parent in h.parents}
    out: list[str] = []

    def visit(p: Path) -> None:
        if p in hidden_paths:
            return
        if p not in holding:
            out.append(str(p))
            return
        if not p.is_dir():
            return
        try:
            children = sorted(p.iterdir())
        except OSError:
            return
        for child in children:
            visit(child)

    for tree in trees:
        visit(Path(tree).resolve())
    return out


def _landlock(policy: Policy, abi: int) -> list[str]:
    libc = _libc()
    fs = READ | WRITE_FILE | _DIR_WRITE | (REFER if abi >= 2 else 0) | (TRUNCATE if abi >= 3 else 0)
    net = (BIND_TCP | CONNECT_TCP) if abi >= 4 else 0  # handled, and no rule allows any
    scoped = (SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL) if abi >= 6 else 0
    attr = (ctypes.c_uint64 * 3)(fs, net, scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    ruleset = libc.syscall(
        _SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
    )
    if ruleset < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock_create_ruleset: {os.strerror(err)}")
    try:
        opened = policy.profiler.read if policy.profiler is not None else []
        read = policy.read + [p for p in opened if os.path.isabs(p)]
        for path in readable_rules(read, policy.hidden):
            _add(libc, ruleset, path, READ)
        for path in policy.listable:
            _add(libc, ruleset, path, READ_DIR)
        for path in policy.write:
            _add(libc, ruleset, path, fs)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_SYS_RESTRICT, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(ruleset)
    what = [
        f"landlock ABI {abi}: files",
        *(["no TCP"] if net else []),
        *(["no signals or abstract sockets outside"] if scoped else []),
    ]
    return [", ".join(what)]


def _limits(policy: Policy) -> list[str]:
    def cap(which: int, value: int) -> None:
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value if hard == resource.RLIM_INFINITY else hard))

    cap(resource.RLIMIT_CPU, policy.cpu_seconds)
    cap(resource.RLIMIT_FSIZE, policy.file_bytes)
    cap(resource.RLIMIT_CORE, 0)
    done = [f"cpu {policy.cpu_seconds} s", f"files {policy.file_bytes >> 20} MiB"]
    if policy.address_space:
        cap(resource.RLIMIT_AS, policy.address_space)
        done.append(f"memory {policy.address_space >> 30} GiB")
    if os.geteuid() != 0:  # root ignores RLIMIT_NPROC
        running = sum(1 for p in Path("/proc").iterdir() if p.name.isdigit())
        cap(resource.RLIMIT_NPROC, running + 512)
        done.append("processes")
    return ["rlimits: " + ", ".join(done)]


class _Blocker(importlib.abc.MetaPathFinder):
    def __init__(self, names: list[str]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if any(fullname == n or fullname.startswith(n + ".") for n in self.names):
            raise ImportError(
                f"{fullname} is part of the grader and cannot be imported by a submission",
                name=fullname,
            )
        return None


_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "arm64": 219}
_KEYCTL_JOIN_SESSION_KEYRING = 1


def _own_keyring() -> list[str]:
    """A session keyring of the sandbox's own, empty. The one it inherits is
    the user's login's (pam_keyinit makes one a session), and any process
    that holds it reads its keys (a Kerberos ticket kept in a KEYRING:
    cache, a token a tool stored there): no namespace separates keyrings
    and Landlock governs no keyctl. Joined, the old one is no longer held:
    its keys are then read only as their permissions allow anyone of the
    user (by default, not at all)."""
    import platform

    nr = _SYS_KEYCTL.get(platform.machine())
    if nr is None:
        return []
    libc = _libc()
    if libc.syscall(nr, _KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        return []  # no keyctl here (a container's seccomp): nothing to inherit either
    return ["a keyring of its own"]


def apply(policy: Policy) -> list[str]:
    """Confine this process; returns what is in force, one item a mechanism."""
    in_force = _limits(policy) + _own_keyring()
    if os.environ.get(NAMESPACES_ENV, "none").startswith("none"):
        # No mount namespace: Landlock is all that governs files, and it
        # governs no chmod, chown, utime or xattr (gpulab.sandbox.modes).
        from gpulab.sandbox.modes import refuse_mode_changes

        in_force += refuse_mode_changes()
    sys.meta_path.insert(0, _Blocker(policy.blocked_modules))
    in_force.append("grader modules not importable")
    abi = landlock_abi()
    if abi:
        in_force += _landlock(policy, abi)
    else:
        in_force.append("no landlock (kernel without it): files readable as the user")
    return in_force
