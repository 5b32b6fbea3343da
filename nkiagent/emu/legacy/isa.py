"""``neuronxcc.nki.isa``: the NKI 0.1 instruction set, where an instruction returns its result tile.

Every op allocates its result (in SBUF; in PSUM for TensorE's ``nc_matmul`` and
``nc_transpose``), restricts its operands to the ``mask`` (a sub-rectangle of the iteration
space, see :mod:`.grid`) and runs the 0.3 instruction of :mod:`nkiagent.emu.isa` into the
result, so 0.1 and 0.3 kernels produce the same instruction trace and cost model. ``dtype=``
is the result's dtype; by default the input's (promoted, for two inputs). A result assigned
to its target (``x[...] = nisa.exp(y)``) is written there by the instruction itself (see
:func:`.runtime.retarget`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import dtypes as _dt
from .. import isa as _isa
from .. import language as _nl
from .. import ops as _ops
from ..engines import select as _select
from ..errors import NkiUnsupportedError as _Unsupported
from ..errors import NkiValidationError as _Invalid
from ..isa import (  # noqa: F401  (re-exported: the enums and queries are the same in 0.1)
    dge_mode,
    engine,
    get_nc_version,
    gpsimd_engine,
    nc_version,
    oob_mode,
    reduce_cmd,
    scalar_engine,
    tensor_engine,
    unknown_engine,
    vector_engine,
)
from ..memory import psum as _psum
from ..memory import sbuf as _sbuf
from ..tensor import NkiTensor as _Tensor
from . import grid as _grid
from . import runtime as _rt

_FP32_MIN = float(np.finfo(np.float32).min)


# --------------------------------------------------------------------------------------------
# The common pattern
# --------------------------------------------------------------------------------------------
def _run(shape: Sequence[int], dtype: Any, mask: Any, tiles: Sequence[Any], call: Callable[[_Tensor, Callable[[Any], Any]], None],
         **kwargs: Any) -> _Tensor:
    """:func:`_run_in` over the box ``mask`` selects in an iteration space of ``shape`` (and masked ``tiles`` hold)."""
    return _run_in(_grid.mask_box(mask, shape, tiles), shape, dtype, call, **kwargs)


def _run_in(
    box: _grid.Box | None,
    shape: Sequence[int],
    dtype: Any,
    call: Callable[[_Tensor, Callable[[Any], Any]], None],
    *,
    buffer: Any = _sbuf,
    out_shape: Sequence[int] | None = None,
    out_dims: Sequence[int | None] | None = None,
) -> _Tensor:
    """Allocate the result and run ``call(dst, arg)`` on the part of it ``box`` selects, unless that is empty.

    ``arg`` restricts an operand to the box; ``out_dims`` maps each result dim onto an
    iteration dim (default: the same positions).
    """
    out_shape = tuple(shape if out_shape is None else out_shape)
    dims = tuple(out_dims) if out_dims is not None else _grid.same_dims(out_shape, shape)
    out_box = None if box is None else tuple(box[d] if d is not None else (0, n) for d, n in zip(dims, out_shape))
    out = _rt.new_result(out_shape, dtype, buffer, out_box)
    if not _grid.is_empty(box):
        call(_grid.restrict(out, out_box), lambda x: _rt.operand(x, box, shape))
    return out


def _corner(box: _grid.Box | None, rank: int) -> list[int]:
    """The box's lowest index per dim (where an affine pattern restricted to it starts)."""
    return [lo for lo, _ in box] if box is not None else [0] * rank


def _tile(op: str, role: str, x: Any) -> _Tensor:
    return _rt.tile_arg(op, role, x)


def _same_partitions(op: str, named: Sequence[tuple[str, _Tensor]]) -> None:
    """0.1 names the inputs only in ``err_num_partition_mismatch`` (the result is not an operand)."""
    p0 = named[0][1].shape[0]
    if any(t.shape[0] != p0 for _, t in named[1:]):
        _ops.check_same_shape_pp(op, named)


