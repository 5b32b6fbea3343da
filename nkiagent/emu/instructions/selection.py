"""Selection and top-8: masks, predicated copies and selects, range selects, ``max8`` and its index/replace ops."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from .. import dtypes as dt
from ..alu import alu_op
from ..errors import NkiTypeError, NkiValidationError, warn
from ..memory import KernelContext, current
from ..ops import (
    check_compute_operand,
    check_same_shape_pp,
    close_psum_group,
    f32,
    record,
    scalar_or_column,
    write,
)
from ..registry import ISA_INDEX, AccumulatorAttrs, CostAttrs, NoAttrs, instruction, page
from ..tensor import NkiTensor
from .common import (
    _INDEX_DTYPES,
    _RC,
    _acc_accesses,
    _acc_end,
    _acc_start,
    _affine_values,
    _check_reduce_enabled,
    _cmd,
    _column,
    _epp,
    _p,
    _pf,
    _pp,
    _reduce_alu,
    _require_gen,
    _rows,
    _same_partitions,
    _shape,
    reduce_cmd,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PredicateAttrs(CostAttrs):
    """Whether the predicate is inverted."""

    reverse_pred: bool = False


@instruction(
    family="selection and top-8",
    engines="gpsimd",
    source=ISA_INDEX,
    attrs=NoAttrs,
    rules=("pattern as iota's; on_true_tile has dst's shape; cmp_op is a comparison ALU op (nl.equal by default)",),
    example="nisa.affine_select(dst=masked, pattern=[[-1, 128]], channel_multiplier=1, on_true_tile=scores, on_false_value=-9984.0, cmp_op=nl.greater_equal)",
)
def affine_select(
    dst: Any,
    pattern: Any,
    channel_multiplier: Any,
    on_true_tile: Any,
    on_false_value: Any,
    cmp_op: Any = None,
    offset: Any = 0,
    name: Any = None,
) -> None:
    """``dst = on_true_tile where cmp_op(affine, 0) else on_false_value`` with iota's affine form (GpSimd)."""
    ctx = current()
    op = "affine_select"
    dst = check_compute_operand(ctx, op, "dst", dst, "gpsimd")
    src = check_compute_operand(ctx, op, "on_true_tile", on_true_tile, "gpsimd")
    check_same_shape_pp(op, [("dst", dst), ("on_true_tile", src)])
    cmp = alu_op(cmp_op if cmp_op is not None else "equal", op)
    vals = _affine_values(op, dst, pattern, offset, channel_multiplier)
    record(ctx, op, "gpsimd", [("on_true_tile", src)], [("dst", dst)])
    if ctx.compute:
        mask = cmp.fn(vals.astype(np.float64), np.zeros(1)) != 0
        out = np.where(mask.reshape(_p(dst), -1), _pf(f32(src), _p(src)), np.float32(on_false_value))
        write(ctx, dst, out.reshape(dst.shape))


#: ``on_false_value`` range_select requires (the most negative finite fp32).
FP32_MIN = float(np.finfo(np.float32).min)


_SELECT_PRED_DTYPES = (dt.bool_, dt.int8, dt.uint8, dt.int16, dt.uint16)


