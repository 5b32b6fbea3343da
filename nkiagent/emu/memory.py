"""Memories, allocations and the per-run kernel context.

An :class:`Alloc` is one allocated tensor's storage: a flat NumPy array (absent in
timing-only mode) plus the facts the allocator and the cost model need. The
:class:`KernelContext` owns everything one kernel execution may touch: the target, the
caller's trace, SBUF/PSUM accounting and the SPMD program id. Kernel code never gets a
reference to the context or to the arrays; it only holds :class:`~nkiagent.emu.tensor.NkiTensor`
views.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from . import dtypes as dt
from .errors import NkiCapacityError, NkiRuntimeError, NkiTypeError, NkiValidationError, kernel_location
from .targets import Target
from .trace import Trace

__all__ = ["Buffer", "sbuf", "psum", "hbm", "shared_hbm", "private_hbm", "BUFFERS", "Alloc", "KernelContext", "current", "running"]


class Buffer:
    """A memory region (``nl.sbuf``, ``nl.psum``, ``nl.hbm`` …)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def on_chip(self) -> bool:
        return self.name in ("sbuf", "psum")

    def __repr__(self) -> str:
        return f"nl.{self.name}"

    def __call__(self, *args: Any, **kwargs: Any) -> Buffer:
        """0.1 kernels write ``nl.sbuf`` or ``ncc.sbuf.auto_alloc()``: both mean the buffer."""
        return self


sbuf = Buffer("sbuf")
psum = Buffer("psum")
hbm = Buffer("hbm")
shared_hbm = Buffer("shared_hbm")
private_hbm = Buffer("private_hbm")
BUFFERS = {b.name: b for b in (sbuf, psum, hbm, shared_hbm, private_hbm)}