def _promote(*tiles: _Tensor) -> Any:
    out = tiles[0].dtype
    for t in tiles[1:]:
        out = _dt.promote(out, t.dtype)
    return out


def _dtype(dtype: Any, default: Any) -> Any:
    return _dt.as_dtype(dtype) if dtype is not None else default


# --------------------------------------------------------------------------------------------
# Vector / Scalar / GpSimd
# --------------------------------------------------------------------------------------------
def activation(op: Any, data: Any, *, bias: Any = None, scale: Any = 1.0, reduce_op: Any = None, reduce_res: Any = None,
               reduce_cmd: Any = reduce_cmd.idle, mask: Any = None, dtype: Any = None, **kwargs: Any) -> _Tensor:
    """``op(data · scale + bias)`` on ScalarE; optionally each row's sum into ``reduce_res``."""
    x = _tile("activation", "data", data)
    return _run(x.shape, _dtype(dtype, x.dtype), mask, [x], lambda dst, a: _isa.activation(
        dst=dst, op=op, data=a(x), bias=a(bias), scale=a(scale), reduce_op=reduce_op, reduce_res=a(reduce_res), reduce_cmd=reduce_cmd))


def activation_reduce(op: Any, data: Any, *, reduce_op: Any, reduce_res: Any, bias: Any = None, scale: Any = 1.0, mask: Any = None,
                      dtype: Any = None, **kwargs: Any) -> _Tensor:
    """``activation`` plus the sum of each result row into ``reduce_res``."""
    x = _tile("activation_reduce", "data", data)
    return _run(x.shape, _dtype(dtype, x.dtype), mask, [x], lambda dst, a: _isa.activation_reduce(
        dst=dst, op=op, data=a(x), reduce_op=reduce_op, reduce_res=a(reduce_res), bias=a(bias), scale=a(scale)))


def tensor_tensor(data1: Any, data2: Any, op: Any, *, dtype: Any = None, mask: Any = None, engine: Any = engine.unknown, **kwargs: Any) -> _Tensor:
    """``op(data1, data2)`` element-wise."""
    x = _tile("tensor_tensor", "data1", data1)
    y = _tile("tensor_tensor", "data2", data2)
    _same_partitions("tensor_tensor", [("data1", x), ("data2", y)])
    if x.size != y.size and x.ndim == y.ndim == 2 and min(x.size, y.size) == x.shape[0]:
        # 0.1 accepted a [P, 1] column for either operand (nki-samples' quantized matmul scales rows so): the
        # per-partition scalar form of the instruction, tensor_scalar, computes exactly that.
        big, col = (x, y) if y.size == y.shape[0] else (y, x)
        col_f32 = col if col.dtype == _dt.float32 else tensor_copy(col, dtype=_dt.float32)  # scalar operands are fp32
        return _run(big.shape, _dtype(dtype, _promote(x, y)), mask, [big], lambda dst, a: _isa.tensor_scalar(
            dst=dst, data=a(big), op0=op, operand0=a(col_f32), reverse0=col is x, engine=engine))
    return _run(x.shape, _dtype(dtype, _promote(x, y)), mask, [x, y],
                lambda dst, a: _isa.tensor_tensor(dst=dst, data1=a(x), data2=a(y), op=op, engine=engine))


def tensor_scalar(data: Any, op0: Any, operand0: Any, reverse0: bool = False, op1: Any = None, operand1: Any = None, reverse1: bool = False,
                  *, dtype: Any = None, mask: Any = None, engine: Any = engine.unknown, **kwargs: Any) -> _Tensor:
    """``(data op0 operand0) op1 operand1`` with scalar or ``(P, 1)`` operands."""
    x = _tile("tensor_scalar", "data", data)
    return _run(x.shape, _dtype(dtype, x.dtype), mask, [x], lambda dst, a: _isa.tensor_scalar(
        dst=dst, data=a(x), op0=op0, operand0=a(operand0), reverse0=reverse0, op1=op1, operand1=a(operand1), reverse1=reverse1, engine=engine))


