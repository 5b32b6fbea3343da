"""``NkiTensor``: an opaque view of emulator memory.

A tensor is (allocation, shape, strides, offset, dtype), or for indirect accesses an
explicit array of element addresses. Views share storage. Kernel code can index,
reshape and pass tensors to NKI APIs, but cannot see their numbers: there is no
``__array__``, no buffer protocol, no data attribute, NumPy ufuncs refuse tiles, and
Python arithmetic dispatches to the same recorded ops as ``nl.add`` & co.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Self

import numpy as np

from . import dtypes as dt
from . import memory as _memory
from .dialect import MODERN, Dialect
from .errors import NkiOutOfBoundsError, NkiTypeError, NkiUnsupportedError, NkiValidationError
from .memory import BUFFERS, Alloc, Buffer
from .trace import Region

__all__ = ["DynSlice", "NkiTensor", "ds"]


def _legacy() -> bool:
    """True while a 0.1 (``neuronxcc.nki``) kernel runs (its errors word some cases as 0.1 did)."""
    ctx = _memory._CURRENT
    return ctx is not None and ctx.api == "0.1"


def _dialect() -> Dialect:
    """The running kernel's dialect (:mod:`.dialect`); outside a kernel, the 0.3+ one."""
    ctx = _memory._CURRENT
    return ctx.dialect if ctx is not None else MODERN


#: Set by :mod:`.ops`: lands a deferred matmul group before anyone reads its PSUM tensor.
flush_hook: Any = None


class DynSlice:
    """``nl.ds(start, size)``: the slice ``start : start + size``."""

    __slots__ = ("size", "start")

    def __init__(self, start: Any, size: int) -> None:
        self.start = start
        self.size = size

    def as_slice(self) -> slice:
        start, size = _index_int(self.start, "nl.ds start"), _index_int(self.size, "nl.ds size")
        if start < 0 or size < 0:
            raise NkiOutOfBoundsError(
                "err_tensor_access_out_of_bound", f"nl.ds(start={start}, size={size}): start and size must be non-negative"
            )
        return slice(start, start + size)

    def __repr__(self) -> str:
        return f"nl.ds({self.start}, {self.size})"


def _index_int(value: Any, what: str) -> int:
    """An integer index or slice bound (ints, NumPy integers, loop indices); anything else is an NkiTypeError."""
    try:
        return operator.index(value)
    except TypeError:
        raise NkiTypeError("err_invalid_index", f"{what} must be an integer, got {value!r}") from None


def ds(start: Any, size: int) -> DynSlice:
    """A slice of ``size`` elements starting at ``start`` (``nl.ds``)."""
    return DynSlice(start, size)


def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))


#: Where a simple index puts a view, ``(shape, strides, offset)``, by the indexed view's geometry
#: and the index (see :meth:`NkiTensor._simple_view`).
_SIMPLE_VIEWS: dict[tuple[Any, ...], tuple[tuple[int, ...], tuple[int, ...], int]] = {}
_SIMPLE_VIEWS_MAX = 65536


def _simple_geometry(
    shape: tuple[int, ...], strides: tuple[int, ...], offset: int, on_chip: bool, pdim: int, items: tuple[Any, ...]
) -> tuple[tuple[int, ...], tuple[int, ...], int] | None:
    """The geometry of the view an everyday index makes, from its key items (see
    :meth:`NkiTensor._simple_view`: an int, ``(slice, start, stop)`` or ``(DynSlice, start, size)``
    per dimension, all plain ints or None), or ``None`` when a bound is out of range."""
    new_shape: list[int] = []
    new_strides: list[int] = []
    dropped: list[int] = []
    for dim, item in enumerate(items):
        n = shape[dim]
        s = strides[dim]
        if type(item) is int:
            if not 0 <= item < n:
                return None
            offset += item * s
            if not on_chip or (dim != 0 and dim != pdim):
                dropped.append(len(new_shape))
            new_shape.append(1)
            new_strides.append(s)
            continue
        kind, start, stop = item
        if kind is slice:
            if start is None:
                start = 0
            if stop is None:
                stop = n
        else:
            stop += start
        if not 0 <= start <= stop <= n:
            return None
        offset += start * s
        new_shape.append(stop - start)
        new_strides.append(s)
    keep_min = 2 if on_chip else 0  # as in __getitem__: integer-indexed free dims drop, leaving on-chip tensors ≥ 2-D
    for pos in reversed(dropped):
        if len(new_shape) > keep_min:
            del new_shape[pos]
            del new_strides[pos]
    return tuple(new_shape), tuple(new_strides), offset


