"""The sandbox's own namespaces: a check is a unit that dies whole and sees
only what it needs.

The judge starts `python -I -c <boot> SPEC ARGV...` (gpulab.judge.remote).
Before any learner code exists, this process (the *keeper*) makes, with
Linux's unprivileged user namespaces:

- a user namespace (the same uid and gid mapped, no new rights outside it);
- a network namespace with no interface up: no TCP, no UDP, and abstract
  unix sockets of its own;
- an IPC namespace (no System V or POSIX message queues of the host's);
- a PID namespace whose init is a small process of gpulab's (the *init*):
  the sandbox runs under it, and when the sandbox ends the init ends and the
  kernel kills every process left in the namespace, however it forked or
  setsid'd. The keeper dies with the judge and the init with the keeper
  (PR_SET_PDEATHSIG), so a judge killed by anything takes them all along.
  /proc is the namespace's own: no other process's environment or command
  line is there to read;
- a mount namespace whose root is a fresh tmpfs holding only what the
  policy names: the read trees bound read-only, the write trees read-write,
  a fresh /tmp, /dev/shm and /run (size-capped, gone with the namespace), a
  /dev of the plain device nodes and the GPU's, and empty files or folders
  mounted over the hidden paths (reference solutions, graders and their
  bytecode). A pathname socket outside those trees (systemd's, docker's, an
  ssh agent's, tmux's) does not exist in there.

Landlock (gpulab.sandbox.isolation) still applies inside, as a second layer.

Where the kernel refuses a step (user namespaces off, or restricted as on
Ubuntu 24.04), the keeper runs the sandbox with what it got and says so:
`GPULAB_NAMESPACES` tells the sandbox, which reports it in `isolation`.

Only the standard library: this runs before torch is imported.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import re
import signal
import sys
from typing import Required, TypedDict

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MNT_DETACH = 2
_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_SYS_PIVOT_ROOT = 41 if platform.machine() in ("aarch64", "arm64") else 155
_SYS_CAPSET = 91 if platform.machine() in ("aarch64", "arm64") else 126
_CAP_VERSION_3 = 0x20080522
ENV = "GPULAB_NAMESPACES"
# Plain device nodes a Python process and CUDA may open; the GPU's own
# (/dev/nvidia*) come from the policy's write list.
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
TMP_BYTES = 2 << 30  # /tmp, HOME and TMPDIR together: memory, used as written
SHM_BYTES = 512 << 20


class MountSpec(TypedDict, total=False):
    """What the sandbox's namespaces hold, as the judge wrote it
    (gpulab.judge.remote.namespace_spec) in JSON on the keeper's command
    line: the private folder, the trees bound read-only and read-write,
    those only listed, the paths covered, whether the network is cut off,
    and the judge's socket to close in the namespace's init. A switch left
    out is on."""

    private: Required[str]
    read: list[str]
    write: list[str]
    listable: list[str]
    hidden: list[str]
    network_namespace: bool
    ipc_namespace: bool
    pid_namespace: bool
    namespaces: bool
    close_in_init: list[int]


class Refused(OSError):
    """A step the kernel refused: the sandbox runs with less, and says so."""


_libc = ctypes.CDLL(None, use_errno=True)


def _call(what: str, rc: int) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise Refused(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    _call(
        f"mount {target}",
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
    )


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def main() -> None:
    spec: MountSpec = json.loads(sys.argv[1])  # the judge's, not the learner's
    argv = sys.argv[2:]
    confine(spec)
    os.execv(argv[0], argv)


def confine(spec: MountSpec) -> None:
    """The keeper's work: returns in the process that becomes the sandbox,
    with its namespaces made and no capabilities left. Run by the keeper
    `main` above before it execs the sandbox, or by a process the fork
    server (gpulab.sandbox.forkserver) forked, which runs it in place."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if spec.get("namespaces", True):
        try:
            os.environ[ENV] = enter(spec)
        except Refused as exc:
            os.environ[ENV] = f"none ({exc.strerror})"
    else:
        os.environ[ENV] = "none (turned off)"
    drop_capabilities()
    clear_capabilities()


