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
import warnings
import weakref
from typing import Any

import numpy as np

from . import dtypes as dt
from .dialect import MODERN, Dialect
from .errors import NkiCapacityError, NkiRuntimeError, NkiTypeError, NkiValidationError, NkiWarning, kernel_location
from .targets import Target
from .trace import Access, Trace

__all__ = [
    "BUFFERS",
    "Alloc",
    "Buffer",
    "KernelContext",
    "LazyCopy",
    "current",
    "hbm",
    "plain_ints",
    "private_hbm",
    "psum",
    "running",
    "sbuf",
    "shared_hbm",
]


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
        "__weakref__",
        "_buf",
        "acc_open",
        "address",
        "bytes_pp",
        "convert_once",
        "cover",
        "dtype",
        "f32c",
        "fill",
        "fresh",
        "is_input",
        "itemsize",
        "lazy",
        "memory",
        "metas",
        "name",
        "on_chip",
        "partitions",
        "pdim",
        "pending",
        "readers",
        "rec",
        "shape",
        "uid",
        "unit",
        "version",
        "written",
    )

    def __init__(self, uid: int, name: str, memory: str, dtype: np.dtype, shape: tuple[int, ...], pdim: int, compute: bool) -> None:
        self.uid = uid
        self.name = name
        self.metas: dict[tuple[Any, ...], Any] = {}  #: trace records of views of this storage, by geometry (ops._access)
        self.memory = memory
        self.on_chip = memory in ("sbuf", "psum")  #: SBUF or PSUM (a plain attribute: read on every view and access)
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
        # Fresh memory reads as NaN / 4 (see dtypes.uninitialized_value), but the fill is deferred
        # to the first access of ``data``: a tile whose first write covers all of it is never filled.
        self._buf: np.ndarray | None = np.empty(size, dtype=dt.storage_dtype(dtype)) if compute else None
        self.fresh = compute
        self.unit = 0  #: while fresh: elements per tracked unit of ``cover`` (0: nothing written yet)
        self.cover: np.ndarray | None = None  #: while fresh: which units direct stores have written
        #: while fresh: what unwritten elements read as — None for the uninitialized pattern, or the
        #: value (a storage-dtype scalar) of a whole-tile memset that is kept pending (see :meth:`refill`)
        self.fill: Any = None
        #: while fresh: DMAs into this storage that have not landed yet, in issue order (see :meth:`defer`)
        self.lazy: list[LazyCopy] | None = None
        #: storages with DMAs from this one still to land: they land before anything writes here
        self.readers: list[weakref.ref[Alloc]] | None = None
        self.address = 0
        self.acc_open: AccOpen | None = None  #: PSUM only: where matmuls would accumulate
        self.written = False
        self.is_input = False
        self.rec: OnChipRecord | None = None
        self.version = 0  #: bumped on every store, so derived caches know they are stale
        self.f32c: tuple[int, np.ndarray] | None = None  #: (version, fp32 copy of the storage) for low-precision SBUF
        #: low-precision float SBUF: engines read it through one fp32 copy per version (ops.f32)
        self.convert_once = memory == "sbuf" and dtype in dt.LOW_FLOATS
        self.pending = False  #: a deferred matmul group still has to land in this PSUM tensor (see ops.MatmulGroup)

    @property
    def data(self) -> np.ndarray | None:
        """The storage (``None`` in timing-only runs), holding the uninitialized-memory pattern where never written."""
        if self.fresh:
            self.settle()
        return self._buf

    @data.setter
    def data(self, buf: np.ndarray | None) -> None:
        self._buf = buf
        self.fresh = False
        self.cover = None

    @property
    def has_data(self) -> bool:
        """Whether numbers are kept at all (not in timing-only runs), without touching them."""
        return self._buf is not None

    def overwrite_all(self) -> None:
        """The caller writes every element before anything reads: skip the deferred fill (and DMAs still to land)."""
        self.fresh = False
        self.cover = None
        self.lazy = None

    def untouched(self) -> bool:
        """Nothing has stored into or read this storage yet, so no NumPy window onto it exists."""
        return self.fresh and self.version == 0 and self.cover is None

    def adopt(self, buf: np.ndarray) -> None:
        """Take ``buf`` (flat, in the storage dtype, every element) as the storage, instead of copying it in.

        Only for :meth:`untouched` storage: a window made onto the old array would go stale.
        The caller gives ``buf`` up; it counts as a store of every element.
        """
        self._buf = buf
        self.fresh = False
        self.cover = None
        self.version += 1

    def note_store(self, offset: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
        """Record a direct store of this geometry (in storage elements), keeping the fill deferred.

        Tiles are commonly filled by several slice writes (a DMA per row block or column
        stripe) before anything reads them. While every store covers whole units of ``unit``
        contiguous elements, a bitmap of units (1/unit the size of the data) records what was
        written, and the first read fills only the rest; a store that does not fit settles now.
        """
        if not self.fresh:
            return
        if self.unit == 0:
            g = math.gcd(shape[-1] if shape else 1, offset, self._buf.size, *strides[:-1])
            if g < self.MIN_UNIT:
                self.settle()
                return
            self.unit = g
            self.cover = np.zeros(self._buf.size // g, dtype=bool)
        units = self._units(offset, shape, strides)
        if units is None:
            self.settle()
            return
        units[...] = True

    def _units(self, offset: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray | None:
        """The ``cover`` bits of a geometry made of whole units, or ``None`` when it is not."""
        g = self.unit
        last = shape[-1] if shape else 1
        if (shape and strides[-1] != 1) or last % g or offset % g or any(s % g for s in strides[:-1]):
            return None
        return np.ndarray(
            shape[:-1] + (last // g,), bool, buffer=self.cover, offset=offset // g, strides=tuple(s // g for s in strides[:-1]) + (1,)
        )

    def unwritten(self, offset: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
        """While fresh: the value every element of this geometry reads as when no store has written
        any of them (the fill, see :attr:`fill`), else ``None``. Lets an engine read such a region
        as a constant without filling the storage."""
        if not self.fresh:
            return None
        if self.cover is not None:
            units = self._units(offset, shape, strides)
            if units is None or units.any():
                return None
        return self.fill if self.fill is not None else dt.storage_dtype(self.dtype).type(dt.uninitialized_value(self.dtype))

    def refill(self, value: Any) -> None:
        """Every element now holds ``value`` (a storage-dtype scalar): a memset of the whole storage.

        Nothing is written yet: the storage becomes fresh again with ``value`` as its fill, so an
        accumulator that is zeroed and then overwritten tile by tile is never zeroed in memory.
        """
        self.fresh = True
        self.cover = None
        self.unit = 0
        self.fill = value
        self.lazy = None
        self.version += 1

    def defer(self, copy: LazyCopy, source: Alloc) -> bool:
        """Take a DMA of ``source``'s numbers into this fresh storage as pending instead of copying now.

        Tiles loaded from HBM are mostly read only by matmuls, which can stack their operands
        straight from the DMA's source (:meth:`~nkiagent.emu.tensor.NkiTensor._source`): the
        copy then never happens. Anything else that reads or writes this storage lands it first
        (:meth:`land`), and a write to ``source`` lands it before changing the numbers it would
        copy. Returns ``False`` (copy now) when the destination is not made of whole tracked units;
        the caller records the write either way (``ops.mark_written``).
        """
        self.note_store(copy.offset, copy.shape, copy.strides)
        if not self.fresh:
            return False
        if self.lazy is None:
            self.lazy = []
        self.lazy.append(copy)
        if source.readers is None:
            source.readers = []
        source.readers.append(weakref.ref(self))
        return True

    def land(self) -> None:
        """Carry out the pending DMAs into this storage, in issue order."""
        lazy, self.lazy = self.lazy, None
        buf = self._buf
        isz = buf.itemsize
        for c in lazy or ():
            np.ndarray(c.shape, buf.dtype, buffer=buf, offset=c.offset * isz, strides=tuple(s * isz for s in c.strides))[...] = c.source

    def release(self) -> None:
        """This storage is about to change: DMAs from it that have not landed land now.

        Their destinations count as stored to (their version moves on) although their numbers
        do not change: arrays derived while they were pending may be views of this storage.
        """
        readers, self.readers = self.readers, None
        for ref in readers or ():
            reader = ref()
            if reader is not None and reader.lazy:
                reader.land()
                reader.version += 1

    #: Smallest tracked unit, in elements: finer stores settle at once (the bitmap would cost as much as the fill).
    MIN_UNIT = 32

    def settle(self) -> None:
        """Land pending DMAs and fill every element no store has written with the fill (the
        uninitialized pattern unless a memset is pending); tracking ends."""
        if self.lazy:
            self.land()
        self.fresh = False
        cover, self.cover = self.cover, None
        value = self.fill if self.fill is not None else dt.uninitialized_value(self.dtype)
        if cover is None:
            self._buf.fill(value)
        elif not cover.all():
            self._buf.reshape(-1, self.unit)[~cover] = value


class LazyCopy:
    """A DMA into on-chip storage that has not landed: where it writes and the numbers it copies.

    ``source`` is a NumPy view of the source storage (``origin``) in the destination's shape and dtype, and
    ``region`` the destination's box (:meth:`~nkiagent.emu.tensor.NkiTensor.region`), to tell
    quickly which reads it may concern. It holds no reference to the destination tensor.
    """

    __slots__ = ("offset", "order", "origin", "region", "shape", "source", "strides")

    def __init__(
        self, offset: int, shape: tuple[int, ...], strides: tuple[int, ...], region: Any, source: np.ndarray, origin: Alloc
    ) -> None:
        self.offset = offset
        self.shape = shape
        self.strides = strides
        self.region = region
        self.source = source
        self.origin = origin  #: the storage ``source`` views (its uid and version name the numbers)
        #: the dimensions from the largest stride down, to split an offset into coordinates; ``None``
        #: when a stride is not positive (then no view is taken to lie inside)
        self.order = tuple(sorted(range(len(shape)), key=lambda i: -strides[i])) if all(s > 0 for s in strides) else None

    def window(self, offset: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[slice, ...] | None:
        """Where a view of this geometry lies in the copy's destination (index into ``source``), or
        ``None`` unless it lies wholly inside and steps the same way."""
        order = self.order
        if strides != self.strides or order is None or len(shape) != len(self.shape):
            return None
        rel = offset - self.offset
        coords = [0] * len(shape)
        for i in order:
            coords[i], rel = divmod(rel, strides[i])
        if rel:
            return None
        where = []
        for c, m, n in zip(coords, shape, self.shape):
            if c < 0 or c + m > n:
                return None
            where.append(slice(c, c + m))
        return tuple(where)


class AccOpen:
    """Which elements of a PSUM tile a matmul would accumulate onto: its open accumulation group.

    Nearly always a whole tile opens (its first matmul) and closes (the copy out) at once, so
    that is one flag; a per-element mask is made only once parts of the tile differ.
    """

    __slots__ = ("mask", "size", "state")

    def __init__(self, size: int) -> None:
        self.size = size
        self.state: bool | None = False  #: every element closed / open; None: see ``mask``
        self.mask: np.ndarray | None = None

    def set(self, view: Any, value: bool) -> None:
        """Open (``True``) or close the elements ``view`` covers."""
        if self.state is not None and self.state == value:
            return
        if view.covers_storage():
            self.state, self.mask = value, None
            return
        if self.mask is None:
            self.mask = np.full(self.size, bool(self.state), dtype=bool)
            self.state = None
        view._geom(self.mask)[...] = value

    def query(self, view: Any, rows: int) -> bool | np.ndarray:
        """``True`` / ``False`` when all of ``view`` is open / closed, else its ``(rows, -1)`` mask (a copy)."""
        if self.state is not None:
            return self.state
        m = view._geom(self.mask).reshape(rows, -1)
        if m.all():
            return True
        if not m.any():
            return False
        return m.copy()


class OnChipRecord:
    """Lifetime facts of one SBUF/PSUM allocation, kept after the tensor itself is gone.

    ``first``/``last`` are the sequence numbers of the first and last instruction touching it
    (updated by :func:`~nkiagent.emu.ops.record`); the allocator pass uses them like a
    compiler's liveness analysis.
    """

    __slots__ = ("address", "bytes_pp", "dtype", "first", "last", "location", "manual", "memory", "name", "program", "shape", "uid")

    def __init__(self, alloc: Alloc, location: str, manual: bool, program: tuple[int, ...] = ()) -> None:
        self.program = program  #: the SPMD program that allocated it: only that program's instructions may touch it
        self.uid = alloc.uid
        self.memory = alloc.memory
        self.bytes_pp = alloc.bytes_pp
        self.first = -1
        self.last = -1
        self.name = alloc.name
        self.shape = alloc.shape
        self.dtype = alloc.dtype
        self.location = location
        self.address = alloc.address
        self.manual = manual

    def describe(self) -> str:
        return f"`{self.name}` {list(self.shape)} {dt.dtype_name(self.dtype)} ({self.bytes_pp} B/partition, {self.location})"


_PLAIN = {int}


def plain_ints(shape: tuple[Any, ...]) -> bool:
    """Every dimension is a plain ``int`` (no NumPy integers, bools or partition-dim markers): the everyday shape."""
    return set(map(type, shape)) == _PLAIN


_CURRENT: KernelContext | None = None


def current() -> KernelContext:
    """The running kernel's context, or the documented error when called outside a kernel."""
    if _CURRENT is None:
        raise NkiRuntimeError("err_nki_api_outside_of_nki_kernel", "Calling NKI API outside of NKI kernels is not supported.")
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
        #: the launch runs a plain entry function, which may launch ``kernel[grid](...)`` (frontend._launch_inline)
        self.host_launcher = False
        self.seq = 0
        self.next_uid = 1
        self.sbuf_peak = 0
        self.psum_peak = 0
        self.onchip: list[OnChipRecord] = []
        self.spilled: list[OnChipRecord] = []  #: 0.1 kernels only: tensors past SBUF/PSUM capacity, kept in HBM (see finish)
        self.mm_group: Any = None  #: consecutive matmuls accumulating into one PSUM tile, computed as one GEMM
        self.mm_wide: Any = None  #: the wide product held for later groups: see fast.matmul._product
        self.mm_wide_sites: dict[
            tuple[Any, ...], bool
        ] = {}  #: whether wide products of blocks from a source line paid off (fast.matmul._product)
        self.mm_wide_st: dict[
            tuple[Any, ...], np.ndarray
        ] = {}  #: stacked fp32 stationary blocks by where their numbers come from: see fast.matmul._wide_stationary
        #: operand checks passed, by view geometry (ops.check_compute_operand); they depend on the target, so per run
        self.checked: dict[tuple[Any, ...], set[Any]] = {}
        #: nc_matmul operand combinations that passed its rules, by operand shapes and dtypes and dst's check serial (isa.nc_matmul)
        self.matmuls_checked: dict[tuple[Any, ...], tuple[int, int, int, bool]] = {}
        self.mm_scratch: dict[str, np.ndarray] = {}  #: reusable fp32 work arrays of matmul groups (fast.matmul._scratch)
        self.loops: list[list[Any]] = []  # [uid, kind, iteration]
        #: the same as tuples, kept current by the loop iterators: what each trace record copies
        self.loops_now: tuple[tuple[int, str, int], ...] = ()
        #: Where a timing-only run (no data) read a value from a tensor into control flow or an address
        #: (a register load, a dynamic offset): it read 0, so its trace may not be the kernel's.
        self.data_reads: list[str] = []
        #: instructions that wrote into an input argument's storage
        self.input_writes = 0
        self.next_loop = 1
        self.shared: list[Alloc] = []  # shared_hbm allocations, in creation order, for SPMD sharing
        self.shared_cursor = 0
        self.outputs: list[Alloc] = []
        #: 0.1 kernels: the legacy front-end's per-run state and its check of every recorded write
        #: (``hook(ctx, op, engine, writes)``, called by :func:`~nkiagent.emu.ops.record` before recording).
        self.legacy: Any = None
        self.write_hook: Any = None
        self.fast = True  #: whether the fast paths run (nkiagent.emu.fast; run_kernel(fast=...) or NKIAGENT_EMU_FAST)
        self.dialect: Dialect = MODERN  #: what tensors do that differs by API generation (a 0.1 launch sets its own)
        #: True while ``t += x`` (or ``nl.loop_reduce``) runs: an associative update, not a loop-carried overwrite.
        self.accumulating = False
        #: reads of the registers whose values steered control flow so far (a dynamic loop bound, a
        #: ``while reg:``): every later instruction runs only once they are known (ops.record lists them)
        self.control: tuple[Access, ...] = ()
        #: the running launch's :class:`~nkiagent.emu.lnc.Scheduler` (its programs and their messages), while it runs
        self.lnc: Any = None
        self._next_pseudo = -1

    def pseudo_uid(self) -> int:
        """A fresh uid for a register (file): negative, so no allocation ever has it (see ``trace.pseudo_access``)."""
        uid = self._next_pseudo
        self._next_pseudo -= 1
        return uid

    # -- allocation ---------------------------------------------------------------------------
    def allocate(
        self, shape: tuple[int, ...], dtype: np.dtype, buffer: Buffer, name: str = "", address: Any = None, pdim: int = 0
    ) -> Alloc:
        """Allocate storage, enforcing rank, partition, SBUF capacity and PSUM bank rules."""
        mem = buffer.name
        if not (plain_ints(shape) and shape and min(shape) > 0):  # (the everyday case passes at once)
            if any((not isinstance(s, (int, np.integer))) or s < 0 for s in shape):
                raise NkiTypeError("err_invalid_shape", f"tensor shape {list(shape)} must be non-negative integers")
            if 0 in shape:
                raise NkiValidationError(
                    "err_invalid_shape", f"tensor `{name or 'tensor'}` of shape {list(shape)} has a zero-size dimension"
                )
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
        location = kernel_location()
        if mem in ("sbuf", "psum"):
            self._check_onchip(alloc, address)
            alloc.rec = OnChipRecord(alloc, location, address is not None, self.program_id)
            self.onchip.append(alloc.rec)
            if mem == "psum" and self.compute:
                alloc.acc_open = AccOpen(math.prod(shape))
        elif mem == "shared_hbm":
            self.shared.append(alloc)
            self.shared_cursor = len(self.shared)
        if self.trace is not None:
            self.trace.allocations.append(
                {
                    "uid": alloc.uid,
                    "name": alloc.name,
                    "memory": mem,
                    "shape": list(shape),
                    "dtype": dt.dtype_name(dtype),
                    "bytes_per_partition": alloc.bytes_pp,
                    "address": alloc.address,
                    "seq": self.seq,
                    "location": location,
                }
            )
        return alloc

    def _check_onchip(self, alloc: Alloc, address: Any) -> None:
        """Rules checkable at allocation time: one tensor larger than the memory, manual addresses."""
        t = self.target
        cap = t.sbuf_usable_bytes if alloc.memory == "sbuf" else t.psum_bytes
        mem = alloc.memory.upper()
        if address is not None:
            start = int(address[1]) if isinstance(address, (tuple, list)) else int(address)
            if alloc.memory == "psum" and start % t.psum_bank_bytes:
                raise NkiCapacityError(
                    "err_psum_bank_alignment",
                    f"PSUM tensor `{alloc.name}` at byte {start}: PSUM allocations must start at the beginning of a bank "
                    f"({t.psum_bank_bytes} B boundary)",
                )
            if start < 0 or start + alloc.bytes_pp > cap:
                raise NkiCapacityError(
                    f"err_{alloc.memory}_out_of_bound",
                    f"Allocated memory out of bound: `{alloc.name}` at byte {start} with {alloc.bytes_pp} B per partition "
                    f"exceeds the {cap} B of {mem} usable per partition on {t.name}",
                )
            alloc.address = start
            return
        if alloc.bytes_pp > cap:
            raise NkiCapacityError(
                f"err_{alloc.memory}_capacity_exceeded",
                f"{mem} overflow: `{alloc.name}` {list(alloc.shape)} {dt.dtype_name(alloc.dtype)} needs {alloc.bytes_pp} B per partition, "
                f"but {t.name} has {cap} B of {mem} per partition",
            )

    def finish(self) -> None:
        """The allocator pass, run when the kernel has finished (as the compiler's would, before code runs).

        A tensor occupies SBUF/PSUM from the first to the last instruction that touches it. The pass
        checks the peak of live bytes per partition against the target's capacity (raising the
        error at the allocation that overflows) and places every tensor at an address, next-fit so
        that consecutive loop iterations rotate through free space (multi-buffering) when it fits.
        The cost model tracks dependences through these addresses. 0.1 kernels are not rejected:
        their compiler spilled, so a tensor that does not fit is kept in HBM instead, flagged
        ``spilled`` in the trace's allocation record, with one warning per memory.
        """
        placed: dict[int, int] = {}
        for mem in ("sbuf", "psum"):
            recs = sorted((r for r in self.onchip if r.memory == mem and r.first >= 0 and not r.manual), key=lambda r: r.first)
            cap = self.target.sbuf_usable_bytes if mem == "sbuf" else self.target.psum_bytes
            bank = self.target.psum_bank_bytes if mem == "psum" else 0
            live: list[OnChipRecord] = []
            used = peak = 0
            cursor = 0
            for r in recs:
                still = [x for x in live if x.last >= r.first]
                used -= sum(x.bytes_pp for x in live if x.last < r.first)
                live = still
                used += r.bytes_pp
                if used > cap:
                    if self.api != "0.1":
                        self._overflow(mem, r, live, used, cap)
                    used -= r.bytes_pp  # the 0.1 compiler spills instead of rejecting: r lives in HBM,
                    r.address = placed[r.uid] = 2 * cap + sum(x.bytes_pp for x in self.spilled)  # apart from on-chip addresses
                    self.spilled.append(r)
                    continue
                peak = max(peak, used)
                spans = sorted((x.address, x.address + x.bytes_pp) for x in live)
                start = self._first_fit(spans, r.bytes_pp, bank, cap, cursor)
                if start is None:
                    start = self._first_fit(spans, r.bytes_pp, bank, cap, 0)
                if start is None:  # fragmented: the compiler would repack; keep dependences apart
                    start = cap + sum(x.bytes_pp for x in live)
                r.address = start
                placed[r.uid] = start
                cursor = start + r.bytes_pp
                live.append(r)
            if mem == "sbuf":
                self.sbuf_peak = peak
            else:
                self.psum_peak = peak
        if self.spilled:
            self._warn_spills()
        if self.trace is not None:
            spilled = {r.uid for r in self.spilled}
            for rec in self.trace.allocations:
                if rec["uid"] in placed:
                    rec["address"] = placed[rec["uid"]]
                if rec["uid"] in spilled:
                    rec["spilled"] = True  # kept in HBM: its traffic is DMA for the cost model to charge

    def _warn_spills(self) -> None:
        """One warning per memory naming what the 0.1 compiler would spill to HBM (and how much)."""
        for mem in ("sbuf", "psum"):
            recs = [r for r in self.spilled if r.memory == mem]
            if recs:
                total = sum(r.bytes_pp for r in recs)
                warnings.warn(
                    f"{mem.upper()} overflow on {self.target.name}: {len(recs)} tensor(s) spilled to HBM ({total} B per partition), "
                    f"first {recs[0].describe()}; the spill traffic costs DMA time",
                    NkiWarning,
                    stacklevel=2,
                )

    def _overflow(self, mem: str, r: OnChipRecord, live: list[OnChipRecord], used: int, cap: int) -> None:
        biggest = sorted(live, key=lambda x: -x.bytes_pp)[:3]
        others = "; ".join(x.describe() for x in biggest)
        what = "SBUF" if mem == "sbuf" else f"PSUM ({self.target.psum_banks} banks of {self.target.psum_bank_bytes} B)"
        raise NkiCapacityError(
            f"err_{mem}_capacity_exceeded",
            f"{mem.upper()} overflow: {r.describe()} is live together with {len(live)} other tensors, needing {used} B per partition, "
            f"but {self.target.name} has {cap} B of {what} per partition. Largest other live tensors: {others or 'none'}",
            r.location,
        )

    @staticmethod
    def _first_fit(live: list[tuple[int, int]], size: int, bank: int, total: int, start: int = 0) -> int | None:
        """Lowest 4-byte-aligned start ≥ ``start`` where ``size`` bytes fit between live ranges.

        With ``bank`` set (PSUM), tensors within a bank never cross it and larger ones are bank-aligned.
        """
        step = bank if bank and size > bank else 4
        cand = -(-start // step) * step
        while cand + size <= total:
            if bank and size <= bank and cand // bank != (cand + size - 1) // bank:
                cand = (cand // bank + 1) * bank
                continue
            clash = next(((s, e) for s, e in live if s < cand + size and cand < e), None)
            if clash is None:
                return cand
            cand = -(-clash[1] // step) * step
        return None
