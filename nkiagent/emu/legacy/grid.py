"""NKI 0.1 index grids (``nl.arange``, ``nl.mgrid``), masks, and indexing a tensor with them.

In 0.1 kernels a tile is addressed with index expressions: ``x[i_p, 512 * j + i_f]`` where
``i_p = nl.arange(128)[:, None]`` and ``i_f = nl.arange(512)[None, :]``. Such an expression is
an :class:`IndexGrid`: an integer array over a small grid of positions, kept symbolically as
``const + Σ coef[d]·k[d]`` (``k[d] < size[d]``) while it stays affine, so that indexing a
tensor with affine grids gives an ordinary strided view (the cost model sees the same access
patterns as a slice would give). Non-affine expressions (``i // 2``) keep their values and
index through explicit element addresses.

Comparisons of grids are :class:`Predicate` objects, combined with ``&``; passed as
``mask=``, they must select a sub-rectangle of the instruction's iteration space (one index
position per comparison), which :func:`mask_box` computes. Instructions then run on the
operands restricted to that box (:func:`restrict`), and a result tile remembers the box it
holds (:class:`TileMeta`), so that ``dst[...] = result`` leaves the rest of ``dst`` untouched.
Index ranges that leave the tensor are errors only when an instruction touches them outside
its mask, so the view records them (``TileMeta.oob``) instead of failing at once.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import NkiOutOfBoundsError, NkiTypeError, NkiUnsupportedError, NkiValidationError
from ..tensor import DynSlice, NkiTensor

__all__ = ["Box", "IndexGrid", "MGrid", "Predicate", "TileMeta", "arange", "index_hook", "is_empty", "mask_box", "mask_terms", "restrict", "same_dims", "slice_hook"]

#: Per dimension of an iteration space, the half-open range ``(lo, hi)`` an instruction runs on.
Box = tuple[tuple[int, int], ...]

_CMP = {
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "equal": np.equal,
    "not_equal": np.not_equal,
}
_next_var = itertools.count(1)


def _arange_error() -> NkiTypeError:
    return NkiTypeError(
        "err_control_flow_condition_depending_on_arange", "Control-flow depending on `nl.arange` or `nl.mgrid` is not supported"
    )


def _mask_error(detail: str) -> NkiValidationError:
    return NkiValidationError(
        "err_unsupported_expression_in_mask", f"NKI mask expressions must be affine expressions of static loop indices: {detail}"
    )


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


class IndexGrid:
    """An index expression over a grid of positions (what ``nl.arange(n)[:, None] + 4`` evaluates to).

    Affine grids hold ``const``, ``coef`` and ``size`` (one entry per position); ``values`` holds
    the explicit integer array (of shape ``size``) once an operation made the expression
    non-affine. ``vars`` names, per position, the ``nl.arange``/``nl.mgrid`` calls the
    expression varies with (matmul operand masks use it to find which operand a mask refers to).
    """

    __slots__ = ("coef", "const", "size", "values", "vars")
    _nki_index_grid = True  # NkiTensor.__getitem__ routes subscripts holding one to _nki_subscript
    __array_ufunc__ = None  # numpy scalars on the left defer to our reflected operators

    @staticmethod
    def _nki_subscript(t: NkiTensor, index: tuple[Any, ...]) -> NkiTensor:
        """``t[index]`` for an index holding grids (:func:`index_hook`): the grid brings its indexing along."""
        return index_hook(t, index)

    def __init__(
        self, const: int, coef: tuple[int, ...], size: tuple[int, ...], vars: tuple[frozenset[int], ...], values: np.ndarray | None = None
    ) -> None:
        self.const = const
        self.coef = coef
        self.size = size
        self.vars = vars
        self.values = values

    @property
    def rank(self) -> int:
        return len(self.size)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.size

    @property
    def affine(self) -> bool:
        return self.values is None

    def array(self) -> np.ndarray:
        """The index values as an int64 array of shape ``size``."""
        if self.values is not None:
            return self.values
        out = np.full(self.size, self.const, dtype=np.int64)
        for d, (c, n) in enumerate(zip(self.coef, self.size)):
            if c:
                shp = [1] * self.rank
                shp[d] = n
                out += (np.arange(n, dtype=np.int64) * c).reshape(shp)
        return out

    def varying(self) -> list[int]:
        """Positions along which the value changes."""
        if self.values is None:
            return [d for d, (c, n) in enumerate(zip(self.coef, self.size)) if c and n > 1]
        v = self.values
        return [d for d in range(self.rank) if v.shape[d] > 1 and np.ptp(v, axis=d).any()]

    def bounds(self) -> tuple[int, int]:
        """Smallest and largest value."""
        if self.values is not None:
            return int(self.values.min()), int(self.values.max())
        lo = hi = self.const
        for c, n in zip(self.coef, self.size):
            lo += min(0, c * (n - 1))
            hi += max(0, c * (n - 1))
        return lo, hi

    def padded(self, rank: int) -> IndexGrid:
        """The same expression with leading size-1 positions up to ``rank`` (NumPy broadcasting)."""
        extra = rank - self.rank
        if extra <= 0:
            return self
        values = None if self.values is None else self.values.reshape((1,) * extra + self.values.shape)
        return IndexGrid(self.const, (0,) * extra + self.coef, (1,) * extra + self.size, (frozenset(),) * extra + self.vars, values)

    # -- arithmetic -----------------------------------------------------------------------------
    def _combine(self, other: IndexGrid, scale: int) -> IndexGrid:
        """``self + scale * other`` with NumPy broadcasting of the two grids."""
        rank = max(self.rank, other.rank)
        a, b = self.padded(rank), other.padded(rank)
        size = tuple(_broadcast(x, y) for x, y in zip(a.size, b.size))
        vars_ = tuple(x | y for x, y in zip(a.vars, b.vars))
        if a.affine and b.affine:
            return IndexGrid(a.const + scale * b.const, tuple(x + scale * y for x, y in zip(a.coef, b.coef)), size, vars_)
        return IndexGrid(0, (0,) * rank, size, vars_, np.broadcast_to(a.array() + scale * b.array(), size))

    def _scaled(self, factor: int) -> IndexGrid:
        if self.values is not None:
            return IndexGrid(0, self.coef, self.size, self.vars, self.values * factor)
        return IndexGrid(self.const * factor, tuple(c * factor for c in self.coef), self.size, self.vars)

    def _explicit(self, values: np.ndarray) -> IndexGrid:
        return IndexGrid(0, (0,) * self.rank, self.size, self.vars, np.broadcast_to(values, self.size))

    def __add__(self, other: Any) -> IndexGrid:
        if isinstance(other, IndexGrid):
            return self._combine(other, 1)
        if _is_int(other):
            if self.values is not None:
                return self._explicit(self.values + int(other))
            return IndexGrid(self.const + int(other), self.coef, self.size, self.vars)
        return NotImplemented

    __radd__ = __add__

    def __sub__(self, other: Any) -> IndexGrid:
        if isinstance(other, IndexGrid):
            return self._combine(other, -1)
        if _is_int(other):
            return self + (-int(other))
        return NotImplemented

    def __rsub__(self, other: Any) -> IndexGrid:
        if _is_int(other):
            return self._scaled(-1) + int(other)
        return NotImplemented

    def __neg__(self) -> IndexGrid:
        return self._scaled(-1)

    def __pos__(self) -> IndexGrid:
        return self

    def __mul__(self, other: Any) -> IndexGrid:
        if _is_int(other):
            return self._scaled(int(other))
        if isinstance(other, IndexGrid):  # a product of two indices is no longer affine
            rank = max(self.rank, other.rank)
            a, b = self.padded(rank), other.padded(rank)
            size = tuple(_broadcast(x, y) for x, y in zip(a.size, b.size))
            return IndexGrid(0, (0,) * rank, size, tuple(x | y for x, y in zip(a.vars, b.vars)), np.broadcast_to(a.array() * b.array(), size))
        return NotImplemented

    __rmul__ = __mul__

    def __floordiv__(self, other: Any) -> IndexGrid:
        if not _is_int(other):
            return NotImplemented
        return self._explicit(self.array() // int(other))

    def __mod__(self, other: Any) -> IndexGrid:
        if not _is_int(other):
            return NotImplemented
        return self._explicit(self.array() % int(other))

    # -- comparisons make masks -------------------------------------------------------------
    def _compare(self, other: Any, name: str) -> Predicate:
        if isinstance(other, IndexGrid):
            return Predicate(((self - other, name),))
        if isinstance(other, (int, float, np.integer, np.floating)) and not isinstance(other, bool):
            if _is_int(other):
                return Predicate(((self - int(other), name),))
            return Predicate(((self, name, float(other)),))
        return NotImplemented  # type: ignore[return-value]

    def __lt__(self, other: Any) -> Predicate:
        return self._compare(other, "less")

    def __le__(self, other: Any) -> Predicate:
        return self._compare(other, "less_equal")

    def __gt__(self, other: Any) -> Predicate:
        return self._compare(other, "greater")

    def __ge__(self, other: Any) -> Predicate:
        return self._compare(other, "greater_equal")

    def __eq__(self, other: object) -> Predicate:  # type: ignore[override]
        return self._compare(other, "equal")

    def __ne__(self, other: object) -> Predicate:  # type: ignore[override]
        return self._compare(other, "not_equal")

    __hash__ = object.__hash__

    # -- shape manipulation ----------------------------------------------------------------
    def __getitem__(self, key: Any) -> IndexGrid:
        """``g[:, None]``: keep the existing positions (``:``) and insert size-1 ones (``None``)."""
        key = key if isinstance(key, tuple) else (key,)
        kept = [k for k in key if k is not None]
        if len(kept) != self.rank or any(not (isinstance(k, slice) and k == slice(None)) for k in kept):
            raise NkiTypeError(
                "err_invalid_index", f"an index expression of {self.rank} dims can only be expanded with ':' and None, got {key!r}"
            )
        src = iter(range(self.rank))
        pos = [None if k is None else next(src) for k in key]
        coef = tuple(0 if d is None else self.coef[d] for d in pos)
        size = tuple(1 if d is None else self.size[d] for d in pos)
        vars_ = tuple(frozenset() if d is None else self.vars[d] for d in pos)
        values = None if self.values is None else self.values.reshape(size)
        return IndexGrid(self.const, coef, size, vars_, values)

    def __setitem__(self, key: Any, value: Any) -> None:
        raise NkiTypeError("err_cannot_assign_to_index", "'index' tensor does not support item assignment")

    def __bool__(self) -> bool:
        raise _arange_error()

    def __index__(self) -> int:
        raise _arange_error()

    __int__ = __index__

    def __repr__(self) -> str:
        if self.values is not None:
            return f"IndexGrid(shape={self.size}, explicit)"
        terms = " + ".join(f"{c}*k{d}" for d, c in enumerate(self.coef) if c)
        return f"IndexGrid({self.const}{' + ' + terms if terms else ''}, shape={self.size})"


def _broadcast(a: int, b: int) -> int:
    if a == b or b == 1:
        return a
    if a == 1:
        return b
    raise NkiValidationError("err_index_shape_mismatch", f"index expressions of sizes {a} and {b} cannot be combined in one position")


class Predicate:
    """A conjunction of affine comparisons ``expr <cmp> bound`` (what ``i_p < n`` evaluates to)."""

    __slots__ = ("terms",)

    def __init__(self, terms: tuple[tuple[Any, ...], ...]) -> None:
        self.terms = terms  # (expr, cmp) meaning expr <cmp> 0, or (expr, cmp, bound) for a float bound

    def __and__(self, other: Any) -> Any:
        if isinstance(other, Predicate):
            return Predicate(self.terms + other.terms)
        if isinstance(other, (bool, np.bool_)):
            return self if other else False
        return NotImplemented

    __rand__ = __and__

    def _unsupported(self, *args: Any) -> Any:
        raise _mask_error("masks combine comparisons with '&' only ('|' and '~' do not select a sub-rectangle)")

    __or__ = __ror__ = __invert__ = _unsupported

    def __bool__(self) -> bool:
        raise _arange_error()

    def term(self, k: int) -> tuple[IndexGrid, str, float]:
        t = self.terms[k]
        return t[0], t[1], (t[2] if len(t) == 3 else 0)

    def __repr__(self) -> str:
        return f"Predicate({len(self.terms)} comparisons)"


def arange(*args: Any) -> IndexGrid:
    """``nl.arange(stop)`` / ``nl.arange(start, stop[, step])``: a 1-D index; expand it with ``[:, None]`` / ``[None, :]``."""
    if not 1 <= len(args) <= 3 or not all(_is_int(a) for a in args):
        raise NkiTypeError("err_invalid_arange", f"nl.arange takes 1 to 3 integers (stop, or start, stop[, step]), got {args!r}")
    r = range(*(int(a) for a in args))
    if len(r) == 0:
        raise NkiValidationError("err_invalid_arange", f"nl.arange{args!r} is empty")
    return IndexGrid(r.start, (r.step,), (len(r),), (frozenset({next(_next_var)}),))


class MGridResult(tuple):  # type: ignore[type-arg]
    """The grids of ``nl.mgrid[...]``, one per dimension: ``.p``, ``.x``, ``.y``, ``.z`` name the first four."""

    @property
    def p(self) -> IndexGrid:
        return self[0]

    @property
    def x(self) -> IndexGrid:
        return self[1]

    @property
    def y(self) -> IndexGrid:
        return self[2]

    @property
    def z(self) -> IndexGrid:
        return self[3]


class MGrid:
    """``nl.mgrid[0:128, 0:512]``: a dense mesh (like NumPy's), one full-shape grid per slice."""

    def __getitem__(self, key: Any) -> MGridResult:
        key = key if isinstance(key, tuple) else (key,)
        ranges = []
        for k in key:
            if not isinstance(k, slice) or k.stop is None or not all(v is None or _is_int(v) for v in (k.start, k.stop, k.step)):
                raise NkiTypeError("err_invalid_mgrid", f"nl.mgrid takes integer slices such as 0:128, got {k!r}")
            r = range(0 if k.start is None else int(k.start), int(k.stop), 1 if k.step is None else int(k.step))
            if len(r) == 0:
                raise NkiValidationError("err_invalid_mgrid", f"nl.mgrid slice {k!r} is empty")
            ranges.append(r)
        size = tuple(len(r) for r in ranges)
        grids = []
        for d, r in enumerate(ranges):
            coef = tuple(r.step if e == d else 0 for e in range(len(ranges)))
            vars_ = tuple(frozenset({next(_next_var)}) if e == d else frozenset() for e in range(len(ranges)))
            grids.append(IndexGrid(r.start, coef, size, vars_))
        return MGridResult(grids)

    def __repr__(self) -> str:
        return "nl.mgrid"


# --------------------------------------------------------------------------------------------
# Tensor views from grids
# --------------------------------------------------------------------------------------------
class TileMeta:
    """What the 0.1 front-end knows about a view beyond its geometry.

    * ``box``: for an instruction result computed under a mask, the part it holds;
    * ``temp``: the tile is an instruction's freshly allocated result (so assigning it may make
      that instruction write the target directly, as the compiler does);
    * ``vars``: per view dim, the ``nl.arange`` calls that index it;
    * ``oob``: deferred out-of-bounds facts ``(dim, size, const, coefs)`` of index expressions,
      an error only where an instruction touches them unmasked.
    """

    __slots__ = ("box", "oob", "temp", "vars")

    def __init__(self, box: Box | None = None, temp: bool = False, vars: tuple[frozenset[int], ...] = (), oob: tuple[Any, ...] = ()) -> None:
        self.box = box
        self.temp = temp
        self.vars = vars
        self.oob = oob


def index_hook(t: NkiTensor, index: tuple[Any, ...]) -> NkiTensor:
    """``t[i_p, 512 * j + i_f]``: NumPy advanced indexing with index grids and integers.

    The result has the broadcast shape of the grids (integers drop their dims); affine grids
    give a strided view, others an explicit-address view.
    """
    name = t.name
    if t._strides is None:
        raise NkiUnsupportedError("err_nested_indirect", f"cannot index the indirect view of `{name}` again")
    gathered: dict[int, np.ndarray] = {}
    tiles = tuple(("vector_offset", i) for i in index if isinstance(i, NkiTensor))
    if tiles:
        index, gathered = _gather_index(t, index)
    grids = [i for i in index if isinstance(i, IndexGrid)]
    if any(g.rank == 1 for g in grids):
        raise NkiValidationError("err_1d_arange_not_supported", f"indexing tensor `{name}` with 1d arange is not supported")
    if any(i is Ellipsis or i is None or isinstance(i, (slice, DynSlice)) for i in index):
        raise NkiValidationError(
            "err_unsupported_mixing_basic_advanced_tensor_indexing",
            "Mixing basic tensor indexing and advanced tensor indexing is not supported.",
        )
    if len(index) > t.ndim:
        raise NkiTypeError("err_too_many_indices", f"too many indices for tensor `{name}` of {t.ndim} dimensions: {len(index)} given")
    rank = max(g.rank for g in grids)
    padded = [i.padded(rank) if isinstance(i, IndexGrid) else i for i in index]
    shape = [1] * rank
    for g in padded:
        if isinstance(g, IndexGrid):
            shape = [_broadcast(a, b) for a, b in zip(shape, g.size)]
    strides = [0] * rank
    offset = t._offset
    oob: list[tuple[int, int, int, tuple[int, ...]]] = []
    explicit = not all(g.affine for g in grids)
    addr = np.zeros(shape, dtype=np.int64) if explicit else None
    for k, item in enumerate(padded):
        n, s = t.shape[k], t._strides[k]
        if isinstance(item, IndexGrid):
            lo, hi = item.bounds()
            if lo < 0 or hi >= n:
                if explicit:
                    raise _oob(name, k, lo, hi, n)
                oob.append((k, n, item.const, item.coef))
            if explicit:
                addr += item.array() * s
            else:
                offset += s * item.const
                for d, c in enumerate(item.coef):
                    strides[d] += s * c
        else:
            if isinstance(item, NkiTensor):
                raise NkiUnsupportedError(
                    "err_tensor_index", f"indexing `{name}` with a tensor is not supported by the emulator; use nisa.dma_copy with an indirect view"
                )
            try:
                i = operator.index(item)
            except TypeError:
                raise NkiTypeError("err_invalid_index", f"invalid index {item!r} for tensor `{name}` (use ints, nl.arange or nl.mgrid)") from None
            if not 0 <= i < n:
                raise NkiOutOfBoundsError(
                    "err_tensor_access_out_of_bound", f"Out-of-bound access for tensor `{name}` on dimension {k}: index {i} exceed dimension size of {n}"
                )
            offset += i * s
    rest_shape, rest_strides = t.shape[len(index):], t._strides[len(index):]
    vars_ = [frozenset().union(*(g.vars[d] for g in padded if isinstance(g, IndexGrid))) for d in range(rank)]
    vars_ += [frozenset()] * len(rest_shape)
    if explicit:
        base = np.asarray(addr) + offset
        for n, s in zip(rest_shape, rest_strides):
            base = base[..., None] + np.arange(n, dtype=np.int64) * s
        view = NkiTensor(t._a, tuple(shape) + rest_shape, None, offset, t._dtype, addr=base)
    else:
        view = NkiTensor(t._a, tuple(shape) + rest_shape, tuple(strides) + rest_strides, offset, t._dtype)
    deferred: list[tuple[Any, ...]] = [(k, n, c, coef + (0,) * len(rest_shape)) for k, n, c, coef in oob]
    deferred += [(k, t.shape[k], np.broadcast_to(v.reshape((1,) * (rank - v.ndim) + v.shape), tuple(shape)), None) for k, v in gathered.items()]
    view._lg = TileMeta(vars=tuple(vars_), oob=tuple(deferred))
    view._ix = (*(t._ix or ()), *tiles) or None  # the DMA gathering through this view reads the index tile
    return view


def _gather_index(t: NkiTensor, index: tuple[Any, ...]) -> tuple[tuple[Any, ...], dict[int, np.ndarray]]:
    """``hbm[b, idx_tile, i_f]``: a ``(P, 1)`` SBUF tile of row indices (a DMA gather) as an explicit index grid.

    Indices outside the dimension are clamped for addressing and checked under the
    instruction's mask (``restrict``): rows a mask leaves out may hold any value, as in
    nki-samples' resize_nearest, whose ragged last tile computes indices past the image.
    """
    from ..ops import read_vector_index

    where = [k for k, i in enumerate(index) if isinstance(i, NkiTensor)]
    tile = index[where[0]]
    if len(where) > 1 or t._a.on_chip or tile.ndim != 2 or tile.shape[1] != 1:
        raise NkiUnsupportedError(
            "err_tensor_index", f"indexing `{t.name}` with tensors is emulated only for one (P, 1) index tile into an HBM tensor (a DMA gather)"
        )
    k = where[0]
    values = read_vector_index(tile, tile.shape[0]).reshape(tile.shape)
    clamped = np.clip(values, 0, t.shape[k] - 1)
    grid = IndexGrid(0, (0, 0), tuple(tile.shape), (frozenset(), frozenset()), clamped)
    return index[:k] + (grid,) + index[k + 1:], {k: values}


def slice_hook(t: NkiTensor, index: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """``t[256:384, h0:h1]`` running past a dimension, as the equivalent ``nl.mgrid`` index (None when all slices fit).

    0.1 checks bounds after masks apply, so a slice may reach past the tensor where the
    instruction's mask cuts it off (nki-samples' adaptive average pool loads its last, ragged
    ``N*C`` tile that way). As grids, the excess becomes a deferred bound checked against the
    mask (:func:`restrict`). Only indexes of at least two slices and integers are rewritten.
    """
    if len(index) > t.ndim or any(i is Ellipsis or i is None for i in index):
        return None
    bounds: list[tuple[int, int, int]] = []
    past = False
    for k, item in enumerate(index):
        if isinstance(item, DynSlice):
            item = item.as_slice()
        if not isinstance(item, slice):
            if not _is_int(item):
                return None
            continue
        if not all(v is None or _is_int(v) for v in (item.start, item.stop, item.step)):
            return None
        n = t.shape[k]
        start, stop, step = (0 if item.start is None else int(item.start)), (n if item.stop is None else int(item.stop)), item.step or 1
        if start < 0 or stop < 0 or step <= 0 or stop <= start:
            return None
        past = past or stop > n
        bounds.append((start, stop, int(step)))
    if not past or len(bounds) < 2:
        return None
    grids = iter(MGrid()[tuple(slice(a, b, c) for a, b, c in bounds)])
    return tuple(next(grids) if isinstance(i, (slice, DynSlice)) else i for i in index)


def _oob(name: str, dim: int, lo: int, hi: int, n: int) -> NkiOutOfBoundsError:
    return NkiOutOfBoundsError(
        "err_tensor_access_out_of_bound",
        f"Out-of-bound access for tensor `{name}` on dimension {dim}: index range [{lo}, {hi}] exceed dimension size of {n}",
    )


# --------------------------------------------------------------------------------------------
# Masks
# --------------------------------------------------------------------------------------------
def is_empty(box: Box | None) -> bool:
    return box is not None and any(lo >= hi for lo, hi in box)


def mask_terms(mask: Any) -> list[tuple[IndexGrid, int, int, int]] | bool:
    """A mask as ``(expr, position, lo, hi)`` facts: the comparison on ``expr`` holds for positions ``lo ≤ k < hi`` of it.

    True (or None) selects everything and False nothing; a comparison that must hold along two
    index dims at once does not select a sub-rectangle and is an error.
    """
    if mask is None:
        return True
    if isinstance(mask, (bool, np.bool_)):
        return bool(mask)
    if not isinstance(mask, Predicate):
        raise _mask_error(f"got {type(mask).__name__}; build masks by comparing nl.arange/nl.mgrid expressions and loop indices")
    out = []
    for k in range(len(mask.terms)):
        expr, cmp, bound = mask.term(k)
        if not expr.affine:
            raise _mask_error("the expression uses a non-affine operation (//, % or a product of indices)")
        varying = expr.varying()
        if not varying:
            if not _CMP[cmp](expr.const, bound):
                return False
            continue
        if len(varying) > 1:
            raise _mask_error(f"a comparison involves index dims {varying}; each comparison must restrict one dim to select a sub-rectangle")
        d = varying[0]
        ok = np.nonzero(_CMP[cmp](expr.const + expr.coef[d] * np.arange(expr.size[d]), bound))[0]
        if ok.size == 0:
            return False
        out.append((expr, d, int(ok[0]), int(ok[-1]) + 1))
    return out or True


def mask_box(mask: Any, shape: Sequence[int], operands: Sequence[Any] = ()) -> Box | None:
    """The sub-rectangle of an iteration space of ``shape`` that ``mask`` selects (None: all of it).

    ``operands`` that are masked results of ``shape`` narrow it further: what they do not hold
    is not computed (as the compiler propagates a mask through an expression).
    """
    box = [(0, n) for n in shape]
    restricted = False
    for t in operands:
        meta = t._lg if isinstance(t, NkiTensor) else None
        if meta is not None and meta.box is not None and tuple(t.shape) == tuple(shape):
            box = [(max(a, c), min(b, d)) for (a, b), (c, d) in zip(box, meta.box)]
            restricted = True
    terms = mask_terms(mask)
    if terms is False:
        return tuple((0, 0) for _ in shape)
    if terms is True:
        return tuple(box) if restricted else None
    rank = len(shape)
    for expr, d, lo, hi in terms:
        dd = d + rank - expr.rank
        if dd < 0 or expr.size[d] != shape[dd]:
            raise NkiValidationError(
                "err_mask_shape",
                f"a mask index over {expr.rank} dims (size {expr.size[d]} in dim {d}) does not match the instruction's iteration space {list(shape)}",
            )
        a, b = box[dd]
        box[dd] = (max(a, lo), min(b, hi))
    return tuple(box)


def same_dims(t: NkiTensor | Sequence[int], shape: Sequence[int]) -> tuple[int | None, ...]:
    """Which dim of an iteration space of ``shape`` each dim of ``t`` (a tensor or a shape) runs along (None: not restricted)."""
    own = t.shape if isinstance(t, NkiTensor) else t
    return tuple(d if d < len(shape) and n == shape[d] else None for d, n in enumerate(own))


def restrict(t: NkiTensor, box: Box | None, dims: Sequence[int | None] | None = None) -> NkiTensor:
    """``t`` restricted to ``box`` (``dims`` maps t's dims onto the box); raises the bounds errors it still has."""
    if dims is None:
        dims = tuple(range(t.ndim))
    ranges = [(0, n) for n in t.shape]
    if box is not None:
        for i, d in enumerate(dims):
            if d is not None:
                ranges[i] = box[d]
    if any(b <= a for a, b in ranges):
        raise NkiValidationError("err_empty_access", f"a mask selects no element of `{t.name}`")  # callers skip empty boxes
    meta = t._lg
    if meta is not None and meta.oob:
        for k, n, const, coef in meta.oob:
            if coef is None:  # gathered indices (see _gather_index): the values the box keeps
                kept = const[tuple(slice(a, b) for a, b in ranges[: const.ndim])]
                lo, hi = int(kept.min()), int(kept.max())
                if lo < 0 or hi >= n:
                    raise _oob(t.name, k, lo, hi, n)
                continue
            lo = hi = const
            for c, (a, b) in zip(coef, ranges):
                lo += min(c * a, c * (b - 1))
                hi += max(c * a, c * (b - 1))
            if lo < 0 or hi >= n:
                raise _oob(t.name, k, lo, hi, n)
    if all(r == (0, n) for r, n in zip(ranges, t.shape)):
        return t
    sel = tuple(slice(a, b) for a, b in ranges)
    if t._addr is not None:
        view = NkiTensor(t._a, tuple(b - a for a, b in ranges), None, t._offset, t._dtype, addr=t._addr[sel])
        view._ix = t._ix
        return view
    return t[sel]