@instruction(
    family="selection and top-8",
    engines="vector",
    source=ISA_INDEX,
    attrs=AccumulatorAttrs,
    rules=(
        "predicate is bool/int8/uint8/int16/uint16; on_true and on_false cannot both be in PSUM",
        "reduce_res (a [P, 1] fp32 column) needs reduce_cmd other than idle",
    ),
    example="nisa.select_reduce(dst=y, predicate=mask, on_true=x, on_false=-3e38, reduce_res=row_max, reduce_cmd=nisa.reduce_cmd.reset_reduce)",
)
def select_reduce(
    dst: Any,
    predicate: Any,
    on_true: Any,
    on_false: Any,
    reduce_res: Any = None,
    reduce_cmd: Any = reduce_cmd.idle,
    reduce_op: Any = None,
    reverse_pred: bool = False,
    name: Any = None,
) -> None:
    """``dst = where(predicate, on_true, on_false)`` on VectorE, with an optional row max.

    ``predicate`` is a (u)int8/(u)int16 tile of ``on_true``'s shape (non-zero = true,
    inverted by ``reverse_pred``); ``on_false`` is a number or a ``(P, 1)`` tile. With
    ``reduce_cmd`` ``reset_reduce`` (or ``reduce``, to continue) the maximum of each row of the
    result goes to the Vector Engine accumulator and, when given, to the ``(P, 1)`` float tile
    ``reduce_res``. ``reduce_op`` can only be ``nl.maximum`` (the default).
    """
    ctx = current()
    op = "select_reduce"
    alu = _reduce_alu(op, reduce_op if reduce_op is not None else "maximum", ("maximum",))
    cmd = _cmd(op, reduce_cmd, (_RC.idle, _RC.reset_reduce, _RC.reduce))
    pred = check_compute_operand(ctx, op, "predicate", predicate, "vector")
    src = check_compute_operand(ctx, op, "on_true", on_true, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    if pred._a.memory == "psum" and src._a.memory == "psum":
        raise NkiValidationError("err_select_both_psum", f"{op} predicate and on_true cannot both be in PSUM")
    check_same_shape_pp(op, [("on_true", src), ("predicate", pred), ("dst", dst)])
    if pred.dtype not in _SELECT_PRED_DTYPES:
        raise NkiValidationError(
            "err_predicate_dtype", f"{op} predicate must be int8, uint8, int16 or uint16, got {dt.dtype_name(pred.dtype)}"
        )
    if src.dtype in (dt.tfloat32, dt.int32, dt.uint32):
        raise NkiValidationError("err_select_dtype", f"{op} on_true cannot be {dt.dtype_name(src.dtype)}")
    p = _pp(src)
    writes = [("dst", dst)]
    if reduce_res is not None:
        _check_reduce_enabled(op, cmd)
        rr = _column(ctx, op, "reduce_res", reduce_res, p, "vector")
        if not dt.is_float(rr.dtype):
            raise NkiValidationError("err_reduce_res_dtype", f"{op} reduce_res must have a float dtype, got {dt.dtype_name(rr.dtype)}")
        writes.append(("reduce_res", rr))
    reads = [("predicate", pred), ("on_true", src)] + ([("on_false", on_false)] if isinstance(on_false, NkiTensor) else [])
    off = scalar_or_column(op, "on_false", on_false, src, fp32_only=False)
    record(ctx, op, "vector", reads, writes, **_acc_accesses(ctx, cmd, p), reduce_cmd=cmd.name, reverse_pred=bool(reverse_pred))
    if not ctx.compute:
        return
    mask = _rows(pred._np(), p) != 0
    if reverse_pred:
        mask = ~mask
    off_rows = off.reshape(p, 1) if isinstance(off, np.ndarray) else off
    res = np.where(mask, _rows(f32(src), p), off_rows).astype(np.float32)
    close_psum_group(pred)
    close_psum_group(src)
    write(ctx, dst, res.reshape(dst.shape))
    if cmd == _RC.idle:
        _acc_end(ctx, None, p)
        return
    acc = alu.fn(_acc_start(ctx, op, cmd, alu.name, None, p), res.max(axis=1))
    _acc_end(ctx, acc, p)
    if reduce_res is not None:
        write(ctx, writes[1][1], acc.reshape(writes[1][1].shape))


_RANGE_CMP = ("equal", "less", "less_equal", "greater", "greater_equal")


@instruction(
    family="selection and top-8",
    engines="vector",
    source=ISA_INDEX,
    attrs=AccumulatorAttrs,
    rules=("trn2+; comp_op0/comp_op1 are comparisons; bounds are [P, 1] fp32 columns; on_false_value must be FP32_MIN",),
    example="nisa.range_select(dst=y, on_true_tile=x, comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=lo, bound1=hi, reduce_res=row_max)",
    nc_version=3,
)
def range_select(
    dst: Any,
    on_true_tile: Any,
    comp_op0: Any,
    comp_op1: Any,
    bound0: Any,
    bound1: Any,
    reduce_cmd: Any = reduce_cmd.reset_reduce,
    reduce_res: Any = None,
    reduce_op: Any = None,
    range_start: Any = 0,
    on_false_value: Any = FP32_MIN,
    name: Any = None,
) -> None:
    """Keep elements whose free index lies in a per-partition range, on VectorE (trn2+), with a row max.

    With ``idx = range_start + i`` for free element ``i`` (compared in fp32), element ``i`` of
    partition ``p`` is kept when ``comp_op0(idx, bound0[p]) and comp_op1(idx, bound1[p])``, else
    it becomes ``on_false_value``, which must be FP32_MIN (-3.4028235e38). The maximum of each
    result row goes to the Vector Engine accumulator (``reduce_cmd``) and, when given, to the
    ``(P, 1)`` tile ``reduce_res``. ``bound0``/``bound1`` are ``(P, 1)`` fp32 tiles; the
    comparisons are equal, less, less_equal, greater or greater_equal; ``reduce_op`` can only
    be ``nl.maximum``.
    """
    ctx = current()
    op = "range_select"
    _require_gen(ctx, op)
    alu = _reduce_alu(op, reduce_op if reduce_op is not None else "maximum", ("maximum",))
    cmps = [alu_op(c, op) for c in (comp_op0, comp_op1)]
    for k, c in enumerate(cmps):
        if c.name not in _RANGE_CMP:
            raise NkiValidationError(
                "err_range_select_cmp", f"{op} comp_op{k} must be one of {', '.join('nl.' + n for n in _RANGE_CMP)}, got {c.name}"
            )
    if not isinstance(on_false_value, (int, float, np.integer, np.floating)) or np.float32(on_false_value) != np.float32(FP32_MIN):
        raise NkiValidationError(
            "err_range_select_on_false",
            f"{op} on_false_value must be FP32_MIN (-3.4028235e+38), a hardware constraint; got {on_false_value!r}",
        )
    if not isinstance(range_start, (int, np.integer)):
        raise NkiTypeError("err_range_start", f"{op} range_start must be a compile-time integer, got {type(range_start).__name__}")
    cmd = _cmd(op, reduce_cmd, (_RC.idle, _RC.reset_reduce, _RC.reduce))
    src = check_compute_operand(ctx, op, "on_true_tile", on_true_tile, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    check_same_shape_pp(op, [("on_true_tile", src), ("dst", dst)])
    if not dt.is_float(src.dtype):
        raise NkiValidationError("err_range_select_dtype", f"{op} on_true_tile must have a float dtype, got {dt.dtype_name(src.dtype)}")
    p = _pp(src)
    b0 = _column(ctx, op, "bound0", bound0, p, "vector")
    b1 = _column(ctx, op, "bound1", bound1, p, "vector")
    for role, b in (("bound0", b0), ("bound1", b1)):
        if b.dtype != dt.float32:
            raise NkiValidationError("err_range_select_bound_dtype", f"{op} {role} must be float32, got {dt.dtype_name(b.dtype)}")
    if _epp(src) + int(range_start) > 2**24:
        raise NkiValidationError(
            "err_range_select_index",
            f"{op} range_start + free index reaches {_epp(src) + int(range_start)}, beyond the 2^24 exactly representable in fp32",
        )
    writes = [("dst", dst)]
    if reduce_res is not None:
        _check_reduce_enabled(op, cmd)
        writes.append(("reduce_res", _column(ctx, op, "reduce_res", reduce_res, p, "vector")))
    record(
        ctx,
        op,
        "vector",
        [("on_true_tile", src), ("bound0", b0), ("bound1", b1)],
        writes,
        **_acc_accesses(ctx, cmd, p),
        cmp=(cmps[0].name, cmps[1].name),
        reduce_cmd=cmd.name,
        range_start=int(range_start),
    )
    if not ctx.compute:
        return
    idx = (np.arange(_epp(src), dtype=np.float32) + np.float32(range_start))[None, :]
    lo, hi = f32(b0).reshape(p, 1), f32(b1).reshape(p, 1)
    mask = (cmps[0].fn(idx, lo) != 0) & (cmps[1].fn(idx, hi) != 0)
    res = np.where(mask, _rows(f32(src), p), np.float32(FP32_MIN)).astype(np.float32)
    for t in (src, b0, b1):
        close_psum_group(t)
    write(ctx, dst, res.reshape(dst.shape))
    if cmd == _RC.idle:
        _acc_end(ctx, None, p)
        return
    acc = alu.fn(_acc_start(ctx, op, cmd, alu.name, None, p), res.max(axis=1))
    _acc_end(ctx, acc, p)
    if reduce_res is not None:
        write(ctx, writes[1][1], acc.reshape(writes[1][1].shape))


_COPY_PRED_DTYPES = (dt.bool_, dt.uint8, dt.uint16, dt.uint32)


@instruction(
    family="selection and top-8",
    engines="vector",
    source=ISA_INDEX,
    attrs=PredicateAttrs,
    rules=("predicate is bool/uint8/uint16/uint32 of src's shape; src and predicate cannot both be in PSUM",),
    example="nisa.tensor_copy_predicated(dst=y, src=x, predicate=mask)",
)
def tensor_copy_predicated(dst: Any, src: Any, predicate: Any, reverse_pred: bool = False, name: Any = None) -> None:
    """Copy ``src`` into ``dst`` where ``predicate`` is non-zero (zero with ``reverse_pred``), on VectorE.

    Elements where the predicate does not hold keep their old ``dst`` values. ``src`` is a
    tile with ``dst``'s dtype and shape, or a number (0.6) written wherever the predicate holds.
    ``predicate`` is a uint8/uint16/uint32 tile; ``src`` and ``predicate`` may not both be in PSUM.
    """
    ctx = current()
    op = "tensor_copy_predicated"
    pred = check_compute_operand(ctx, op, "predicate", predicate, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    if pred.dtype not in _COPY_PRED_DTYPES:
        raise NkiValidationError("err_predicate_dtype", f"{op} predicate must be uint8, uint16 or uint32, got {dt.dtype_name(pred.dtype)}")
    reads = [("predicate", pred)]
    if isinstance(src, NkiTensor):
        src = check_compute_operand(ctx, op, "src", src, "vector")
        if src._a.memory == "psum" and pred._a.memory == "psum":
            raise NkiValidationError("err_copy_predicated_both_psum", f"{op} src and predicate cannot both be in PSUM")
        check_same_shape_pp(op, [("src", src), ("predicate", pred), ("dst", dst)])
        if src.dtype != dst.dtype:
            raise NkiValidationError(
                "err_copy_predicated_dtype",
                f"{op} src and dst must share a dtype, got {dt.dtype_name(src.dtype)} and {dt.dtype_name(dst.dtype)}",
            )
        reads.append(("src", src))
    elif isinstance(src, (int, float, np.integer, np.floating)) and not isinstance(src, bool):
        check_same_shape_pp(op, [("predicate", pred), ("dst", dst)])
    else:
        raise NkiTypeError("err_operand_type", f"{op} src must be a tile or a number, got {type(src).__name__}")
    record(ctx, op, "vector", reads, [("dst", dst)], reverse_pred=bool(reverse_pred))
    if not ctx.compute:
        return
    p = _pp(dst)
    mask = _rows(pred._np(), p) != 0
    if reverse_pred:
        mask = ~mask
    new = _rows(src._np(), p) if isinstance(src, NkiTensor) else np.float64(src)
    old = _rows(dst._np(), p)
    res = np.where(mask, new, old)
    close_psum_group(pred)
    if isinstance(src, NkiTensor):
        close_psum_group(src)
    write(ctx, dst, res.reshape(dst.shape))


#: ``nonzero_with_count`` runs on each GpSimd core's first partition: every 16th one.
_CORE_STRIDE = 16


@instruction(
    family="selection and top-8",
    engines="gpsimd",
    source=page("nonzero_with_count") + " (Supported engines: GpSimd)",
    rules=(
        "trn2+; src and dst in SBUF with the same partitions; dst has one more element per partition than src",
        "only partitions 0, 16, …, 112 are read and written; dst's other partitions keep their values",
        "index_offset and padding_val are ints; every index, the padding and the count must fit dst's dtype exactly",
    ),
    example="nisa.nonzero_with_count(dst=idx, src=mask, index_offset=t * 512, padding_val=-1)",
    nc_version=3,
    cost="gpsimd_pass",
)
def nonzero_with_count(dst: Any, src: Any, index_offset: Any = 0, padding_val: Any = -1, name: Any = None) -> None:
    """Indices of the nonzero elements of each GpSimd core's first partition, then padding, then their count, on GpSimd.

    For ``src`` row ``[0, 1, 1, 0]`` with ``index_offset=16``, ``padding_val=-1`` the dst row is
    ``[17, 18, -1, -1, 2]``: the positions (plus ``index_offset``, for a tile of a longer array),
    ``padding_val`` in the unused slots and the count last. Each of the 8 GpSimd cores reads and
    writes only its first partition (0, 16, …, 112).
    """
    ctx = current()
    op = "nonzero_with_count"
    _require_gen(ctx, op)
    src = check_compute_operand(ctx, op, "src", src, "gpsimd")
    dst = check_compute_operand(ctx, op, "dst", dst, "gpsimd")
    _same_partitions(op, [("src", src), ("dst", dst)])
    t = _epp(src)
    if _epp(dst) != t + 1:
        raise NkiValidationError(
            "err_nonzero_dst_shape",
            f"{op} dst must hold one more element per partition than src (the count goes last): {t + 1} for {_shape(src, 'src')}, got {_shape(dst, 'dst')}",
        )
    for role, value in (("index_offset", index_offset), ("padding_val", padding_val)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise NkiTypeError("err_nonzero_operand", f"{op} {role} must be an int, got {value!r}")
    lo, hi = min(int(index_offset), int(padding_val), 0), max(int(index_offset) + t - 1, int(padding_val), t)
    if not _exact_in(dst.dtype, lo, hi):
        raise NkiValidationError(
            "err_nonzero_dst_dtype",
            f"{op} dst dtype {dt.dtype_name(dst.dtype)} cannot hold every value it may receive ([{lo}, {hi}]: indices from "
            f"index_offset={int(index_offset)}, padding_val={int(padding_val)}, a count up to {t}); use an int32 dst",
        )
    record(ctx, op, "gpsimd", [("src", src)], [("dst", dst)])
    if not ctx.compute:
        return
    p = _pp(src)
    x = _rows(f32(src), p)
    out = _rows(dst._np(), p).astype(np.int64)
    for row in range(0, p, _CORE_STRIDE):
        found = np.flatnonzero(x[row])
        out[row, : found.size] = found + int(index_offset)
        out[row, found.size : t] = int(padding_val)
        out[row, t] = found.size
    write(ctx, dst, out.reshape(dst.shape))


def _exact_in(dtype: np.dtype, lo: int, hi: int) -> bool:
    """Whether every integer in ``[lo, hi]`` is stored exactly in ``dtype``."""
    if dt.is_int(dtype):
        info = np.iinfo(dtype)
        return dtype != dt.bool_ and info.min <= lo and hi <= info.max
    return max(-lo, hi) <= 2 ** (int(ml_dtypes.finfo(dtype).nmant) + 1)


_TOP8_MIN, _TOP8_MAX = 8, 16384


def _top8_source(op: str, role: str, t: NkiTensor, lower: int) -> None:
    n = _epp(t)
    if not lower <= n <= _TOP8_MAX:
        raise NkiValidationError(
            "err_top8_free_size",
            f"{op} {role} must have between {lower} and {_TOP8_MAX} elements per partition, got {n} ({_shape(t, role)})",
        )


@instruction(
    family="selection and top-8",
    engines="vector",
    source=ISA_INDEX,
    attrs=NoAttrs,
    rules=("src has 8 to 16384 elements per partition; dst is [P, 8]",),
    example="nisa.max8(dst=top, src=scores)",
)
def max8(dst: Any, src: Any, name: Any = None) -> None:
    """The 8 largest values of each partition of ``src``, in descending order, on VectorE.

    ``src`` has 8 to 16 384 elements per partition (its free dims are flattened); ``dst`` is
    ``[P, 8]``. Values are compared in fp32 and converted to ``dst.dtype``.
    """
    ctx = current()
    op = "max8"
    src = check_compute_operand(ctx, op, "src", src, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    _same_partitions(op, [("src", src), ("dst", dst)])
    _top8_source(op, "src", src, _TOP8_MIN)
    if _epp(dst) != 8:
        raise NkiValidationError("err_top8_dst_shape", f"{op} dst must be [P, 8] (8 elements per partition), got {_shape(dst, 'dst')}")
    record(ctx, op, "vector", [("src", src)], [("dst", dst)])
    if not ctx.compute:
        return
    neg = -_rows(f32(src), _pp(src))
    top = -np.sort(np.partition(neg, 7, axis=1)[:, :8], axis=1)
    close_psum_group(src)
    write(ctx, dst, top.reshape(dst.shape))


def _match_positions(x: np.ndarray, vals: np.ndarray, reverse: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per partition, the data position each of the 8 ``vals`` matches, and whether it matched.

    A value occurring several times in ``vals`` takes successive occurrences in ``x``: in
    ``vals`` order (``nc_find_index8``) or in reverse ``vals`` order (``nc_match_replace8``).
    """
    p = x.shape[0]
    pos = np.zeros((p, 8), dtype=np.int64)
    found = np.zeros((p, 8), dtype=bool)
    same = vals[:, :, None] == vals[:, None, :]  # (P, 8, 8)
    order = np.triu(np.ones((8, 8), dtype=bool), 1) if reverse else np.tril(np.ones((8, 8), dtype=bool), -1)
    rank = (same & order[None]).sum(axis=2)  # earlier (or later) equal vals claim earlier occurrences
    for j in range(8):
        hit = x == vals[:, j : j + 1]
        nth = hit & (np.cumsum(hit, axis=1) == rank[:, j : j + 1] + 1)
        found[:, j] = nth.any(axis=1)
        pos[:, j] = nth.argmax(axis=1)
    return pos, found


def _vals_operand(ctx: KernelContext, op: str, vals: Any, p: int) -> NkiTensor:
    v = check_compute_operand(ctx, op, "vals", vals, "vector")
    if _pp(v) != p or _epp(v) != 8:
        raise NkiValidationError(
            "err_top8_vals_shape", f"{op} vals must hold exactly 8 elements in each of the {p} partitions, got {_shape(v, 'vals')}"
        )
    return v


@instruction(
    family="selection and top-8",
    engines="vector",
    source=ISA_INDEX,
    attrs=NoAttrs,
    rules=("vals is [P, 8] (max8's output); dst is [P, 8] uint16 or uint32",),
    example="nisa.nc_find_index8(dst=idx, data=scores, vals=top)",
)
def nc_find_index8(dst: Any, data: Any, vals: Any, name: Any = None) -> None:
    """Index of the first occurrence of each of the 8 ``vals`` in each partition of ``data`` (VectorE).

    ``data`` has 8 to 16 384 elements per partition (free dims flattened, indices from 0);
    ``vals`` and ``dst`` hold 8 per partition and ``dst`` is uint16 or uint32. A value repeated in
    ``vals`` is paired with successive occurrences in ascending order. A value absent from the
    partition yields the all-ones sentinel (0xFFFFFFFF / 0xFFFF).
    """
    ctx = current()
    op = "nc_find_index8"
    data = check_compute_operand(ctx, op, "data", data, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    p = _pp(data)
    v = _vals_operand(ctx, op, vals, p)
    _same_partitions(op, [("data", data), ("dst", dst)])
    _top8_source(op, "data", data, _TOP8_MIN)
    if _epp(dst) != 8:
        raise NkiValidationError("err_top8_dst_shape", f"{op} dst must be [P, 8] (8 elements per partition), got {_shape(dst, 'dst')}")
    if dst.dtype not in _INDEX_DTYPES:
        raise NkiValidationError("err_index_dtype", f"{op} dst must be uint16 or uint32, got {dt.dtype_name(dst.dtype)}")
    record(ctx, op, "vector", [("data", data), ("vals", v)], [("dst", dst)])
    if not ctx.compute:
        return
    pos, found = _match_positions(_rows(f32(data), p), _rows(f32(v), p), reverse=False)
    idx = np.where(found, pos, np.iinfo(dst.dtype).max)
    close_psum_group(data)
    close_psum_group(v)
    write(ctx, dst, idx.astype(dst.dtype).reshape(dst.shape))


@instruction(
    family="selection and top-8",
    engines="vector",
    source=ISA_INDEX,
    attrs=NoAttrs,
    rules=("vals is [P, 8]; dst has data's shape; dst_idx, if given, is [P, 8] uint16 or uint32",),
    example="nisa.nc_match_replace8(dst=rest, data=scores, vals=top, imm=-3e38)",
)
def nc_match_replace8(dst: Any, data: Any, vals: Any, imm: Any, dst_idx: Any = None, name: Any = None) -> None:
    """Replace the first occurrence of each of the 8 ``vals`` in each partition of ``data`` with ``imm`` (VectorE).

    ``dst`` gets ``data`` (same elements per partition, at most 16 384, free dims flattened)
    with the matched positions set to ``imm``; the optional uint16/uint32 ``[P, 8]`` tile
    ``dst_idx`` gets the matched positions. A value repeated in ``vals`` is paired with
    successive occurrences taking ``vals`` in reverse order (AWS's documented tie-break, the
    opposite of ``nc_find_index8``). A value absent from the partition replaces nothing, gets
    the all-ones sentinel in ``dst_idx`` and raises a warning (undefined on hardware).
    ``dst`` may be ``data`` itself.
    """
    ctx = current()
    op = "nc_match_replace8"
    data = check_compute_operand(ctx, op, "data", data, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    p = _pp(data)
    v = _vals_operand(ctx, op, vals, p)
    check_same_shape_pp(op, [("data", data), ("dst", dst)])
    _top8_source(op, "data", data, 1)
    if not isinstance(imm, (int, float, np.integer, np.floating)):
        raise NkiTypeError("err_operand_type", f"{op} imm must be a number, got {type(imm).__name__}")
    writes = [("dst", dst)]
    if dst_idx is not None:
        di = check_compute_operand(ctx, op, "dst_idx", dst_idx, "vector")
        if _pp(di) != p or _epp(di) != 8:
            raise NkiValidationError("err_top8_dst_shape", f"{op} dst_idx must be [{p}, 8], got {_shape(di, 'dst_idx')}")
        if di.dtype not in _INDEX_DTYPES:
            raise NkiValidationError("err_index_dtype", f"{op} dst_idx must be uint16 or uint32, got {dt.dtype_name(di.dtype)}")
        writes.append(("dst_idx", di))
    record(ctx, op, "vector", [("data", data), ("vals", v)], writes)
    if not ctx.compute:
        return
    x = _rows(f32(data), p)
    pos, found = _match_positions(x, _rows(f32(v), p), reverse=True)
    if not found.all():
        where = np.argwhere(~found)[0]
        warn(f"{op}: vals[{where[0]}, {where[1]}] does not occur in data partition {where[0]}; hardware behaviour is undefined")
    out = x.copy()
    rows = np.nonzero(found)[0]
    out[rows, pos[found]] = np.float32(imm)
    close_psum_group(data)
    close_psum_group(v)
    write(ctx, dst, out.reshape(dst.shape))
    if dst_idx is not None:
        di = writes[1][1]
        write(ctx, di, np.where(found, pos, np.iinfo(di.dtype).max).astype(di.dtype).reshape(di.shape))