class Alloc:
    """Storage of one allocation. Partition dim is ``shape[pdim]`` on chip; HBM is flat."""

    __slots__ = (
        "uid",
        "name",
        "memory",
        "dtype",
        "shape",
        "pdim",
        "data",
        "itemsize",
        "partitions",
        "bytes_pp",
        "address",
        "acc_open",
        "written",
        "is_input",
        "__weakref__",
    )

    def __init__(self, uid: int, name: str, memory: str, dtype: np.dtype, shape: tuple[int, ...], pdim: int, compute: bool) -> None:
        self.uid = uid
        self.name = name
        self.memory = memory
        self.dtype = dtype
        self.shape = shape
        self.pdim = pdim
        self.itemsize = dt.storage_dtype(dtype).itemsize
        size = math.prod(shape)
        if memory in ("sbuf", "psum"):
            self.partitions = shape[pdim]
            self.bytes_pp = (size // max(self.partitions, 1)) * self.itemsize
        else:
            self.partitions = 1
            self.bytes_pp = size * self.itemsize
        self.data: np.ndarray | None = None
        if compute:
            self.data = np.empty(size, dtype=dt.storage_dtype(dtype))
            dt.fill_uninitialized(self.data, dtype)
        self.address = 0
        self.acc_open: np.ndarray | None = None
        self.written = False
        self.is_input = False

    @property
    def on_chip(self) -> bool:
        return self.memory in ("sbuf", "psum")


_CURRENT: KernelContext | None = None


def current() -> KernelContext:
    """The running kernel's context, or the documented error when called outside a kernel."""
    if _CURRENT is None:
        raise NkiRuntimeError(
            "err_nki_api_outside_of_nki_kernel", "Calling NKI API outside of NKI kernels is not supported."
        )
    return _CURRENT


def running() -> KernelContext | None:
    return _CURRENT


class KernelContext:
    """Everything one kernel execution (one SPMD instance or the whole grid) can touch."""

    def __init__(self, target: Target, trace: Trace | None, compute: bool = True, api: str = "0.3") -> None:
        self.target = target
        self.trace = trace
        self.compute = compute
        self.api = api
        self.program_id: tuple[int, ...] = ()
        self.grid: tuple[int, ...] = ()
        self.seq = 0
        self.next_uid = 1
        self.sbuf_used = 0
        self.sbuf_peak = 0
        self.sbuf_live: dict[int, tuple[int, int]] = {}  # uid -> (start, end) bytes per partition
        self.psum_live: dict[int, tuple[int, int]] = {}  # uid -> (start, end) bytes per partition
        self.loops: list[list[Any]] = []  # [uid, kind, iteration]
        self.next_loop = 1
        self.shared: list[Alloc] = []  # shared_hbm allocations, in creation order, for SPMD sharing
        self.shared_cursor = 0
        self.outputs: list[Alloc] = []

    # -- allocation ---------------------------------------------------------------------------
    def allocate(
        self, shape: tuple[int, ...], dtype: np.dtype, buffer: Buffer, name: str = "", address: Any = None, pdim: int = 0
    ) -> Alloc:
        """Allocate storage, enforcing rank, partition, SBUF capacity and PSUM bank rules."""
        mem = buffer.name
        if any((not isinstance(s, (int, np.integer))) or s < 0 for s in shape):
            raise NkiTypeError("err_invalid_shape", f"tensor shape {list(shape)} must be non-negative integers")
        shape = tuple(int(s) for s in shape)
        if mem in ("sbuf", "psum"):
            if len(shape) < 2:
                raise NkiValidationError(
                    "err_insufficient_rank",
                    f"Insufficient rank: on-chip tensor `{name or 'tensor'}` of shape {list(shape)} must have at least 2 dimensions (partition, free)",
                )
            if shape[pdim] > self.target.pmax:
                raise NkiValidationError(
                    "err_num_partition_exceed_arch_limit",
                    f"number of partitions {shape[pdim]} exceed architecture limitation of {self.target.pmax}.",
                )
        if mem == "shared_hbm" and self.grid and self.shared_cursor < len(self.shared):
            # Later SPMD instances see the same shared_hbm tensor the first instance created.
            alloc = self.shared[self.shared_cursor]
            self.shared_cursor += 1
            if alloc.shape != shape or alloc.dtype != dtype:
                raise NkiValidationError(
                    "err_shared_hbm_mismatch",
                    f"shared_hbm tensor `{name}` has shape {list(shape)} {dt.dtype_name(dtype)} in program {self.program_id} "
                    f"but {list(alloc.shape)} {dt.dtype_name(alloc.dtype)} in program 0",
                )
            return alloc
        alloc = Alloc(self.next_uid, name or f"t{self.next_uid}", mem, dtype, shape, pdim, self.compute)
        self.next_uid += 1
        if mem == "sbuf":
            self._alloc_sbuf(alloc, address)
        elif mem == "psum":
            self._alloc_psum(alloc, address)
            if self.compute:
                alloc.acc_open = np.zeros(alloc.data.size if alloc.data is not None else 0, dtype=bool)
        elif mem == "shared_hbm":
            self.shared.append(alloc)
            self.shared_cursor = len(self.shared)
        if self.trace is not None:
            self.trace.allocations.append(
                {"uid": alloc.uid, "name": alloc.name, "memory": mem, "shape": list(shape), "dtype": dt.dtype_name(dtype),
                 "bytes_per_partition": alloc.bytes_pp, "address": alloc.address, "seq": self.seq, "location": kernel_location()}
            )
        return alloc

    def _alloc_sbuf(self, alloc: Alloc, address: Any) -> None:
        usable = self.target.sbuf_usable_bytes
        if address is not None:
            free_off = int(address[1]) if isinstance(address, (tuple, list)) else int(address)
            if free_off + alloc.bytes_pp > usable:
                raise NkiCapacityError(
                    "err_sbuf_out_of_bound",
                    f"Allocated memory out of bound: `{alloc.name}` at byte {free_off} with {alloc.bytes_pp} B per partition "
                    f"exceeds the {usable} B of SBUF usable per partition on {self.target.name}",
                )
            alloc.address = free_off
            return
        need = self.sbuf_used + alloc.bytes_pp
        if need > usable:
            raise NkiCapacityError(
                "err_sbuf_capacity_exceeded",
                f"SBUF overflow: allocating `{alloc.name}` {list(alloc.shape)} {dt.dtype_name(alloc.dtype)} "
                f"({alloc.bytes_pp} B per partition) needs {need} B per partition with the tensors already live, "
                f"but {self.target.name} has {usable} B usable per partition",
            )
        start = self._first_fit(sorted(self.sbuf_live.values()), alloc.bytes_pp, 0, usable)
        if start is None:
            raise NkiCapacityError(
                "err_sbuf_fragmented",
                f"SBUF overflow: no contiguous {alloc.bytes_pp} B per partition free for `{alloc.name}` "
                f"({self.sbuf_used} of {usable} B live, fragmented); allocate long-lived tiles first or reuse buffers",
            )
        alloc.address = start
        self.sbuf_live[alloc.uid] = (start, start + alloc.bytes_pp)
        self.sbuf_used = need
        self.sbuf_peak = max(self.sbuf_peak, need)
        weakref.finalize(alloc, self._free_sbuf, alloc.uid, alloc.bytes_pp)

    def _free_sbuf(self, uid: int, nbytes: int) -> None:
        self.sbuf_used -= nbytes
        self.sbuf_live.pop(uid, None)

    def _alloc_psum(self, alloc: Alloc, address: Any) -> None:
        bank = self.target.psum_bank_bytes
        total = self.target.psum_bytes
        size = alloc.bytes_pp
        if address is not None:
            start = int(address[1]) if isinstance(address, (tuple, list)) else int(address)
            if start % bank:
                raise NkiCapacityError(
                    "err_psum_bank_alignment",
                    f"PSUM tensor `{alloc.name}` at byte {start}: PSUM allocations must start at the beginning of a bank "
                    f"({bank} B boundary)",
                )
            if start + size > total:
                raise NkiCapacityError(
                    "err_psum_out_of_bound",
                    f"PSUM tensor `{alloc.name}` at byte {start} with {size} B per partition exceeds the {total} B of PSUM per partition",
                )
            alloc.address = start
            return
        live = sorted(self.psum_live.values())
        start = self._first_fit(live, size, bank, total)
        if start is None:
            used = sum(e - s for s, e in live)
            raise NkiCapacityError(
                "err_psum_capacity_exceeded",
                f"PSUM overflow: allocating `{alloc.name}` {list(alloc.shape)} {dt.dtype_name(alloc.dtype)} ({size} B per partition) "
                f"does not fit: {used} B of {total} B per partition ({self.target.psum_banks} banks of {bank} B) are live",
            )
        alloc.address = start
        self.psum_live[alloc.uid] = (start, start + size)
        weakref.finalize(alloc, self.psum_live.pop, alloc.uid, None)

    @staticmethod
    def _first_fit(live: list[tuple[int, int]], size: int, bank: int, total: int) -> int | None:
        """Lowest 4-byte-aligned start where ``size`` bytes fit between live ranges.

        With ``bank`` set (PSUM), tensors within a bank never cross it and larger ones are bank-aligned.
        """
        step = bank if bank and size > bank else 4
        cand = 0
        while cand + size <= total:
            if bank and size <= bank and cand // bank != (cand + size - 1) // bank:
                cand = (cand // bank + 1) * bank
                continue
            clash = next(((s, e) for s, e in live if s < cand + size and cand < e), None)
            if clash is None:
                return cand
            cand = -(-clash[1] // step) * step
        return None

    # -- loops and instructions ---------------------------------------------------------------
    @contextmanager
    def loop(self, kind: str) -> Iterator[list[Any]]:
        frame = [self.next_loop, kind, 0]
        self.next_loop += 1
        self.loops.append(frame)
        try:
            yield frame
        finally:
            self.loops.remove(frame)