def drop_capabilities() -> None:
    """Empty the capability bounding set (and the ambient set), so that the
    sandbox execs with none. A user other than root loses them at exec
    anyway; uid 0, mapped to itself, would keep every capability in its
    user namespace: through read-write binds it chmodded the host's
    /dev/null and cgroup files, and open_tree cloned the package's mount
    without the empty files that hide the graders (Landlock alone then kept
    them unreadable). Where a call is refused (no CAP_SETPCAP outside a
    namespace of ours), there was nothing to drop."""
    for cap in range(64):
        if _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break  # past the kernel's last capability
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def clear_capabilities() -> None:
    """Empty this process's effective, permitted and inheritable sets. A
    process that made a user namespace holds every capability in it; an
    exec (the keeper's) cleared them for any uid but 0, but a sandbox the
    fork server forked runs on without one, and kept them all (CapEff
    000001ffffffffff: it could mount, or clone the package's mount past the
    covers over the graders). Refused where there is nothing to clear."""
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    _libc.syscall(_SYS_CAPSET, ctypes.byref(header), data)


def enter(spec: MountSpec) -> str:
    """Returns, in the process that becomes the sandbox, what is in force.
    The keeper and the init never return from here."""
    uid, gid = os.getuid(), os.getgid()
    # Nsight Compute's injected library talks to ncu over TCP from inside the
    # profiled process: its sandbox keeps the network namespace it has
    # (Landlock still refuses it new TCP connections).
    net = CLONE_NEWNET if spec.get("network_namespace", True) else 0
    ipc = CLONE_NEWIPC if spec.get("ipc_namespace", True) else 0
    _call("unshare", _libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | net | ipc))
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
        private = spec["private"]
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        # The new root is built on a tmpfs over the judge's (empty) private
        # folder: the judge's own view of that folder stays empty.
        mount("tmpfs", private, "tmpfs", MS_NOSUID | MS_NODEV, f"size={TMP_BYTES},mode=0700")
        if not spec.get("pid_namespace", True):
            note = build_root(spec)
            os.chdir(private)
            return "user, mount" + (", network" if net else "") + (", IPC" if ipc else "") + note
        _call("unshare pid", _libc.unshare(CLONE_NEWPID))
    except Refused as exc:
        # No pid namespace was made, so running on here is safe.
        return ("network and IPC" if net else "IPC") + f" only (mounts refused: {exc.strerror})"
    report_r, report_w = os.pipe()
    init = os.fork()
    if init:
        os.close(report_w)
        _keeper(init, report_r)
    os.close(report_r)
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    try:
        proc_note = build_root(spec)
    except OSError as exc:
        os.write(report_w, f"E the sandbox's root could not be built: {exc}".encode())
        os._exit(125)
    sandbox = os.fork()
    if sandbox == 0:
        os.close(report_w)
        os.chdir(private)
        return ("user, pid, mount, network, IPC" if net else "user, pid, mount, IPC") + proc_note
    _init(sandbox, report_w, spec.get("close_in_init", []))
    raise AssertionError("unreachable")


def _init(sandbox: int, report_w: int, fds: list[int]) -> None:
    """PID 1: reap whatever is orphaned here; when the sandbox ends, hand its
    status to the keeper and end, which ends everything else."""
    for fd in fds:  # the judge's socket: only the sandbox holds it now
        try:
            os.close(fd)
        except OSError:
            pass
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(125)
        if pid == sandbox:
            os.write(report_w, f"S {status}".encode())
            os._exit(0)


def _keeper(init: int, report_r: int) -> None:
    """Outside the pid namespace: wait for the init, then end as the sandbox
    ended, so the judge's Popen sees the sandbox's own exit or signal."""
    os.closerange(3, report_r)
    os.closerange(report_r + 1, 1 << 16)
    report = b""
    while chunk := os.read(report_r, 4096):
        report += chunk
    os.waitpid(init, 0)
    text = report.decode(errors="replace")
    if text.startswith("S "):
        status = int(text[2:])
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 125)
    if text.startswith("E "):
        sys.stderr.write(text[2:] + "\n")
        sys.stderr.flush()
    os._exit(125)