def scalar_tensor_tensor(*, data: Any, op0: Any, operand0: Any, op1: Any, operand1: Any, reverse0: bool = False, reverse1: bool = False,
                         dtype: Any = None, mask: Any = None, **kwargs: Any) -> _Tensor:
    """``(data op0 operand0) op1 operand1`` where ``operand1`` is a tile of ``data``'s shape."""
    x = _tile("scalar_tensor_tensor", "data", data)
    y = _tile("scalar_tensor_tensor", "operand1", operand1)
    return _run(x.shape, _dtype(dtype, _promote(x, y)), mask, [x, y], lambda dst, a: _isa.scalar_tensor_tensor(
        dst=dst, data=a(x), op0=op0, operand0=a(operand0), op1=op1, operand1=a(y), reverse0=reverse0, reverse1=reverse1))


def tensor_copy(src: Any, *, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown, **kwargs: Any) -> _Tensor:
    """A copy of ``src`` (cast to ``dtype``) on a compute engine."""
    x = _tile("tensor_copy", "src", src)
    return _run(x.shape, _dtype(dtype, x.dtype), mask, [x], lambda dst, a: _isa.tensor_copy(dst=dst, src=a(x), engine=engine))


def reciprocal(data: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> _Tensor:
    """``1 / data`` on VectorE."""
    x = _tile("reciprocal", "data", data)
    return _run(x.shape, _dtype(dtype, x.dtype), mask, [x], lambda dst, a: _isa.reciprocal(dst=dst, data=a(x)))


def tensor_reduce(op: Any, data: Any, axis: Any, *, mask: Any = None, dtype: Any = None, negate: bool = False, keepdims: bool = False,
                  **kwargs: Any) -> _Tensor:
    """Reduce ``data`` along free ``axis`` with ``op``."""
    x = _tile("tensor_reduce", "data", data)
    axes = tuple(a + x.ndim if a < 0 else a for a in _ops.axis_tuple("tensor_reduce", axis))
    out_shape, dims = _rt.reduced_shape(x.shape, axes, keepdims)

    def call(dst: _Tensor, a: Any) -> None:
        data, last = _rt.trailing_axes(a(x), axes)
        _isa.tensor_reduce(dst=dst, op=op, data=data, axis=last, negate=negate, keepdims=keepdims)

    return _run(x.shape, _dtype(dtype, x.dtype), mask, [x], call, out_shape=out_shape, out_dims=dims)


def tensor_partition_reduce(op: Any, data: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> _Tensor:
    """Reduce across partitions into one partition."""
    x = _tile("tensor_partition_reduce", "data", data)
    return _run(x.shape, _dtype(dtype, x.dtype), mask, [x], lambda dst, a: _isa.tensor_partition_reduce(dst=dst, op=op, data=a(x)),
                out_shape=(1,) + x.shape[1:], out_dims=(None,) + tuple(range(1, x.ndim)))


def tensor_tensor_scan(data0: Any, data1: Any, initial: Any, op0: Any, op1: Any, reverse0: bool = False, reverse1: bool = False, *,
                       dtype: Any = None, mask: Any = None, **kwargs: Any) -> _Tensor:
    """Per-partition scan ``r[i] = op1(op0(data0[i], r[i-1]), data1[i])`` from ``initial``."""
    x = _tile("tensor_tensor_scan", "data0", data0)
    y = _tile("tensor_tensor_scan", "data1", data1)
    return _run(x.shape, _dtype(dtype, _promote(x, y)), mask, [x, y], lambda dst, a: _isa.tensor_tensor_scan(
        dst=dst, data0=a(x), data1=a(y), initial=a(initial), op0=op0, op1=op1, reverse0=reverse0, reverse1=reverse1))


def tensor_scalar_reduce(*, data: Any, op0: Any, operand0: Any, reduce_op: Any, reduce_res: Any, reverse0: bool = False, dtype: Any = None,
                         mask: Any = None, **kwargs: Any) -> _Tensor:
    """``data op0 operand0`` plus a reduction of each result row into ``reduce_res``."""
    x = _tile("tensor_scalar_reduce", "data", data)
    return _run(x.shape, _dtype(dtype, x.dtype), mask, [x], lambda dst, a: _isa.tensor_scalar_reduce(
        dst=dst, data=a(x), op0=op0, operand0=a(operand0), reduce_op=reduce_op, reduce_res=a(reduce_res), reverse0=reverse0))


def tensor_copy_predicated(*, src: Any, dst: Any, predicate: Any, reverse_pred: bool = False, mask: Any = None, dtype: Any = None,
                           **kwargs: Any) -> None:
    """Copy ``src`` into ``dst`` where ``predicate`` is non-zero (writes ``dst`` in place)."""
    d = _tile("tensor_copy_predicated", "dst", dst)
    box = _grid.mask_box(mask, d.shape)
    if not _grid.is_empty(box):
        _isa.tensor_copy_predicated(dst=_rt.operand(d, box, d.shape), src=_rt.operand(src, box, d.shape), predicate=_rt.operand(predicate, box, d.shape),
                                    reverse_pred=reverse_pred)


def bn_stats(data: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> _Tensor:
    """Per-partition ``(count, mean, var·count)`` of even and odd elements: a ``[P, 6]`` tile."""
    x = _tile("bn_stats", "data", data)
    return _run(x.shape, _dtype(dtype, x.dtype), mask, [x], lambda dst, a: _isa.bn_stats(dst=dst, data=a(x)),
                out_shape=(x.shape[0], 6), out_dims=(0, None))


def bn_aggr(data: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> _Tensor:
    """Mean and variance per partition from ``bn_stats`` outputs: a ``[P, 2]`` tile."""
    x = _tile("bn_aggr", "data", data)
    return _run(x.shape, _dtype(dtype, x.dtype), mask, [x], lambda dst, a: _isa.bn_aggr(dst=dst, data=a(x)),
                out_shape=(x.shape[0], 2), out_dims=(0, None))


def dropout(data: Any, prob: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> _Tensor:
    """Zero each element with probability ``prob``."""
    x = _tile("dropout", "data", data)
    return _run(x.shape, _dtype(dtype, x.dtype), mask, [x], lambda dst, a: _isa.dropout(dst=dst, data=a(x), prob=a(prob)))


def sequence_bounds(*, segment_ids: Any, dtype: Any = None, **kwargs: Any) -> _Tensor:
    """Each element's segment start and end (0.3's ``sequence_bounds``): a ``[1, 2, n]`` tile for ``segment_ids`` ``[1, n]``."""
    x = _tile("sequence_bounds", "segment_ids", segment_ids)
    return _run_in(None, x.shape, _dtype(dtype, x.dtype), lambda dst, a: _isa.sequence_bounds(dst=dst, segment_ids=a(x)),
                   out_shape=(x.shape[0], 2, x.size // x.shape[0]), out_dims=(0, None, 1))


def max8(*, src: Any, mask: Any = None, dtype: Any = None, **kwargs: Any) -> _Tensor:
    """The 8 largest values of each partition, descending: a ``[P, 8]`` tile."""
    x = _tile("max8", "src", src)
    return _run(x.shape, _dtype(dtype, x.dtype), mask, [x], lambda dst, a: _isa.max8(dst=dst, src=a(x)),
                out_shape=(x.shape[0], 8), out_dims=(0, None))


def nc_find_index8(*, data: Any, vals: Any, mask: Any = None, dtype: Any = None, **kwargs: Any) -> _Tensor:
    """Index of each of the 8 ``vals`` in each partition of ``data``: a ``[P, 8]`` uint32 tile."""
    x = _tile("nc_find_index8", "data", data)
    return _run(x.shape, _dtype(dtype, _dt.uint32), mask, [x], lambda dst, a: _isa.nc_find_index8(dst=dst, data=a(x), vals=a(vals)),
                out_shape=(x.shape[0], 8), out_dims=(0, None))


def nc_match_replace8(*, data: Any, vals: Any, imm: Any, dst_idx: Any = None, mask: Any = None, dtype: Any = None, **kwargs: Any) -> _Tensor:
    """``data`` with the first match of each of the 8 ``vals`` replaced by ``imm``."""
    x = _tile("nc_match_replace8", "data", data)
    return _run(x.shape, _dtype(dtype, x.dtype), mask, [x], lambda dst, a: _isa.nc_match_replace8(
        dst=dst, data=a(x), vals=a(vals), imm=imm, dst_idx=a(dst_idx)))


def nc_stream_shuffle(src: Any, dst: Any, shuffle_mask: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> None:
    """Move partitions of ``src`` within 32-partition quadrants into ``dst`` (in place)."""
    s = _tile("nc_stream_shuffle", "src", src)
    box = _grid.mask_box(mask, s.shape)
    if not _grid.is_empty(box):
        _isa.nc_stream_shuffle(dst=_rt.operand(dst, box, s.shape), src=_rt.operand(s, box, s.shape), shuffle_mask=shuffle_mask)


def select_reduce(*, dst: Any, predicate: Any, on_true: Any, on_false: Any, reduce_res: Any = None, reduce_cmd: Any = reduce_cmd.idle,
                  reduce_op: Any = np.amax, reverse_pred: bool = False, mask: Any = None, dtype: Any = None, **kwargs: Any) -> None:
    """``dst = where(predicate, on_true, on_false)`` with an optional row max (in place)."""
    d = _tile("select_reduce", "dst", dst)
    box = _grid.mask_box(mask, d.shape)
    if not _grid.is_empty(box):
        a = lambda x: _rt.operand(x, box, d.shape)
        _isa.select_reduce(dst=a(d), predicate=a(predicate), on_true=a(on_true), on_false=a(on_false), reduce_res=a(reduce_res),
                           reduce_cmd=reduce_cmd, reduce_op=reduce_op, reverse_pred=reverse_pred)


def range_select(*, on_true_tile: Any, comp_op0: Any, comp_op1: Any, bound0: Any, bound1: Any, reduce_cmd: Any = reduce_cmd.idle,
                 reduce_res: Any = None, reduce_op: Any = np.amax, range_start: Any = 0, on_false_value: Any = _FP32_MIN, mask: Any = None,
                 dtype: Any = None, **kwargs: Any) -> _Tensor:
    """Keep elements whose free index is in a per-partition range (trn2+), with an optional row max."""
    x = _tile("range_select", "on_true_tile", on_true_tile)
    return _run(x.shape, _dtype(dtype, x.dtype), mask, [x], lambda dst, a: _isa.range_select(
        dst=dst, on_true_tile=a(x), comp_op0=comp_op0, comp_op1=comp_op1, bound0=a(bound0), bound1=a(bound1), reduce_cmd=reduce_cmd,
        reduce_res=a(reduce_res), reduce_op=reduce_op, range_start=range_start, on_false_value=on_false_value))


def local_gather(src_buffer: Any, index: Any, num_elem_per_idx: int = 1, num_valid_indices: Any = None, *, mask: Any = None,
                 **kwargs: Any) -> _Tensor:
    """Gather within groups of 16 partitions on GpSimd."""
    x = _tile("local_gather", "src_buffer", src_buffer)
    idx = _tile("local_gather", "index", index)
    valid = int(num_valid_indices) if num_valid_indices is not None else 16 * (idx.size // idx.shape[0])
    return _run(x.shape, x.dtype, mask, [x], lambda dst, a: _isa.local_gather(
        dst=dst, src_buffer=a(x), index=a(idx), num_elem_per_idx=num_elem_per_idx, num_valid_indices=num_valid_indices),
        out_shape=(x.shape[0], valid * num_elem_per_idx), out_dims=(0, None))


def memset(shape: Any, value: Any, dtype: Any, *, mask: Any = None, engine: Any = engine.unknown, **kwargs: Any) -> _Tensor:
    """A new tile of ``shape`` filled with ``value`` (converted to ``dtype`` as the engine stores it)."""
    d = _dt.as_dtype(dtype)
    shape = tuple(int(s) for s in shape)
    if _dt.is_int(d) and d != _dt.bool_:
        info = np.iinfo(d)
        value = int(np.clip(np.rint(float(value)), info.min, info.max))
    return _run(shape, d, mask, [], lambda dst, a: _isa.memset(dst=dst, value=value, engine=engine))


def iota(expr: Any, dtype: Any, *, mask: Any = None, **kwargs: Any) -> _Tensor:
    """A tile of the values of an affine ``nl.arange`` expression (an integer gives a ``[1, 1]`` tile)."""
    g = _affine("iota", expr)
    shape = g.size
    d = _dt.as_dtype(dtype)

    box = _grid.mask_box(mask, shape)
    lo = _corner(box, len(shape))

    def call(dst: _Tensor, a: Any) -> None:
        _isa.iota(dst=dst, pattern=[[c, n] for c, n in zip(g.coef[1:], dst.shape[1:])], offset=g.const + sum(c * l for c, l in zip(g.coef, lo)),
                  channel_multiplier=g.coef[0])

    return _run_in(box, shape, d, call)


def _affine(op: str, expr: Any) -> _grid.IndexGrid:
    if isinstance(expr, (int, np.integer)):
        return _grid.IndexGrid(int(expr), (0, 0), (1, 1), (frozenset(), frozenset()))
    if not isinstance(expr, _grid.IndexGrid):
        raise _Invalid("err_invalid_index_expression", f"{op} takes an affine expression of nl.arange indices, got {type(expr).__name__}")
    if expr.rank < 2:
        raise _Invalid("err_1d_arange_not_supported", f"{op} of a 1d arange is not supported; expand it with [:, None] or [None, :]")
    if not expr.affine:
        raise _Unsupported("err_non_affine_index_expression", f"{op} needs an affine expression of nl.arange indices (no //, % or products of them)")
    return expr


def affine_select(pred: Any, on_true_tile: Any, on_false_value: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> _Tensor:
    """``on_true_tile`` where the affine predicate ``pred`` holds, else ``on_false_value`` (GpSimd)."""
    x = _tile("affine_select", "on_true_tile", on_true_tile)
    if x.buffer.name == "psum":
        # GpSimd cannot read PSUM (trn2+); 0.1 kernels (flash attention bwd) select straight from a matmul's
        # PSUM tile, which the compiler staged through SBUF: one copy on the Vector engine.
        x = _nl.copy(_grid.restrict(x, None))
    if isinstance(pred, (bool, np.bool_)):
        return tensor_copy(x, mask=mask, dtype=dtype) if pred else memset(x.shape, on_false_value, _dtype(dtype, x.dtype), mask=mask)
    if not isinstance(pred, _grid.Predicate) or len(pred.terms) != 1:
        raise _Invalid("err_unsupported_expression_in_mask", "affine_select takes one affine comparison as pred (not several combined with &)")
    expr, cmp, bound = pred.term(0)
    if bound != int(bound):
        raise _Invalid("err_unsupported_expression_in_mask", f"affine_select compares integer index expressions, got the bound {bound}")
    g = _affine("affine_select", expr).padded(x.ndim)
    if any(n not in (1, s) for n, s in zip(g.size, x.shape)) or g.rank != x.ndim:
        raise _Invalid("err_mask_shape", f"affine_select pred of shape {list(g.size)} does not match on_true_tile {list(x.shape)}")
    box = _grid.mask_box(mask, x.shape, [x])
    lo = _corner(box, x.ndim)

    def call(dst: _Tensor, a: Any) -> None:
        _isa.affine_select(dst=dst, pattern=[[c, n] for c, n in zip(g.coef[1:], dst.shape[1:])], channel_multiplier=g.coef[0],
                           on_true_tile=a(x), on_false_value=on_false_value, cmp_op=cmp,
                           offset=g.const - int(bound) + sum(c * l for c, l in zip(g.coef, lo)))

    return _run_in(box, x.shape, _dtype(dtype, x.dtype), call)


# --------------------------------------------------------------------------------------------
# TensorE
# --------------------------------------------------------------------------------------------
def _matmul_box(mask: Any, st: _Tensor, mv: _Tensor) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]] | None:
    """The ``(K, M, N)`` ranges an operand mask selects.

    A comparison restricts the operand dim it indexes (K on the partitions of either operand,
    M on the stationary's free dim, N on the moving's); a comparison on neither operand's
    indices restricts the result ``[M, N]`` by position.
    """
    terms = _grid.mask_terms(mask)
    k, m, n = st.shape[0], st.size // st.shape[0], mv.size // mv.shape[0]
    if terms is True:
        return None
    if terms is False:
        return (0, 0), (0, 0), (0, 0)
    if st.ndim != 2 or mv.ndim != 2:
        raise _Unsupported("err_matmul_mask_rank", "matmul operand masks are supported for 2-D operands only")
    box = [(0, k), (0, m), (0, n)]
    for expr, d, lo, hi in terms:
        vars_ = expr.vars[d]
        axis = None
        for t, roles in ((st, (0, 1)), (mv, (0, 2))):
            tv = t._lg.vars if t._lg is not None else ()
            for dim, v in enumerate(tv):
                if v & vars_:
                    axis = roles[dim]
        if axis is None:
            axis = (d + 2 - expr.rank) + 1  # position in the result [M, N]
        if axis not in (0, 1, 2) or expr.size[d] != (k, m, n)[axis]:
            raise _Invalid("err_mask_shape", f"a matmul mask index of size {expr.size[d]} matches no dim of stationary [{k}, {m}] or moving [{k}, {n}]")
        a, b = box[axis]
        box[axis] = (max(a, lo), min(b, hi))
    return box[0], box[1], box[2]


def nc_matmul(stationary: Any, moving: Any, *, is_stationary_onezero: bool = False, is_moving_onezero: bool = False, is_transpose: bool = False,
              tile_position: Any = (), tile_size: Any = (), mask: Any = None, **kwargs: Any) -> _Tensor:
    """``stationary[K, M]ᵀ · moving[K, N]`` into a new fp32 PSUM tile; ``psum += nisa.nc_matmul(...)`` accumulates."""
    ctx = _ops.current()
    # TensorE reads SBUF only; 0.1 kernels feed it nc_transpose's PSUM result directly (flash attention bwd),
    # which the compiler staged through SBUF: one Vector-engine copy per such operand.
    st, mv = (_tile("nc_matmul", role, x) for role, x in (("stationary", stationary), ("moving", moving)))
    st, mv = (_nl.copy(_grid.restrict(t, None)) if t.buffer.name == "psum" else t for t in (st, mv))
    mode = str(getattr(kwargs.get("perf_mode"), "value", kwargs.get("perf_mode")))
    if "double_row" in mode:
        return _double_row_matmul(mode, st, mv, mask)
    m, n = st.size // st.shape[0], mv.size // mv.shape[0]
    kmn = _matmul_box(mask, st, mv)
    out_box = None if kmn is None else (kmn[1], kmn[2])
    out = _rt.new_result((m, n), _dt.float32, _psum, out_box, _rt.MatmulTile)
    # 0.1 accepted is_transpose on every generation; with an identity as moving it is the plain product.
    kw = {"is_stationary_onezero": is_stationary_onezero, "is_moving_onezero": is_moving_onezero,
          "is_transpose": bool(is_transpose) and ctx.target.nc_version >= 3, "tile_position": tile_position, "tile_size": tile_size}
    if kmn is not None and any(lo >= hi for lo, hi in kmn):
        out._mm = (st, mv, kw)
        return out
    if kmn is not None:
        st = _grid.restrict(st, (kmn[0], kmn[1]))
        mv = _grid.restrict(mv, (kmn[0], kmn[2]))
    else:
        st, mv = _grid.restrict(st, None), _grid.restrict(mv, None)
    _isa.nc_matmul(dst=_grid.restrict(out, out_box), stationary=st, moving=mv, accumulate=False, **kw)
    out._mm = (st, mv, kw)
    return out


def _double_row_matmul(mode: str, st: _Tensor, mv: _Tensor, mask: Any) -> _Tensor:
    """``perf_mode='double_row…'``: ``[K, 2, M]`` and ``[K, 2, N]`` operands contract over both K and the pair.

    Emulated as two matmuls accumulating into one PSUM tile (the same fp32 sums); the trace
    shows two TensorE instructions where the hardware issues one at twice the rate.
    """
    if mask is not None or st.ndim != 3 or mv.ndim != 3 or st.shape[1] != 2 or mv.shape[1] != 2:
        raise _Unsupported(
            "err_unsupported_perf_mode",
            f"nc_matmul(perf_mode={mode!r}) is emulated for unmasked [K, 2, M] x [K, 2, N] operands, got {list(st.shape)} and {list(mv.shape)}",
        )
    out = _rt.new_result((st.shape[2], mv.shape[2]), _dt.float32, _psum, None, _rt.MatmulTile)
    pairs = [(_grid.restrict(st, None)[:, r, :], _grid.restrict(mv, None)[:, r, :], {}) for r in (0, 1)]
    for r, (a, b, kw) in enumerate(pairs):
        _isa.nc_matmul(dst=out, stationary=a, moving=b, accumulate=r > 0, **kw)
    out._mm = pairs
    return out


def nc_transpose(data: Any, *, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown, **kwargs: Any) -> _Tensor:
    """Transpose a 2-D tile: TensorE into PSUM, or VectorE (≤ 32×32) into SBUF."""
    x = _tile("nc_transpose", "data", data)
    p, f = x.shape[0], x.size // x.shape[0]
    eng = _select("nc_transpose", engine, "vector" if x._a.memory == "psum" or (p <= 32 and f <= 32) else "tensor")
    out_shape = (f, p) if x.ndim == 2 else (f, p) + (1,) * (x.ndim - 2)
    return _run(x.shape, _dtype(dtype, x.dtype), mask, [x], lambda dst, a: _isa.nc_transpose(dst=dst, data=a(x), engine=_isa.engine[eng]),
        buffer=_psum if eng == "tensor" else _sbuf, out_shape=out_shape, out_dims=(1, 0) + (None,) * (x.ndim - 2))


# --------------------------------------------------------------------------------------------
# DMA
# --------------------------------------------------------------------------------------------
def dma_copy(*, dst: Any, src: Any, mask: Any = None, dst_rmw_op: Any = None, oob_mode: Any = oob_mode.error, dge_mode: Any = dge_mode.unknown,
             **kwargs: Any) -> None:
    """Copy ``src`` into ``dst`` by DMA (in place)."""
    d = _tile("dma_copy", "dst", dst)
    if dst_rmw_op is not None:
        raise _Unsupported("err_not_emulated", "nki.isa.dma_copy(dst_rmw_op=...) (accumulating DMA) is not supported by the nkiagent emulator")
    box = _grid.mask_box(mask, d.shape)
    if not _grid.is_empty(box):
        _isa.dma_copy(dst=_rt.operand(d, box, d.shape), src=_rt.operand(src, box, d.shape), oob_mode=oob_mode, dge_mode=dge_mode)


def dma_transpose(src: Any, *, axes: Any = None, mask: Any = None, dtype: Any = None, **kwargs: Any) -> _Tensor:
    """A new SBUF tile holding ``src`` with its dims permuted by ``axes`` (default: reversed)."""
    x = _tile("dma_transpose", "src", src)
    perm = tuple(axes) if axes is not None else tuple(reversed(range(x.ndim)))
    return _run(x.shape, _dtype(dtype, x.dtype), mask, [x], lambda dst, a: _isa.dma_transpose(dst=dst, src=a(x), axes=perm),
                out_shape=tuple(x.shape[a] for a in perm), out_dims=perm)
