"""Tensors in shared memory, the sandbox's side: open an arena, view a
TensorRef as a tensor with a storage of its own (so storages tell tensors
apart, as they do for tensors the learner allocates)."""

from __future__ import annotations

import mmap
import os
from typing import Any

import torch

from gpulab.wire.protocol import ArenaSpec, ProtocolError, TensorRef, is_tensor_ref

# The arenas the judge handed over, by id (each an open_arena).
Arenas = dict[int, Any]


def dtype_of(name: str) -> torch.dtype:
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise ProtocolError(f"unknown dtype {name!r}")
    return dt


class FileArena:
    def __init__(self, spec: ArenaSpec, fd: int) -> None:
        try:
            self.map = mmap.mmap(fd, spec.nbytes)
        finally:
            os.close(fd)
        self.nbytes = spec.nbytes
        self._whole: torch.Tensor | None = None

    def whole(self) -> torch.Tensor:
        if self._whole is None:
            self._whole = self.storage(0, self.nbytes)
        return self._whole

    def storage(self, offset: int, nbytes: int) -> torch.Tensor:
        return torch.frombuffer(self.map, dtype=torch.uint8, count=nbytes, offset=offset)


class _CudaSpan:
    """A span of the arena for torch.as_tensor (its own storage, no copy)."""

    def __init__(self, ptr: int, nbytes: int, owner: Any) -> None:
        self.owner = owner  # keeps the mapping alive while the tensor lives
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (ptr, False),
            "version": 2,
        }


class CudaArena:
    def __init__(self, spec: ArenaSpec, fd: int) -> None:
        from gpulab.measure import vmm

        self.mapping = vmm.open_shared(fd, spec.nbytes, int(spec.device))
        self.base = self.mapping.ptr
        self.nbytes = spec.nbytes
        self.device = int(spec.device)
        self._whole: torch.Tensor | None = None

    def whole(self) -> torch.Tensor:
        if self._whole is None:
            self._whole = self.mapping.tensor()
        return self._whole

    def storage(self, offset: int, nbytes: int) -> torch.Tensor:
        if nbytes == 0:
            return torch.empty(0, dtype=torch.uint8, device=f"cuda:{self.device}")
        span = _CudaSpan(self.base + offset, nbytes, self)
        return torch.as_tensor(span, device=f"cuda:{self.device}")


def open_arena(spec: ArenaSpec, fd: int) -> Any:
    """The arena `spec` names, mapped from the descriptor the judge passed."""
    if spec.kind == "memfd":
        return FileArena(spec, fd)
    if spec.kind == "cuda":
        return CudaArena(spec, fd)
    os.close(fd)
    raise ProtocolError(f"unknown arena kind {spec.kind!r}")


def view(arenas: Arenas, ref: TensorRef, own_storage: bool = True) -> torch.Tensor:
    """The tensor `ref` names. With `own_storage` it gets a storage object of
    its own (slower: the guards tell tensors apart by storage); without, it
    is a view of the arena's whole storage (for timed loops)."""
    arena = arenas.get(ref.arena)
    if arena is None:
        raise ProtocolError(f"no arena {ref.arena}")
    if ref.offset + ref.nbytes > arena.nbytes:
        raise ProtocolError("a tensor reference past its arena's end")
    dtype = dtype_of(ref.dtype)
    if own_storage:
        typed = arena.storage(ref.offset, ref.nbytes).view(dtype)
    else:
        typed = arena.whole()[ref.offset : ref.offset + ref.nbytes].view(dtype)
    return torch.as_strided(
        typed, ref.shape, ref.stride, typed.storage_offset() + ref.storage_offset
    )


def materialize(arenas: Arenas, obj: Any, own_storage: bool = True) -> Any:
    """JSON arguments with tensor references made into tensors."""
    if is_tensor_ref(obj):
        return view(arenas, TensorRef.from_json(obj), own_storage)
    if isinstance(obj, list):
        return [materialize(arenas, v, own_storage) for v in obj]
    if isinstance(obj, dict):
        if set(obj) == {"__ns__"} and isinstance(obj["__ns__"], dict):
            import types

            return types.SimpleNamespace(**materialize(arenas, obj["__ns__"]))
        if set(obj) == {"__tuple__"}:
            return tuple(materialize(arenas, v, own_storage) for v in obj["__tuple__"])
        return {k: materialize(arenas, v, own_storage) for k, v in obj.items()}
    return obj