# --- the new root ------------------------------------------------------------------


def build_root(spec: MountSpec) -> str:
    """Make the tmpfs mounted on `private` the root: binds, a fresh /tmp,
    /dev, /proc, hidden paths covered, then pivot_root. Returns a note for
    `isolation` ("" when /proc is the namespace's own)."""
    root = spec["private"]
    binds = Binds(root)
    os.makedirs(root + "/tmp", exist_ok=True)
    mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={TMP_BYTES},mode=1777")
    for d in ("/run", "/var/run", "/var/tmp"):
        if os.path.isdir(d) and not os.path.islink(d):
            os.makedirs(root + d, exist_ok=True)
            mount("tmpfs", root + d, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    special = {"/dev", "/proc", "/sys", "/tmp", "/dev/shm", "/run", "/var/run"}
    trees = [(p, False) for p in spec.get("read", [])] + [(p, True) for p in spec.get("write", [])]
    # Parents before children, so a write tree inside a read tree lands on top.
    for path, writable in sorted(trees, key=lambda t: (t[0].count("/"), t[0])):
        if path in special or path.startswith("/dev/"):
            continue
        binds.bind(path, writable)
    _make_dev(root, binds, spec.get("write", []))
    binds.bind("/sys", False)
    for path in spec.get("listable", []):
        binds.folder(path)
    for path in spec.get("hidden", []):
        binds.cover(path)
    binds.links()
    os.makedirs(root + "/proc", exist_ok=True)
    note = ""
    try:
        mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except Refused as exc:
        # A container that masks parts of /proc refuses a fresh one: the
        # host's then, and the result says so.
        mount("/proc", root + "/proc", None, MS_BIND | MS_REC)
        note = f" (the host's /proc: a fresh one was refused, {exc.strerror})"
    # The private folder itself: HOME, TMPDIR and the working directory.
    os.makedirs(root + spec["private"], mode=0o700, exist_ok=True)
    os.makedirs(root + "/.old", exist_ok=True)
    _call("pivot_root", _libc.syscall(_SYS_PIVOT_ROOT, root.encode(), (root + "/.old").encode()))
    os.chdir("/")
    _call("umount old root", _libc.umount2(b"/.old", MNT_DETACH))
    os.rmdir("/.old")
    return note


def _make_dev(root: str, binds: Binds, write: list[str]) -> None:
    os.makedirs(root + "/dev", exist_ok=True)
    mount("tmpfs", root + "/dev", "tmpfs", MS_NOSUID, "size=64k,mode=0755")
    for node in DEVICES:
        # Read-only binds: a device node is still read and written through
        # one (the kernel leaves special files out of a mount's read-only
        # check), but its inode is the host's own, and a check run as root
        # (uid 0 mapped to 0 keeps every capability in the user namespace)
        # could chmod it: the host's /dev/null made unusable for everyone.
        if os.path.exists(node):
            binds.bind(node, False)
    for node in (p for p in write if p.startswith("/dev/nvidia")):
        if os.path.exists(node):
            binds.bind(node, True)
    os.makedirs(root + "/dev/shm")
    mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={SHM_BYTES},mode=1777")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0")):
        os.symlink(target, f"{root}/dev/{name}")
    os.symlink("/proc/self/fd/1", root + "/dev/stdout")
    os.symlink("/proc/self/fd/2", root + "/dev/stderr")


def mounts_under(target: str) -> list[str]:
    """`target` and every mount point below it, parents first (from this
    process's mountinfo, whose paths escape spaces and the like in octal)."""
    points = []
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            field = line.split()[4]
            point = os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), field))
            if point == target or point.startswith(target.rstrip("/") + "/"):
                points.append(point)
    return sorted(dict.fromkeys(points), key=lambda p: p.count("/"))


