"""GPU memory shared between the judge and the sandbox as a file descriptor.

CUDA's virtual memory management (cuMemCreate with POSIX file-descriptor
handles, CUDA 10.2+ on Linux) instead of torch's CUDA IPC: torch's IPC keeps
a reference count in a file under /dev/shm that both processes map, so a
sandbox that truncates it kills the judge with SIGBUS, and legacy IPC handles
do not open across PID namespaces (the sandbox has its own). A descriptor
passed over the check's socket needs neither a shared path nor a shared
namespace, and gives the sandbox this allocation and nothing else.

Driver API through ctypes (libcuda ships with the driver, no extra package).
Both sides wrap the mapping as a torch tensor through
`__cuda_array_interface__`.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

_POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
_ON_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
_READ_WRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class _Prop(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", _Location),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", _AllocFlags),
    ]


class _Access(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class CudaError(OSError):
    pass


_lib: Any = None


def _cuda() -> Any:
    global _lib
    if _lib is None:
        _lib = ctypes.CDLL("libcuda.so.1")
    return _lib


def _check(what: str, code: int) -> None:
    if code != 0:
        name = ctypes.c_char_p()
        _cuda().cuGetErrorName(code, ctypes.byref(name))
        raise CudaError(f"{what}: CUDA error {code} ({(name.value or b'?').decode()})")


def _prop(device: int) -> _Prop:
    prop = _Prop()
    prop.type = _PINNED
    prop.requestedHandleTypes = _POSIX_FD
    prop.location = _Location(_ON_DEVICE, device)
    return prop


def _ensure_context(device: int) -> None:
    """The calling thread needs a current context: torch's primary one."""
    import torch

    init: Callable[[], None] = torch.cuda.init  # unannotated in torch
    init()
    torch.cuda.set_device(device)
    torch.empty(1, device=f"cuda:{device}")  # makes the primary context current here


def rounded(nbytes: int, device: int) -> int:
    lib = _cuda()
    gran = ctypes.c_size_t()
    prop = _prop(device)
    _check(
        "granularity", lib.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), 0)
    )
    g = gran.value or (2 << 20)
    return -(-nbytes // g) * g


class Mapping:
    """A mapped allocation of `nbytes` on `device`, with its tensor of bytes."""

    def __init__(self, handle: int, nbytes: int, device: int) -> None:
        lib = _cuda()
        self.handle, self.nbytes, self.device = handle, nbytes, device
        ptr = ctypes.c_uint64()
        _check(
            "cuMemAddressReserve",
            lib.cuMemAddressReserve(ctypes.byref(ptr), ctypes.c_size_t(nbytes), 0, 0, 0),
        )
        self.ptr = ptr.value
        _check(
            "cuMemMap",
            lib.cuMemMap(
                ctypes.c_uint64(self.ptr), ctypes.c_size_t(nbytes), 0, ctypes.c_uint64(handle), 0
            ),
        )
        access = _Access(_Location(_ON_DEVICE, device), _READ_WRITE)
        _check(
            "cuMemSetAccess",
            lib.cuMemSetAccess(
                ctypes.c_uint64(self.ptr), ctypes.c_size_t(nbytes), ctypes.byref(access), 1
            ),
        )
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (self.ptr, False),
            "version": 2,
        }

    def tensor(self) -> Any:
        """The whole mapping as a uint8 tensor (it keeps this object alive)."""
        import torch

        return torch.as_tensor(self, device=f"cuda:{self.device}")


def allocate(nbytes: int, device: int) -> tuple[Mapping, int]:
    """The judge's side: a fresh allocation, mapped here, and a descriptor
    for it to pass to the sandbox (the caller closes it once sent)."""
    import os

    _ensure_context(device)
    lib = _cuda()
    nbytes = rounded(nbytes, device)
    handle = ctypes.c_uint64()
    prop = _prop(device)
    _check(
        "cuMemCreate",
        lib.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(nbytes), ctypes.byref(prop), 0),
    )
    fd = ctypes.c_int(-1)
    _check(
        "cuMemExportToShareableHandle",
        lib.cuMemExportToShareableHandle(
            ctypes.byref(fd), ctypes.c_uint64(handle.value), _POSIX_FD, 0
        ),
    )
    os.set_inheritable(fd.value, False)
    return Mapping(handle.value, nbytes, device), fd.value


def open_shared(fd: int, nbytes: int, device: int) -> Mapping:
    """The sandbox's side: map the allocation behind `fd` (then closed)."""
    import os

    _ensure_context(device)
    lib = _cuda()
    handle = ctypes.c_uint64()
    try:
        _check(
            "cuMemImportFromShareableHandle",
            lib.cuMemImportFromShareableHandle(
                ctypes.byref(handle), ctypes.c_void_p(fd), _POSIX_FD
            ),
        )
    finally:
        os.close(fd)
    return Mapping(handle.value, nbytes, device)
