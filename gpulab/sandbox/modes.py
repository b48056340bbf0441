"""A seccomp filter that refuses the calls changing a file's mode, owner,
times or extended attributes (chmod, chown, utime, xattr and their
variants), for a sandbox that runs without namespaces.

Landlock governs reading, writing and making files, not these: without a
mount namespace (where the kernel refuses user namespaces, as Ubuntu
24.04's AppArmor rule does) a submission could make any file of the user's
readable by all (an SSH key it cannot read itself) or make one of the
user's programs setuid, for another user of the box to run as them. Honest
code in a check has no use for these calls: the linker that builds
Triton's launcher ignores a refused chmod, and the compiler cache's files
are written and renamed, never chmodded. With namespaces the sandbox's
binds are read-only mounts, where these calls fail anyway.

Only the standard library (ctypes): this runs before any learner code.
"""

from __future__ import annotations

import ctypes
import errno
import platform

_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_X32_BIT = 0x40000000  # x86-64's x32 calls: the same numbers with this bit set

# (the architecture's audit number, the calls refused)
_CALLS: dict[str, tuple[int, tuple[int, ...]]] = {
    "x86_64": (
        0xC000003E,
        # chmod fchmod chown fchown lchown utime setxattr lsetxattr fsetxattr
        # removexattr lremovexattr fremovexattr utimes fchownat futimesat
        # fchmodat utimensat fchmodat2 setxattrat removexattrat
        (90, 91, 92, 93, 94, 132, 188, 189, 190, 197, 198, 199, 235, 260, 261, 268, 280)
        + (452, 463, 466),
    ),
    "aarch64": (
        0xC00000B7,
        # setxattr lsetxattr fsetxattr removexattr lremovexattr fremovexattr
        # fchmod fchmodat fchownat fchown utimensat fchmodat2 setxattrat removexattrat
        (5, 6, 7, 14, 15, 16, 52, 53, 54, 55, 88, 452, 463, 466),
    ),
}
_CALLS["arm64"] = _CALLS["aarch64"]


class _Filter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    ]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def program(machine: str) -> list[tuple[int, int, int, int]] | None:
    """The filter for `machine` as (code, jt, jf, k) rows, or None where
    gpulab does not know its calls. Another architecture's calls (i386's,
    through int 0x80 on x86-64) are refused whole: their numbers differ."""
    known = _CALLS.get(machine)
    if known is None:
        return None
    arch, calls = known
    rows: list[tuple[int, int, int, int]] = [(_LD_W_ABS, 0, 0, 4)]  # seccomp_data.arch
    rows.append((_JEQ_K, 1, 0, arch))
    rows.append((_RET_K, 0, 0, _RET_ERRNO | errno.EPERM))
    rows.append((_LD_W_ABS, 0, 0, 0))  # seccomp_data.nr
    tests: list[tuple[int, int]] = [(_JGE_K, _X32_BIT)] if machine == "x86_64" else []
    tests += [(_JEQ_K, nr) for nr in calls]
    # Each test jumps to the refusal at the end when it holds; past the last,
    # the call is allowed.
    for i, (code, k) in enumerate(tests):
        rows.append((code, len(tests) - i, 0, k))
    rows.append((_RET_K, 0, 0, _RET_ALLOW))
    rows.append((_RET_K, 0, 0, _RET_ERRNO | errno.EPERM))
    return rows


def refuse_mode_changes() -> list[str]:
    """Install the filter in this process (and what it starts); what is in
    force, in words, or nothing where it could not be installed."""
    rows = program(platform.machine())
    if rows is None:
        return []
    libc = ctypes.CDLL(None, use_errno=True)
    filters = (_Filter * len(rows))(*(_Filter(*row) for row in rows))
    prog = _Program(len(rows), filters)
    # no_new_privs first: a filter may be installed without privileges only
    # by a process that can gain none (Landlock sets it too).
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return []
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        return []
    return ["no chmod, chown, utime or xattr calls"]