class Binds:
    """Mounts inside the new root, never creating anything through a bound
    tree (that would write to the host's files) or through a symlink."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.bound: dict[str, bool] = {}  # real host path -> writable
        self.symlinks: list[str] = []

    def _inside_bound(self, real: str) -> str | None:
        for b in self.bound:
            if real == b or real.startswith(b.rstrip("/") + "/"):
                return b
        return None

    def _skeleton(self, real: str, is_dir: bool) -> bool:
        """Create the mount point for `real` in the new root; False when it
        would have to be made inside a bound tree."""
        target = self.root + real
        if self._inside_bound(os.path.dirname(real) or "/"):
            return os.path.lexists(target)
        parent = os.path.dirname(target)
        os.makedirs(parent, exist_ok=True)
        if is_dir:
            os.makedirs(target, exist_ok=True)
        elif not os.path.lexists(target):
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o600))
        return True

    def bind(self, path: str, writable: bool) -> None:
        if not os.path.exists(path):
            return
        self._note_links(path)
        real = os.path.realpath(path)
        outer = self._inside_bound(real)
        if outer is not None and (self.bound[outer] or not writable):
            return  # already there, with at least these rights
        if not self._skeleton(real, os.path.isdir(real)):
            return
        target = self.root + real
        mount(real, target, None, MS_BIND | MS_REC)
        if not writable:
            # Every mount of the tree, not only its top: MS_REC brings the
            # mounts below along as they were, rw (/sys/fs/cgroup and its
            # hierarchies on a host with cgroup v1). Landlock refuses writes
            # there, but not chmod: a check run as root chmodded the host's
            # cgroup files through them.
            for point in mounts_under(target):
                self._read_only(point)
        self.bound[real] = writable

    def _read_only(self, target: str) -> None:
        try:
            st = os.statvfs(target)
        except OSError:
            return  # a mount below that cannot be asked (a FUSE one): Landlock's
        kept = sum(
            flag
            for bit, flag in (
                (os.ST_NOSUID, MS_NOSUID),
                (os.ST_NODEV, MS_NODEV),
                (os.ST_NOEXEC, MS_NOEXEC),
                # Locked too in a mount from outside the namespace: a
                # remount that drops them is refused.
                (os.ST_NOATIME, MS_NOATIME),
                (os.ST_NODIRATIME, MS_NODIRATIME),
                (os.ST_RELATIME, MS_RELATIME),
            )
            if st.f_flag & bit
        )
        try:
            mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | kept)
        except Refused:
            pass  # Landlock still keeps it read-only

    def folder(self, path: str) -> None:
        """A folder whose bound children are listed, nothing else of it."""
        real = os.path.realpath(path)
        if os.path.isdir(real) and self._inside_bound(real) is None:
            self._note_links(path)
            self._skeleton(real, True)

    def cover(self, path: str) -> None:
        """An empty, unreadable file or folder mounted over a hidden path."""
        real = os.path.realpath(path)
        if not os.path.exists(real) or not os.path.lexists(self.root + real):
            return
        empty = self.root + "/.hidden-dir" if os.path.isdir(real) else self.root + "/.hidden"
        if not os.path.lexists(empty):
            if empty.endswith("dir"):
                os.mkdir(empty, 0o000)
            else:
                os.close(os.open(empty, os.O_CREAT | os.O_WRONLY, 0o000))
        mount(empty, self.root + real, None, MS_BIND)

    def _note_links(self, path: str) -> None:
        """Symlinks on the way to `path` (/lib -> usr/lib), made in the new root later."""
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:i])
            if os.path.islink(prefix):
                self.symlinks.append(prefix)
                self._note_links(os.path.realpath(prefix))
                return

    def links(self) -> None:
        for link in dict.fromkeys(self.symlinks):
            target = self.root + link
            parent = os.path.dirname(link) or "/"
            if os.path.lexists(target) or self._inside_bound(os.path.realpath(parent)):
                continue
            os.makedirs(self.root + parent, exist_ok=True)
            os.symlink(os.readlink(link), target)


if __name__ == "__main__":
    main()