class NkiTensor:
    """A view of an allocation. See the module docstring for what it refuses to do."""

    __slots__ = (
        "__weakref__",
        "_a",
        "_addr",
        "_cv",
        "_dtype",
        "_ix",
        "_lg",
        "_meta",
        "_npv",
        "_offset",
        "_ok",
        "_rg",
        "_shape",
        "_sp",
        "_strides",
        "_valid",
        "_vc",
    )
    __array_ufunc__ = None  # NumPy ufuncs on tiles raise TypeError: no free host compute.
    __array_priority__ = 1000

    def __init__(
        self,
        alloc: Alloc,
        shape: tuple[int, ...],
        strides: tuple[int, ...] | None,
        offset: int,
        dtype: np.dtype,
        addr: np.ndarray | None = None,
        valid: np.ndarray | None = None,
    ) -> None:
        if type(alloc) is not Alloc:
            # Tensors wrap only the emulator's own storage: a look-alike object could carry host arrays
            # (free NumPy compute) or rewrite what the trace records.
            raise NkiTypeError("err_tensor_constructor", "NKI tensors are created by NKI APIs (nl.ndarray, nl.zeros, views …), not constructed directly")
        self._a = alloc
        self._shape = shape
        self._strides = strides
        self._offset = offset
        self._dtype = dtype
        self._addr = addr
        self._valid = valid
        self._npv: np.ndarray | None = None
        self._meta: dict[str, Any] | None = None  # trace records of this view by role (ops._access)
        self._ok: Any = None  # operand checks this view already passed (an ops.Checked)
        self._sp: tuple[int, int] | None = None
        self._rg: Region | None = None  # region() of a direct view (its geometry never changes)
        self._lg: Any = None  # 0.1 front-end facts: mask box of a result, index-grid dims, deferred bounds errors
        self._vc: dict[tuple[Any, ...], NkiTensor] | None = None  # views of this one by simple index (_simple_view)
        self._cv: bool | None = None  # covers_storage(), once asked (its geometry never changes)
        #: what an instruction reads to work out this view's addresses: ``(role, tile)`` for the index
        #: tile of a gather (``vector_offset``), a register ``Access`` for a dynamic offset. ops.record lists them.
        self._ix: tuple[Any, ...] | None = None

    @classmethod
    def _whole(cls, alloc: Alloc) -> NkiTensor:
        whole = cls(alloc, alloc.shape, _row_major(alloc.shape), 0, alloc.dtype)
        whole._cv = True
        return whole

    # -- public attributes (metadata only) -------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def buffer(self) -> Buffer:
        return BUFFERS[self._a.memory]

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return math.prod(self._shape)

    @property
    def name(self) -> str:
        return self._a.name

    @property
    def strides(self) -> tuple[int, ...]:
        return self._strides if self._strides is not None else ()

    @property
    def offset(self) -> int:
        return self._offset

    def __len__(self) -> int:
        return self._shape[0] if self._shape else 1

    def __repr__(self) -> str:
        return f"NkiTensor(name={self._a.name!r}, shape={self._shape}, dtype={dt.dtype_name(self._dtype)}, buffer={self._a.memory})"

    # -- opacity ----------------------------------------------------------------------------------
    def __bool__(self) -> bool:
        """0.1 refuses a tile in a condition; the current API evaluates it as Python does any object: true.

        NKI ≥ 0.2 traces kernels as Python, where ``if bias:`` asks whether an optional tensor
        argument was given (AWS's NKI Library writes it so for its optional inputs, and AWS's
        simulator runs it). The tensor's values are never read: ``if x > 0:`` is true whatever
        ``x`` holds, as it is on the device.
        """
        if _legacy():  # the 0.1 manual names the two cases separately
            if self.size == 1:
                raise NkiTypeError("err_dynamic_control_flow_not_supported", "dynamic control-flow depending on tensor value is not supported.")
            raise NkiTypeError("err_ambiguous_tensor_truth_value", "ValueError: Cannot evaluate truth value of a multi-element tensor/array.")
        return True

    def _no_host(self, *args: Any) -> Any:
        raise NkiTypeError(
            "err_dynamic_control_flow_not_supported",
            f"dynamic control-flow depending on tensor value is not supported. (`{self._a.name}` cannot be converted to a Python number)",
        )

    __float__ = __int__ = __index__ = __complex__ = _no_host

    def __iter__(self) -> Any:
        raise NkiTypeError("err_tensor_not_iterable", f"tensor `{self._a.name}` cannot be iterated on the host; index it or use an NKI loop")

    def __reduce__(self) -> Any:
        raise NkiTypeError("err_tensor_not_serializable", f"tensor `{self._a.name}` cannot be pickled or copied out of the kernel")

    __hash__ = object.__hash__

    def __getattr__(self, name: str) -> Any:
        """Only reached for names the class lacks: 0.1 tile methods (``broadcast_to``) while a 0.1 kernel runs."""
        method = _dialect().tile_method
        if method is not None and not name.startswith("_"):
            return method(self, name)
        raise AttributeError(f"'NkiTensor' object has no attribute '{name}'")

    # -- geometry ---------------------------------------------------------------------------------
    def _bpp_elems(self) -> int:
        """Elements (of this view's dtype) per partition row of the storage."""
        a = self._a
        return (a.bytes_pp // self._dtype_itemsize()) if a.on_chip else 0

    def _dtype_itemsize(self) -> int:
        return self._dtype.itemsize  # = its storage dtype's: tfloat32 (V4) is kept in float32

    def _storage_elems(self) -> int:
        return self._a.partitions * self._a.bytes_pp // self._dtype_itemsize()

    def _span(self) -> tuple[int, int]:
        """Lowest and highest element address touched (in this view's dtype units)."""
        sp = self._sp
        if sp is not None and self._valid is None:
            return sp
        sp = self._compute_span()
        self._sp = sp
        return sp

    def _compute_span(self) -> tuple[int, int]:
        if self._addr is not None:
            sel = self._addr if self._valid is None else self._addr[self._valid]
            if sel.size == 0:
                return 0, -1
            return int(sel.min()), int(sel.max())
        lo = hi = self._offset
        if 0 in self._shape:
            return self._offset, self._offset - 1
        for n, s in zip(self._shape, self._strides):
            if s >= 0:
                hi += s * (n - 1)
            else:
                lo += s * (n - 1)
        return lo, hi

    def region(self) -> Region:
        """A conservative box of the memory this view touches: rows × bytes within a row.

        On chip a row is a partition; in HBM a row is one run of the tensor's last dimension, so
        a 2-D tile of a large matrix is a tight box rather than the whole span between its corners.
        """
        rg = self._rg
        if rg is None:
            rg = self._region()
            if self._addr is None:
                self._rg = rg
        return rg

    def _region(self) -> Region:
        a = self._a
        isz = self._dtype.itemsize
        sp = self._sp
        lo, hi = sp if sp is not None and self._valid is None else self._span()
        if a.on_chip:
            row = a.bytes_pp // isz
        else:
            last = a.shape[-1] if a.shape else 1
            row = max(1, last * a.itemsize // isz)
        if hi < lo:
            return Region(a.uid, 0, -1, 0, 0)
        p_lo, p_hi = lo // row, hi // row
        if p_lo == p_hi or self._addr is not None:
            f_lo, f_hi = (lo % row, hi % row + 1) if p_lo == p_hi else (0, row)
        else:
            f_lo = f_hi = self._offset % row
            f_hi += 1
            for n, s in zip(self._shape, self._strides):
                if n <= 1 or s % row == 0:
                    continue
                if abs(s) * (n - 1) >= row:
                    f_lo, f_hi = 0, row
                    break
                if s > 0:
                    f_hi += s * (n - 1)
                else:
                    f_lo += s * (n - 1)
            if f_lo < 0 or f_hi > row:
                f_lo, f_hi = 0, row
        return Region(a.uid, p_lo, p_hi, f_lo * isz, f_hi * isz)

    def partition_start(self) -> int:
        if not self._a.on_chip:
            return 0
        return self._span()[0] // self._bpp_elems()

    def covers_storage(self) -> bool:
        """True when this direct view is every element of its storage, once each, in order."""
        cv = self._cv
        if cv is None:
            cv = self._cv = self._addr is None and self._offset == 0 and self.size == self._storage_elems() and self.is_contiguous()
        return cv

    def is_contiguous(self) -> bool:
        """True when the view is a dense row-major block (``NkiTensor.is_contiguous``)."""
        if self._strides is None:
            return False
        return all(s == r or n == 1 for n, s, r in zip(self._shape, self._strides, _row_major(self._shape)))

    def get_pattern(self) -> list[list[int]]:
        """``[[stride, count], ...]`` access pattern of this view."""
        if self._strides is None:
            raise NkiUnsupportedError("err_indirect_pattern", f"indirect view of `{self._a.name}` has no static access pattern")
        return [[s, n] for s, n in zip(self._strides, self._shape)]

    def is_indirect(self) -> bool:
        return self._addr is not None

    # -- host-side data access (emulator internals only) -----------------------------------------
    def _flat(self) -> np.ndarray:
        data = self._a.data
        sd = dt.storage_dtype(self._dtype)
        return data if data.dtype == sd else data.view(sd)

    def _np(self) -> np.ndarray:
        """A NumPy view (or gathered copy for indirect views) of the numbers. Emulator-only."""
        if self._a.pending:
            flush_hook()
        v = self._npv
        if v is not None:
            if self._a.fresh:
                self._a.settle()  # the view was made for a store: a read must see the fill
            return v
        flat = self._flat()
        if self._addr is not None:
            if self._valid is None:
                return flat[self._addr]
            out = np.zeros(self._shape, flat.dtype)
            out[self._valid] = flat[self._addr[self._valid]]
            return out
        return self._view_of(flat)

    def _source(self) -> tuple[np.ndarray, Alloc]:
        """The numbers, for a read that only copies them, and the storage they are a view of: a view
        that lies inside a DMA which has not landed yet (:meth:`~nkiagent.emu.memory.Alloc.defer`)
        reads the DMA's source instead."""
        lazy = self._a.lazy
        if lazy and self._addr is None and self._dtype == self._a.dtype:
            rg = self.region()
            for c in reversed(lazy):  # the latest DMA touching the view decides
                if c.region.overlaps(rg):
                    where = c.window(self._offset, self._shape, self._strides)
                    if where is not None:
                        return c.source[where], c.origin
                    break
        return self._np(), self._a

    def _view_of(self, flat: np.ndarray) -> np.ndarray:
        """The direct view's NumPy window onto ``flat`` (the storage in this view's dtype), kept for reuse."""
        isz = flat.itemsize
        v = np.ndarray(self._shape, flat.dtype, buffer=flat, offset=self._offset * isz, strides=tuple(s * isz for s in self._strides))
        self._npv = v
        return v

    def _geom(self, arr: np.ndarray) -> np.ndarray:
        """View ``arr`` (flat, same element count as storage) with this view's geometry."""
        if self._a.pending:
            flush_hook()
        if self._addr is not None:
            return arr[self._addr]
        isz = arr.itemsize
        return np.ndarray(self._shape, arr.dtype, buffer=arr, offset=self._offset * isz, strides=tuple(s * isz for s in self._strides))

    def _store(self, values: np.ndarray) -> None:
        """Write ``values`` (any float/int array broadcastable to the view) with storage rounding."""
        vals = values if (type(values) is np.ndarray and values.dtype == self._dtype) else dt.store_cast(np.asarray(values), self._dtype)
        a = self._a
        if a.pending:
            flush_hook()  # a deferred matmul group lands first, as for any access
        if a.readers:
            a.release()  # DMAs from here that have not landed copy the old numbers first
        a.version += 1
        if a.fresh and self._addr is None:
            self._claim()
        if self._addr is None:
            self._target()[...] = vals
        else:
            flat = self._flat()
            vals = np.broadcast_to(vals, self._shape)
            if self._valid is None:
                flat[self._addr] = vals
            else:
                flat[self._addr[self._valid]] = vals[self._valid]

    def _target(self) -> np.ndarray:
        """The direct view's window for a store that :meth:`_claim` has made room for: fresh
        storage is written as it is, without landing its fill first."""
        v = self._npv
        if v is not None:
            return v
        a = self._a
        return self._view_of(a._buf if a.fresh else self._flat())

    def _claim(self) -> None:
        """This direct view of fresh storage is about to be written in full: no fill goes there."""
        a = self._a
        if self.covers_storage():
            a.overwrite_all()  # this store covers every element: filling them first would be wasted
            return
        if a.lazy:
            a.land()  # (they come before this store)
        if self._dtype == a.dtype:
            a.note_store(self._offset, self._shape, self._strides)  # the fill waits for the first read
        else:
            a.settle()  # a reinterpreting view: fill now

    # -- views ------------------------------------------------------------------------------------
    def _view(self, shape: tuple[int, ...], strides: tuple[int, ...], offset: int, dtype: np.dtype | None = None) -> NkiTensor:
        view = NkiTensor(self._a, shape, strides, offset, dtype if dtype is not None else self._dtype)
        view._ix = self._ix  # a view of a dynamically placed view is placed by the same operands
        return view

    def _check_bounds(self, view: NkiTensor) -> NkiTensor:
        lo, hi = view._span()
        if hi >= lo and (lo < 0 or hi >= self._storage_elems()):
            raise NkiOutOfBoundsError(
                "err_tensor_access_out_of_bound",
                f"Out-of-bound access for tensor `{self._a.name}`: element range [{lo}, {hi}] exceeds its storage of {self._storage_elems()} elements",
            )
        return view

    def _simple_view(self, index: Any) -> NkiTensor | None:
        """The view for the everyday index — one in-bounds int, unit-step slice or ``nl.ds`` per
        dimension, outside 0.1 kernels — or ``None`` to take the general path below.

        Kernels index tiles in their innermost loops, so this is the emulator's hottest Python;
        anything unusual (negative or out-of-bounds bounds, steps, ellipsis, grids, NumPy ints)
        falls through to :meth:`__getitem__`'s full rules and their error texts.
        """
        if type(index) is not tuple:
            index = (index,)
        # Loops index the same tiles with the same indices again and again: hand back the view
        # made before (views are immutable values), with everything cached on it — checks passed,
        # trace records, NumPy window. The key holds plain ints and None only: anything else takes
        # the general path, so no other value can pass for an int in a lookup (True == 1, 1.0 == 1).
        parts = []  # (a loop in this frame: a comprehension would cost a frame of its own)
        for i in index:
            kind = type(i)
            if kind is int:
                parts.append(i)
            elif kind is slice:
                start, stop = i.start, i.stop
                if i.step is not None or not (start is None or type(start) is int) or not (stop is None or type(stop) is int):
                    return None
                parts.append((slice, start, stop))
            elif kind is DynSlice:
                start, size = i.start, i.size
                if type(start) is not int or type(size) is not int:
                    return None
                parts.append((DynSlice, start, size))
            else:
                return None
        key = tuple(parts)
        vc = self._vc
        if vc is not None:
            view = vc.get(key)
            if view is not None:
                return view
        shape = self._shape
        strides = self._strides
        if strides is None or len(index) != len(shape):
            return None
        ctx = _memory._CURRENT
        if ctx is not None and ctx.api == "0.1":
            return None
        a = self._a
        # A tensor met for the first time (a fresh tile per loop iteration) often has the geometry
        # of one met before: where the index puts a view depends only on that geometry.
        where = (shape, strides, self._offset, a.on_chip, a.pdim, key)
        found = _SIMPLE_VIEWS.get(where)
        if found is None:
            found = _simple_geometry(shape, strides, self._offset, a.on_chip, a.pdim, key)
            if found is None:
                return None
            if len(_SIMPLE_VIEWS) >= _SIMPLE_VIEWS_MAX:  # bounded: a long-lived process runs kernel after kernel
                _SIMPLE_VIEWS.clear()
            _SIMPLE_VIEWS[where] = found
        view = NkiTensor(a, found[0], found[1], found[2], self._dtype)
        view._ix = self._ix
        if vc is None:
            vc = self._vc = {}
        if len(vc) < self._VIEWS_KEPT:
            vc[key] = view
        return view

    #: Views remembered per tensor: a tile's loop indices, not every slice of a huge HBM tensor.
    _VIEWS_KEPT = 1024

    def __getitem__(self, index: Any) -> NkiTensor:
        view = self._simple_view(index)
        if view is not None:
            return view
        if self._strides is None:
            raise NkiUnsupportedError("err_nested_indirect", f"cannot index the indirect view of `{self._a.name}` again")
        if not isinstance(index, tuple):
            index = (index,)
        n_ell = n_real = 0
        grid: Any = None
        for i in index:
            if i is Ellipsis:
                n_ell += 1
            elif i is not None:
                n_real += 1
                if grid is None and getattr(i, "_nki_index_grid", False):
                    grid = i
        if grid is not None:
            return grid._nki_subscript(self, index)  # the grid's own front-end indexes with it
        special = _dialect().index
        if special is not None:
            view = special(self, index)
            if view is not None:
                return view
        if n_ell > 1:
            raise NkiTypeError("err_invalid_index", "an index can only have a single ellipsis ('...')")
        ndim = len(self._shape)
        if n_real > ndim:
            raise NkiTypeError("err_too_many_indices", f"too many indices for tensor `{self._a.name}` of {ndim} dimensions: {n_real} given")
        fill = [slice(None)] * (ndim - n_real)
        if n_ell:
            pos = next(k for k, i in enumerate(index) if i is Ellipsis)
            expanded: list[Any] = list(index[:pos]) + fill + list(index[pos + 1 :])
        else:
            expanded = list(index) + fill
        shape: list[int] = []
        strides: list[int] = []
        offset = self._offset
        on_chip = self._a.on_chip
        dim = 0
        int_dims: list[int] = []
        for item in expanded:
            if item is None:
                shape.append(1)
                strides.append(0)
                continue
            n, s = self._shape[dim], self._strides[dim]
            if isinstance(item, DynSlice):
                item = item.as_slice()
            if isinstance(item, slice):
                start, stop, step = self._slice_bounds(item, n, dim)
                count = max(0, -(-(stop - start) // step)) if step > 0 else max(0, -(-(start - stop) // -step))
                offset += start * s
                shape.append(count)
                strides.append(s * step)
            elif isinstance(item, (int, np.integer)) and not isinstance(item, bool):
                k = int(item)
                if k < 0:
                    k += n
                if not 0 <= k < n:
                    raise NkiOutOfBoundsError(
                        "err_tensor_access_out_of_bound",
                        f"Out-of-bound access for tensor `{self._a.name}` on dimension {dim}: index {int(item)} exceed dimension size of {n}",
                    )
                offset += k * s
                if on_chip and (dim == self._a.pdim or dim == 0):
                    shape.append(1)  # an integer on the partition dim keeps a size-1 dim
                    strides.append(s)
                else:
                    int_dims.append(len(shape))
                    shape.append(1)
                    strides.append(s)
            elif isinstance(item, NkiTensor):
                raise NkiUnsupportedError(
                    "err_tensor_index", f"indexing `{self._a.name}` with a tensor is not supported; use .ap(vector_offset=...) or nisa.dma_copy with an indirect view"
                )
            else:
                raise NkiTypeError("err_invalid_index", f"invalid index {item!r} for tensor `{self._a.name}` (use ints, slices, nl.ds or ...)")
            dim += 1
        # Integer-indexed free dims drop, unless that would leave an on-chip tensor below 2-D
        # (0.1 kernels load ``a[0:128, i]`` of an HBM matrix as a [128, 1] tile, so HBM keeps 2-D there too).
        keep_min = 2 if on_chip or (int_dims and _legacy()) else 0
        for pos in reversed(int_dims):
            if len(shape) > keep_min:
                del shape[pos]
                del strides[pos]
        # Every slice and integer was checked against its dimension above, so the view is in bounds.
        return self._view(tuple(shape), tuple(strides), offset)

    def _slice_bounds(self, item: slice, n: int, dim: int) -> tuple[int, int, int]:
        for bound in (item.start, item.stop, item.step):
            if bound is not None:
                _index_int(bound, f"slice bound in {item!r} for tensor `{self._a.name}`")
        step = 1 if item.step is None else int(item.step)
        if step == 0:
            raise NkiTypeError("err_invalid_index", "slice step cannot be zero")
        if step > 0:
            start = 0 if item.start is None else int(item.start)
            stop = n if item.stop is None else int(item.stop)
            if start < 0:
                start += n
            if stop < 0:
                stop += n
            if start < 0 or stop > n:
                raise NkiOutOfBoundsError(
                    "err_tensor_access_out_of_bound",
                    f"Out-of-bound access for tensor `{self._a.name}` on dimension {dim}: index range [{start}, {stop - 1}] exceed dimension size of {n}",
                )
            return start, max(start, stop), step
        start = n - 1 if item.start is None else int(item.start)
        stop = -1 if item.stop is None else int(item.stop)
        if item.start is not None and start < 0:
            start += n
        if item.stop is not None and stop < 0:
            stop += n
        if start >= n or stop < -1:
            raise NkiOutOfBoundsError(
                "err_tensor_access_out_of_bound",
                f"Out-of-bound access for tensor `{self._a.name}` on dimension {dim}: index range [{stop + 1}, {start}] exceed dimension size of {n}",
            )
        return start, min(start, stop), step

    def __setitem__(self, index: Any, value: Any) -> None:
        """``t[...] = value``: copy (with cast) or fill, recorded like ``tensor_copy`` / ``dma_copy`` / ``memset``."""
        from .ops import assign

        dst = self[index]
        if (
            isinstance(value, NkiTensor)
            and value._a is dst._a
            and value._addr is None
            and dst._addr is None
            and (value._shape, value._strides, value._offset, value._dtype) == (dst._shape, dst._strides, dst._offset, dst._dtype)
        ):
            return  # `t[i] += x` stores the in-place result back onto itself: there is nothing to copy
        special = _dialect().assign
        if special is not None:
            special(dst, value)
            return
        assign(dst, value)

    def reshape(self, shape: Any) -> NkiTensor:
        """View with a new shape; element count must match and no copy may be needed."""
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        if math.prod(shape) != self.size:
            raise NkiValidationError(
                "err_reshape_size", f"cannot reshape `{self._a.name}` of shape {list(self._shape)} ({self.size} elements) to {list(shape)}"
            )
        if self._strides is None:
            raise NkiUnsupportedError("err_indirect_reshape", f"cannot reshape the indirect view of `{self._a.name}`")
        probe = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape=self._shape, strides=self._strides)
        try:
            reshaped = np.reshape(probe, shape, copy=False)
        except ValueError:
            raise NkiValidationError(
                "err_reshape_not_view",
                f"cannot reshape `{self._a.name}` view {list(self._shape)} with strides {list(self._strides)} to {list(shape)} without a copy",
            ) from None
        return self._view(shape, tuple(reshaped.strides), self._offset)

    def _dim(self, dim: Any, method: str, extra: int = 0) -> int:
        """``dim`` of a ``ndim + extra``-D result as a non-negative index (negative counts from the end, as in NumPy)."""
        n = self.ndim + extra
        d = _index_int(dim, f"{method} dim")
        if not -n <= d < n:
            raise NkiValidationError("err_invalid_dim", f"{method}: dim {d} is out of range for `{self._a.name}` of shape {list(self._shape)}")
        return d + n if d < 0 else d

    def slice(self, dim: int, start: int, end: int, step: int = 1) -> NkiTensor:
        idx: list[Any] = [slice(None)] * self.ndim
        idx[self._dim(dim, "slice")] = slice(start, end, step)
        return self[tuple(idx)]

    def select(self, dim: int, index: Any) -> NkiTensor:
        """Pick one index of ``dim`` (dropping it); a tensor index is a per-partition gather."""
        if isinstance(index, NkiTensor):
            if dim != 0:
                raise NkiUnsupportedError("err_indirect_indices_free_dim", "indirect indexing is only supported on the partition (first) dimension")
            return self.ap(self.get_pattern(), offset=self._offset, vector_offset=index, indirect_dim=0)
        dim = self._dim(dim, "select")
        n = self._shape[dim]
        k = int(index) + (n if int(index) < 0 else 0)
        if not 0 <= k < n:
            raise NkiOutOfBoundsError(
                "err_tensor_access_out_of_bound", f"Out-of-bound access for tensor `{self._a.name}` on dimension {dim}: index {index} exceed dimension size of {n}"
            )
        shape = self._shape[:dim] + self._shape[dim + 1 :]
        strides = self._strides[:dim] + self._strides[dim + 1 :]
        return self._view(shape, strides, self._offset + k * self._strides[dim])

    def permute(self, dims: Any) -> NkiTensor:
        dims = tuple(dims)
        if sorted(dims) != list(range(self.ndim)):
            raise NkiTypeError("err_invalid_permute", f"permute dims {list(dims)} are not a permutation of {self.ndim} dims")
        return self._view(tuple(self._shape[d] for d in dims), tuple(self._strides[d] for d in dims), self._offset)

    def broadcast(self, dim: int, size: int) -> NkiTensor:
        dim = self._dim(dim, "broadcast")
        if _index_int(size, "broadcast size") < 1:
            raise NkiValidationError("err_broadcast_dim", f"broadcast size must be positive, got {size}")
        if self._shape[dim] != 1:
            raise NkiValidationError("err_broadcast_dim", f"can only broadcast a size-1 dim; dim {dim} of `{self._a.name}` has size {self._shape[dim]}")
        shape = list(self._shape)
        strides = list(self._strides)
        shape[dim], strides[dim] = int(size), 0
        return self._view(tuple(shape), tuple(strides), self._offset)

    def expand_dim(self, dim: int) -> NkiTensor:
        dim = self._dim(dim, "expand_dim", extra=1)
        return self._view(self._shape[:dim] + (1,) + self._shape[dim:], self._strides[:dim] + (0,) + self._strides[dim:], self._offset)

    def squeeze_dim(self, dim: int) -> NkiTensor:
        dim = self._dim(dim, "squeeze_dim")
        if self._shape[dim] != 1:
            raise NkiValidationError("err_squeeze_dim", f"cannot squeeze dim {dim} of size {self._shape[dim]} in `{self._a.name}`")
        return self._view(self._shape[:dim] + self._shape[dim + 1 :], self._strides[:dim] + self._strides[dim + 1 :], self._offset)

    def reshape_dim(self, dim: int, shape: Any) -> NkiTensor:
        dim = self._dim(dim, "reshape_dim")
        return self.reshape(self._shape[:dim] + tuple(shape) + self._shape[dim + 1 :])

    def flatten_dims(self, start: int, end: int) -> NkiTensor:
        start, end = self._dim(start, "flatten_dims"), self._dim(end, "flatten_dims")
        if start > end:
            raise NkiValidationError("err_invalid_dim", f"flatten_dims: start dim {start} is after end dim {end}")
        return self.reshape(self._shape[:start] + (math.prod(self._shape[start : end + 1]),) + self._shape[end + 1 :])

    def view(self, dtype: Any) -> NkiTensor:
        """Reinterpret the bits as ``dtype``; the last dim is rescaled by the itemsize ratio."""
        new = dt.as_dtype(dtype)
        old_sz, new_sz = self._dtype_itemsize(), dt.storage_dtype(new).itemsize
        if old_sz == new_sz:
            return self._view(self._shape, self._strides, self._offset, new)
        if self._strides is None or (self._shape and self._strides[-1] != 1):
            raise NkiValidationError("err_view_dtype", f"view({dt.dtype_name(new)}) needs a unit-stride last dim in `{self._a.name}`")
        last = self._shape[-1] * old_sz
        if last % new_sz or (self._offset * old_sz) % new_sz or any((s * old_sz) % new_sz for s in self._strides[:-1]):
            raise NkiValidationError(
                "err_view_dtype", f"view of `{self._a.name}` as {dt.dtype_name(new)}: byte layout is not a multiple of {new_sz} bytes"
            )
        shape = self._shape[:-1] + (last // new_sz,)
        strides = tuple(s * old_sz // new_sz for s in self._strides[:-1]) + (1,)
        return self._view(shape, strides, self._offset * old_sz // new_sz, new)

    def astype(self, dtype: Any) -> NkiTensor:
        """A new SBUF tile holding this tensor's values converted to ``dtype`` (a recorded copy)."""
        from .ops import convert

        return convert(self, dt.as_dtype(dtype))

    def ap(
        self,
        pattern: Any,
        offset: Any = 0,
        scalar_offset: Any = None,
        vector_offset: Any = None,
        indirect_dim: int = 0,
        dtype: Any = None,
    ) -> NkiTensor:
        """Explicit access pattern over the underlying storage (ignores the current view).

        Address = ``offset + scalar_offset * prod(self.shape[indirect_dim+1:]) + Σ stride·i``; with
        ``vector_offset`` (a ``(P,1)`` index tile) the indirect dim's index comes from the tile.
        """
        from .ops import read_scalar_index, read_vector_index

        view_dtype = dt.as_dtype(dtype) if dtype is not None else self._dtype
        try:
            pat = [(_index_int(s, "access pattern stride"), _index_int(n, "access pattern count")) for s, n in pattern]
        except (TypeError, ValueError):  # not a sequence of pairs
            raise NkiTypeError("err_invalid_pattern", f"access pattern must be a list of [stride, count] pairs, got {pattern!r}") from None
        if not pat:
            raise NkiTypeError("err_invalid_pattern", "access pattern must have at least one [stride, count] pair")
        base = self._a
        offset = _index_int(offset or 0, "access pattern offset")
        if base.on_chip and len(pat) > 0:
            row = self._storage_elems() // max(base.partitions, 1)
            if pat[0][1] > 1 and pat[0][0] != row:
                raise NkiValidationError(
                    "err_ap_partition_stride",
                    f"on {base.memory.upper()} the first pattern pair [{pat[0][0]}, {pat[0][1]}] of `{base.name}` must step partitions: "
                    f"its stride must equal the storage free size {row}",
                )
        # a step of the indirect dim is one row of the viewed tensor (not of its allocation, which a view may be a part of)
        inner = math.prod(self._shape[indirect_dim + 1 :]) if self._shape else 1
        ix: tuple[Any, ...] = ()
        if scalar_offset is not None:
            value, register = read_scalar_index(scalar_offset)
            offset += value * inner
            if register is not None:
                ix = (register,)
        shape = tuple(n for _, n in pat)
        strides = tuple(s for s, _ in pat)
        if vector_offset is None:
            view = self._check_bounds(NkiTensor(base, shape, strides, offset, view_dtype))
            view._ix = ix or None
            return view
        if not isinstance(vector_offset, NkiTensor):
            raise NkiTypeError("err_vector_offset", "vector_offset must be a (P, 1) integer tile in SBUF")
        if indirect_dim != 0:
            raise NkiUnsupportedError("err_indirect_indices_free_dim", "vector indirection only supports indirect_dim=0")
        if base.on_chip:
            raise NkiValidationError("err_indirect_memory", f"vector-indirect access needs an HBM tensor, but `{base.name}` is in {base.memory}")
        idx = read_vector_index(vector_offset, shape[0])
        grid = np.zeros(shape, dtype=np.int64)
        for k, (s, n) in enumerate(pat[1:], start=1):
            shp = [1] * len(shape)
            shp[k] = n
            grid = grid + (np.arange(n, dtype=np.int64) * s).reshape(shp)
        rows = idx.reshape((shape[0],) + (1,) * (len(shape) - 1)) * inner
        addr = offset + rows + grid
        view = NkiTensor(base, shape, None, offset, view_dtype, addr=addr)
        view._ix = (*ix, ("vector_offset", vector_offset))
        return view

    # -- arithmetic dispatches to recorded NKI ops -------------------------------------------------
    def _bin(self, name: str, other: Any, reverse: bool = False) -> Any:
        fn = getattr(_ops_module(), name)
        return fn(other, self) if reverse else fn(self, other)

    def __add__(self, o: Any) -> Any: return self._bin("add", o)
    def __radd__(self, o: Any) -> Any: return self._bin("add", o, True)
    def __sub__(self, o: Any) -> Any: return self._bin("subtract", o)
    def __rsub__(self, o: Any) -> Any: return self._bin("subtract", o, True)
    def __mul__(self, o: Any) -> Any: return self._bin("multiply", o)
    def __rmul__(self, o: Any) -> Any: return self._bin("multiply", o, True)
    def __truediv__(self, o: Any) -> Any: return self._bin("divide", o)
    def __rtruediv__(self, o: Any) -> Any: return self._bin("divide", o, True)
    def __pow__(self, o: Any) -> Any: return self._bin("power", o)
    def __rpow__(self, o: Any) -> Any: return self._bin("power", o, True)
    def __mod__(self, o: Any) -> Any: return self._bin("mod", o)
    def __rmod__(self, o: Any) -> Any: return self._bin("mod", o, True)
    def __and__(self, o: Any) -> Any: return self._bin("bitwise_and", o)
    def __rand__(self, o: Any) -> Any: return self._bin("bitwise_and", o, True)
    def __or__(self, o: Any) -> Any: return self._bin("bitwise_or", o)
    def __ror__(self, o: Any) -> Any: return self._bin("bitwise_or", o, True)
    def __xor__(self, o: Any) -> Any: return self._bin("bitwise_xor", o)
    def __rxor__(self, o: Any) -> Any: return self._bin("bitwise_xor", o, True)
    def __lshift__(self, o: Any) -> Any: return self._bin("left_shift", o)
    def __rlshift__(self, o: Any) -> Any: return self._bin("left_shift", o, True)
    def __rshift__(self, o: Any) -> Any: return self._bin("right_shift", o)
    def __rrshift__(self, o: Any) -> Any: return self._bin("right_shift", o, True)
    def __lt__(self, o: Any) -> Any: return self._bin("less", o)
    def __le__(self, o: Any) -> Any: return self._bin("less_equal", o)
    def __gt__(self, o: Any) -> Any: return self._bin("greater", o)
    def __ge__(self, o: Any) -> Any: return self._bin("greater_equal", o)
    # ``t == None`` / ``t != None`` are Python's identity questions (is the optional tensor given?), not element-wise ops
    def __eq__(self, o: object) -> Any: return False if o is None else self._bin("equal", o)  # type: ignore[override]
    def __ne__(self, o: object) -> Any: return True if o is None else self._bin("not_equal", o)  # type: ignore[override]
    def __neg__(self) -> Any: return _unary("negative", self)
    def __abs__(self) -> Any: return _unary("abs", self)
    def __invert__(self) -> Any: return _unary("invert", self)

    def __iadd__(self, o: Any) -> Self:
        from .ops import accumulate_into

        accumulate_into(self, o, "add")
        return self

    def __isub__(self, o: Any) -> Self:
        from .ops import accumulate_into

        accumulate_into(self, o, "subtract")
        return self

    def __imul__(self, o: Any) -> Self:
        from .ops import accumulate_into

        accumulate_into(self, o, "multiply")
        return self


def _ops_module() -> Any:
    """The ``nl`` module tile operators dispatch to: the 0.1 one while a 0.1 kernel runs."""
    ops = _dialect().ops
    if ops is not None:
        return ops
    from . import language as nl

    return nl


def _unary(name: str, x: NkiTensor) -> Any:
    return getattr(_ops_module(), name)(x)
