"""``nki.isa``: the emulated instruction set (0.3+ destination-first signatures).

Each function validates its operands with the hardware rules of §3 of the reference,
records one instruction and, unless the run is timing-only, computes the result with
NumPy in fp32 (PE accumulates in fp32; Vector/Scalar/GpSimd compute in fp32) and
stores it with the destination dtype's rounding.
"""

from __future__ import annotations

import enum
import inspect
import math
from typing import Any

import numpy as np

from . import dtypes as dt
from . import engines as _engines
from .alu import act_func, alu_op
from .errors import NkiOutOfBoundsError, NkiTypeError, NkiValidationError, warn
from .memory import LazyCopy, current
from .ops import (
    ANY,
    CHECKED_GEOMETRIES_MAX,
    F32,
    MatmulGroup,
    flush_matmul_group,
    HBM,
    ON_CHIP,
    axis_tuple,
    SBUF_ONLY,
    check_act_range,
    check_compute_operand,
    check_memory,
    check_partitions,
    check_same_shape_pp,
    close_psum_group,
    f32,
    not_emulated,
    record,
    require_tensor,
    scalar_or_column,
    mark_written,
    write,
)
from .tensor import NkiTensor


class engine(enum.IntEnum):
    """Compute engines (``nisa.engine``)."""

    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


class reduce_cmd(enum.IntEnum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(enum.IntEnum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


_HWDGE = int(dge_mode.hwdge)


class oob_mode(enum.IntEnum):
    error = 0
    skip = 1


class nc_version(enum.IntEnum):
    gen2 = 2
    gen3 = 3
    gen4 = 4


class matmul_perf_mode(enum.Enum):
    none = "none"
    double_row = "double_row"


class dma_engine(enum.IntEnum):
    dma = 1
    gpsimd_dma = 2


_engines._UNKNOWN = engine.unknown

# Legacy aliases (0.1 kernels write nisa.vector_engine etc.)
tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown


def _pf(a: np.ndarray, p: int) -> np.ndarray:
    """Reshape to (partitions, elements-per-partition)."""
    shape = a.shape
    return a if len(shape) == 2 and shape[0] == p else a.reshape(p, -1)


def _p(t: NkiTensor) -> int:
    shape = t._shape
    return shape[0] if shape else 1


def get_nc_version() -> nc_version:
    """The NeuronCore generation of the current target (gen2 = trn1, gen3 = trn2, gen4 = trn3)."""
    return nc_version(current().target.nc_version)


# --------------------------------------------------------------------------------------------
# Data movement
# --------------------------------------------------------------------------------------------
def _check_indirect(t: NkiTensor, mode: Any) -> None:
    if t._addr is None:
        return
    total = t._storage_elems()
    bad = (t._addr < 0) | (t._addr >= total)
    if bad.any():
        if int(getattr(mode, "value", mode)) == oob_mode.skip:
            t._valid = ~bad
            t._meta = None
            return
        first = int(t._addr[bad].reshape(-1)[0])
        raise NkiOutOfBoundsError(
            "err_dynamic_out_of_bound",
            f"dynamic access to `{t.name}` at element {first} is outside its {total} elements (pass oob_mode=nisa.oob_mode.skip to skip such rows)",
        )


def _saturate_int(vals: np.ndarray, d: np.dtype) -> np.ndarray:
    """Integer → integer conversion keeps values exact but saturates like the float → int path (no wrap-around)."""
    if d == dt.bool_:
        return vals
    info = np.iinfo(d)
    return np.clip(vals.astype(np.int64), info.min, info.max)


def dma_copy(dst: Any, src: Any, priority: Any = None, oob_mode: Any = oob_mode.error, dge_mode: Any = dge_mode.unknown,
             engine: Any = engine.unknown, name: Any = None) -> None:
    """Copy ``src`` to ``dst`` through a DMA queue (HBM↔SBUF, SBUF↔SBUF, HBM↔HBM); casts via fp32."""
    ctx = current()
    op = "dma_copy"
    dst = require_tensor(op, "dst", dst)
    src = require_tensor(op, "src", src)
    allowed = SBUF_ONLY | HBM
    check_memory(op, "src", src, allowed)
    check_memory(op, "dst", dst, allowed)
    check_partitions(ctx, op, "src", src, start_rule=False)
    check_partitions(ctx, op, "dst", dst, start_rule=False)
    if src.size != dst.size:
        raise NkiValidationError(
            "err_dma_element_count",
            f"dma_copy src and dst element counts differ: src[{', '.join(map(str, src.shape))}] has {src.size}, "
            f"dst[{', '.join(map(str, dst.shape))}] has {dst.size}",
        )
    mode = int(getattr(dge_mode, "value", dge_mode))
    hwdge = mode == _HWDGE
    trigger = _engines.dge_trigger(engine, hwdge)
    if hwdge:
        _check_hwdge(ctx, src, dst)
    _check_indirect(src, oob_mode)
    _check_indirect(dst, oob_mode)
    attrs: dict[str, Any] = {} if ctx.trace is None else {"dge_mode": mode, "dge_trigger": trigger}
    record(ctx, op, "dma", (("src", src),), (("dst", dst),), **attrs)
    if not ctx.compute or _deferred(dst, src):
        return
    vals = src._np()
    if src.dtype != dst.dtype and not (dt.is_int(src.dtype) and dt.is_int(dst.dtype)):
        vals = vals.astype(np.float32)
    elif src.dtype != dst.dtype:
        vals = _saturate_int(vals, dst.dtype)
    if src._valid is not None:  # oob_mode=skip: the skipped source elements leave dst untouched
        vals = np.where(src._valid, vals, dst._np().reshape(src.shape))
    write(ctx, dst, vals.reshape(dst.shape))


def _check_hwdge(ctx: Any, src: NkiTensor, dst: NkiTensor) -> None:
    """Hardware DGE's rules: NeuronCore-v3 or newer, no casting, no gather/scatter (the docs of ``dma_copy`` and ``nki-dge``).

    Why here: hwdge is priced with its ~600 ns fixed cost instead of ~1.3 µs, so a copy the
    hardware DGE cannot do must not get that price.
    """
    if ctx.target.nc_version < 3:
        raise NkiValidationError(
            "err_dma_hwdge_gen", f"dma_copy dge_mode=hwdge needs trn2 or later (hardware DGE is NeuronCore-v3+), not {ctx.target.name}; "
            "use dge_mode=nisa.dge_mode.swdge or leave dge_mode unset"
        )
    if src.dtype != dst.dtype:
        raise NkiValidationError(
            "err_dma_hwdge_dtype", f"dma_copy with dge_mode=hwdge requires src.dtype == dst.dtype, got {dt.dtype_name(src.dtype)} and {dt.dtype_name(dst.dtype)}"
        )
    for role, t in (("src", src), ("dst", dst)):
        if t._addr is not None:
            raise NkiValidationError(
                "err_dma_hwdge_indirect", f"dma_copy with dge_mode=hwdge cannot gather or scatter, but `{role}` is a vector-indirect view of "
                f"`{t.name}`; hardware DGE has no indirect mode: use dge_mode=nisa.dge_mode.swdge or leave dge_mode unset"
            )


def _deferred(dst: NkiTensor, src: NkiTensor) -> bool:
    """Leave a plain HBM → SBUF copy pending in fresh SBUF (see :meth:`Alloc.defer`); ``True`` if so."""
    a, sa = dst._a, src._a
    if not (a.fresh and a.memory == "sbuf" and not sa.on_chip and not sa.fresh) or dst._addr is not None or src._addr is not None:
        return False
    if not (dst._dtype == a.dtype == src._dtype == sa.dtype):
        return False
    source = src._np().view()
    try:
        source.shape = dst._shape  # raises rather than copy
    except AttributeError:
        return False
    if not a.defer(LazyCopy(dst._offset, dst._shape, dst._strides, dst.region(), source, sa), sa):
        return False
    mark_written(dst)
    return True


def dma_transpose(dst: Any, src: Any, axes: Any = None, priority: Any = None, dge_mode: Any = dge_mode.unknown,
                  oob_mode: Any = oob_mode.error, name: Any = None) -> None:
    """Transpose while copying by DMA (axes (1,0), (2,1,0) or (3,1,2,0)); dst must be in SBUF."""
    ctx = current()
    op = "dma_transpose"
    dst = require_tensor(op, "dst", dst)
    src = require_tensor(op, "src", src)
    check_memory(op, "src", src, SBUF_ONLY | HBM)
    check_memory(op, "dst", dst, SBUF_ONLY)
    check_partitions(ctx, op, "dst", dst, start_rule=False)
    if dst.ndim != src.ndim:
        raise NkiValidationError("err_dma_transpose_rank", f"dma_transpose requires dst rank == src rank, got {dst.ndim} and {src.ndim}")
    axes = tuple(axes) if axes is not None else tuple(reversed(range(src.ndim)))
    if axes not in ((1, 0), (2, 1, 0), (3, 1, 2, 0)):
        raise NkiValidationError("err_dma_transpose_axes", f"dma_transpose axes {axes} not supported; use (1, 0), (2, 1, 0) or (3, 1, 2, 0)")
    expect = tuple(src.shape[a] for a in axes)
    if tuple(dst.shape) != expect:
        raise NkiValidationError("err_dma_transpose_shape", f"dma_transpose dst shape {list(dst.shape)} must be {list(expect)} for src {list(src.shape)} and axes {axes}")
    record(ctx, op, "dma", [("src", src)], [("dst", dst)], axes=axes)
    if ctx.compute:
        write(ctx, dst, np.transpose(src._np(), axes))


def tensor_copy(dst: Any, src: Any, engine: Any = engine.unknown, name: Any = None, dtype: Any = None) -> None:
    """Copy on a compute engine (Vector by default); on-chip to on-chip, with dtype conversion.

    ``dtype`` is NKI 0.2's output-cast keyword (removed in 0.3; nki-samples HEAD's matmul
    tutorial still passes it): the copied values are rounded to it before ``dst`` stores them,
    with a warning, so a kernel written for 0.2 runs and keeps its rounding.
    """
    ctx = current()
    op = "tensor_copy"
    eng = _engines.select(op, engine, "vector")
    src = check_compute_operand(ctx, op, "src", src, eng)
    dst = check_compute_operand(ctx, op, "dst", dst, eng)
    check_same_shape_pp(op, [("dst", dst), ("src", src)])
    cast = None if dtype is None else dt.as_dtype(dtype)
    if cast is not None:
        warn(f"tensor_copy(dtype={dt.dtype_name(cast)}) is NKI 0.2 API, removed in 0.3: values are rounded to it, then stored as dst's {dt.dtype_name(dst.dtype)}")
    record(ctx, op, eng, [("src", src)], [("dst", dst)])
    if not ctx.compute:
        return
    vals = src._np()
    if not (dt.is_int(src.dtype) and dt.is_int(dst.dtype)) and vals.dtype != np.float32:
        vals = vals.astype(np.float32)
    elif src.dtype != dst.dtype and dt.is_int(src.dtype) and dt.is_int(dst.dtype):
        vals = _saturate_int(vals, dst.dtype)
    if cast is not None and cast != dst.dtype:
        vals = dt.store_cast(vals, cast)
    close_psum_group(src)
    write(ctx, dst, _pf(vals, _p(src)).reshape(dst.shape))


_copy_sig = inspect.signature(tensor_copy)
# help() and the models' cheat sheet show the 0.3 signature; dtype= is only tolerated, for 0.2 kernels
tensor_copy.__signature__ = _copy_sig.replace(parameters=[p for p in _copy_sig.parameters.values() if p.name != "dtype"])  # type: ignore[attr-defined]


def memset(dst: Any, value: Any, engine: Any = engine.unknown, name: Any = None) -> None:
    """Fill ``dst`` with ``value``; the value's type must match the dst dtype (int for int tensors)."""
    ctx = current()
    op = "memset"
    eng = _engines.select(op, engine, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, eng)
    if dt.is_int(dst.dtype) and dst.dtype != dt.bool_ and isinstance(value, (float, np.floating)) and not float(value).is_integer():
        raise NkiTypeError("err_memset_value_type", f"memset value {value!r} does not match dst dtype {dt.dtype_name(dst.dtype)}; pass an int")
    if not isinstance(value, (int, float, bool, np.integer, np.floating)):
        raise NkiTypeError("err_memset_value_type", f"memset value must be a number, got {type(value).__name__}")
    if dt.is_int(dst.dtype) and dst.dtype != dt.bool_ and not np.iinfo(dst.dtype).min <= value <= np.iinfo(dst.dtype).max:
        info = np.iinfo(dst.dtype)
        raise NkiTypeError(
            "err_memset_value_range", f"memset value {value!r} is outside the range [{info.min}, {info.max}] of dst dtype {dt.dtype_name(dst.dtype)}"
        )
    record(ctx, op, eng, [], [("dst", dst)], value=float(value))
    if not ctx.compute:
        return
    stored = dt.store_cast(np.asarray(value, dtype=np.float64 if not dt.is_int(dst.dtype) else np.int64), dst.dtype)
    a = dst._a
    if dst._dtype == a.dtype and dst.covers_storage():
        a.refill(stored[()])  # the whole tile: kept pending, so whatever overwrites it never pays for it
        mark_written(dst)
    else:
        write(ctx, dst, stored)


def _affine_values(op: str, dst: NkiTensor, pattern: Any, offset: Any, channel_multiplier: Any) -> np.ndarray:
    pat = [(int(s), int(n)) for s, n in pattern]
    if not 1 <= len(pat) <= 4:
        raise NkiValidationError("err_pattern_rank", f"{op} pattern must have 1 to 4 [step, num] pairs, got {len(pat)}")
    epp = dst.size // max(_p(dst), 1)
    if math.prod(n for _, n in pat) != epp:
        raise NkiValidationError(
            "err_pattern_size", f"{op} pattern {[list(x) for x in pat]} covers {math.prod(n for _, n in pat)} elements per partition but dst has {epp}"
        )
    vals = np.full((_p(dst),) + tuple(n for _, n in pat), int(offset), dtype=np.int64)
    vals += (np.arange(_p(dst), dtype=np.int64) * int(channel_multiplier)).reshape((-1,) + (1,) * len(pat))
    for k, (s, n) in enumerate(pat):
        shp = [1] * (len(pat) + 1)
        shp[k + 1] = n
        vals += (np.arange(n, dtype=np.int64) * s).reshape(shp)
    return vals


def iota(dst: Any, pattern: Any, offset: Any = 0, channel_multiplier: Any = 0, name: Any = None) -> None:
    """``dst[p, i…] = offset + p·channel_multiplier + Σ step_k·i_k`` on GpSimd."""
    ctx = current()
    op = "iota"
    dst = check_compute_operand(ctx, op, "dst", dst, "gpsimd")
    vals = _affine_values(op, dst, pattern, offset, channel_multiplier)
    record(ctx, op, "gpsimd", [], [("dst", dst)])
    if ctx.compute:
        write(ctx, dst, vals.reshape(dst.shape) if dt.is_int(dst.dtype) else vals.reshape(dst.shape).astype(np.float32))


def affine_select(dst: Any, pattern: Any, channel_multiplier: Any, on_true_tile: Any, on_false_value: Any,
                  cmp_op: Any = None, offset: Any = 0, name: Any = None) -> None:
    """``dst = on_true_tile where cmp_op(affine, 0) else on_false_value`` with iota's affine form (GpSimd)."""
    from . import language as nl

    ctx = current()
    op = "affine_select"
    dst = check_compute_operand(ctx, op, "dst", dst, "gpsimd")
    src = check_compute_operand(ctx, op, "on_true_tile", on_true_tile, "gpsimd")
    check_same_shape_pp(op, [("dst", dst), ("on_true_tile", src)])
    cmp = alu_op(cmp_op if cmp_op is not None else nl.equal, op)
    vals = _affine_values(op, dst, pattern, offset, channel_multiplier)
    record(ctx, op, "gpsimd", [("on_true_tile", src)], [("dst", dst)])
    if ctx.compute:
        mask = cmp.fn(vals.astype(np.float64), np.zeros(1)) != 0
        out = np.where(mask.reshape(_p(dst), -1), _pf(f32(src), _p(src)), np.float32(on_false_value))
        write(ctx, dst, out.reshape(dst.shape))


# --------------------------------------------------------------------------------------------
# Vector / Scalar / GpSimd compute
# --------------------------------------------------------------------------------------------
_INT32S = frozenset({dt.int32, dt.uint32})  # (a set: one hash per tile instead of dtype comparisons)


def _alu_engine(op: str, alu: Any, eng: Any, *tiles: NkiTensor) -> str:
    """The engine of an ALU instruction: the one asked for, else GpSimd for power and 32-bit integer add/multiply, else VectorE."""
    default = "vector"
    if alu.name == "power" or not _INT32S.isdisjoint([t._dtype for t in tiles]):
        default = "gpsimd" if alu.kind == "arith" and alu.name in ("add", "multiply", "power") else "vector"
    return _engines.select(op, eng, default)


def _apply(alu: Any, a: np.ndarray, b: Any, reverse: bool = False) -> np.ndarray:
    return alu.fn(b, a) if reverse else alu.fn(a, b)


def _values(t: NkiTensor, alu_kind: str) -> np.ndarray:
    """An ALU input: int64 for bitwise ops, else fp32. Where no store has written any of the
    view's elements since a whole-tile memset (or ever), that fill broadcast to its shape: an
    accumulator zeroed and then added into is read without being zeroed in memory first."""
    if alu_kind == "bitvec":
        if not dt.is_int(t.dtype):
            raise NkiTypeError("err_bitvec_dtype", f"bitwise operations need integer tensors, `{t.name}` is {dt.dtype_name(t.dtype)}")
        return t._np().astype(np.int64)
    a = t._a
    if a.fresh and t._addr is None and t._dtype == a.dtype:
        value = a.unwritten(t._offset, t._shape, t._strides)
        if value is not None:
            return np.broadcast_to(np.float32(value), t._shape)
    return f32(t)


def tensor_tensor(dst: Any, data1: Any, data2: Any, op: Any, engine: Any = engine.unknown, name: Any = None) -> None:
    """Element-wise ``dst = op(data1, data2)``; same partitions and elements per partition, no broadcasting."""
    ctx = current()
    opn = "tensor_tensor"
    alu = alu_op(op, opn)
    d1 = require_tensor(opn, "data1", data1)
    d2 = require_tensor(opn, "data2", data2)
    eng = _alu_engine(opn, alu, engine, d1, d2)
    d1 = check_compute_operand(ctx, opn, "data1", d1, eng)
    d2 = check_compute_operand(ctx, opn, "data2", d2, eng)
    dst = check_compute_operand(ctx, opn, "dst", dst, eng)
    if d1._a.memory == "psum" and d2._a.memory == "psum":
        raise NkiValidationError("err_tensor_tensor_both_psum", "tensor_tensor data1 and data2 cannot both be in PSUM")
    check_same_shape_pp(opn, [("data1", d1), ("data2", d2), ("dst", dst)])
    record(ctx, opn, eng, [("data1", d1), ("data2", d2)], [("dst", dst)], alu=alu.name)
    if not ctx.compute:
        return
    p = _p(d1)
    x, y = _pf(_values(d1, alu.kind), p), _pf(_values(d2, alu.kind), p)
    out = _in_place(dst, p) if alu.fn in _IN_PLACE_UFUNCS else None
    if out is not None:  # fp32 dst: compute straight into it (NumPy copies inputs that overlap it)
        alu.fn(x, y, out=out)
        close_psum_group(d1)
        close_psum_group(d2)
        mark_written(dst)
        return
    res = alu.fn(x, y)
    close_psum_group(d1)
    close_psum_group(d2)
    write(ctx, dst, res.reshape(dst.shape))


#: Element-wise ops whose fp32 result NumPy can write into the destination itself.
_IN_PLACE_UFUNCS = frozenset({np.add, np.subtract, np.multiply, np.maximum, np.minimum})


def _in_place(dst: NkiTensor, p: int) -> np.ndarray | None:
    """``dst``'s numbers as a writable ``(partitions, free)`` view when a result may go there directly.

    Only for fp32 storage seen through a direct view of its own dtype, where the store would be
    a plain copy; ``None`` when reshaping would need a copy (then it goes through ``write``).
    """
    a = dst._a
    if a.pending or dst._addr is not None or not (dst._dtype is F32 or dst._dtype == F32) or a.dtype != F32:
        return None
    if a.fresh:  # the result covers dst (the inputs are read already)
        dst._claim()
    v = dst._target()
    shape = v.shape
    if len(shape) == 2 and shape[0] == p:
        return v
    view = v.view()
    try:
        view.shape = (p, -1)  # raises rather than copy
    except AttributeError:
        return None
    return view


_SCALAR_TS_OK = {("multiply", "add"), ("multiply", None), ("add", None)}


def tensor_scalar(dst: Any, data: Any, op0: Any, operand0: Any, reverse0: bool = False, op1: Any = None, operand1: Any = None,
                  reverse1: bool = False, engine: Any = engine.unknown, name: Any = None) -> None:
    """``dst = (data op0 operand0) op1 operand1``; operands are scalars or ``(P, 1)`` fp32 tiles."""
    ctx = current()
    opn = "tensor_scalar"
    a0 = alu_op(op0, opn)
    a1 = alu_op(op1, opn) if op1 is not None else None
    if (op1 is None) != (operand1 is None):
        raise NkiTypeError("err_tensor_scalar_op1", "tensor_scalar op1 and operand1 must be given together (op1=None goes with operand1=None)")
    if a1 is not None and (a0.kind == "bitvec") != (a1.kind == "bitvec"):
        raise NkiTypeError("err_tensor_scalar_op_class", f"tensor_scalar op0 ({a0.name}) and op1 ({a1.name}) must both be arithmetic or both bitvec")
    data = require_tensor(opn, "data", data)
    eng = _alu_engine(opn, a0, engine, data)
    if eng == "scalar" and ctx.target.nc_version == 3 and (a0.name, a1.name if a1 else None) not in _SCALAR_TS_OK:
        raise NkiValidationError(
            "err_tensor_scalar_scalar_engine",
            f"tensor_scalar on the scalar engine of trn2 supports only (multiply, add), (multiply, None) and (add, None), got ({a0.name}, {a1.name if a1 else None})",
        )
    data = check_compute_operand(ctx, opn, "data", data, eng)
    dst = check_compute_operand(ctx, opn, "dst", dst, eng)
    check_same_shape_pp(opn, [("data", data), ("dst", dst)])
    reads = [("data", data)] + [(r, v) for r, v in (("operand0", operand0), ("operand1", operand1)) if isinstance(v, NkiTensor)]
    fp32_only = a0.kind != "bitvec"
    c0 = scalar_or_column(opn, "operand0", operand0, data, fp32_only)
    c1 = scalar_or_column(opn, "operand1", operand1, data, fp32_only) if a1 is not None else None
    record(ctx, opn, eng, reads, [("dst", dst)], alu=(a0.name, a1.name if a1 else None))
    if not ctx.compute:
        return
    x = _values(data, a0.kind)
    if a0.kind == "bitvec":
        c0 = np.asarray(c0).astype(np.int64)
        c1 = None if c1 is None else np.asarray(c1).astype(np.int64)
    r = _apply(a0, x, c0, reverse0)
    if a1 is not None:
        r = _apply(a1, r, c1, reverse1)
    close_psum_group(data)
    write(ctx, dst, np.broadcast_to(r, data.shape).reshape(dst.shape))


def scalar_tensor_tensor(dst: Any, data: Any, op0: Any, operand0: Any, op1: Any, operand1: Any, reverse0: bool = False,
                         reverse1: bool = False, name: Any = None) -> None:
    """``dst = (data op0 operand0) op1 operand1`` where operand1 is a tensor of data's shape."""
    ctx = current()
    opn = "scalar_tensor_tensor"
    a0, a1 = alu_op(op0, opn), alu_op(op1, opn)
    if a0.kind == "bitvec" or a1.kind == "bitvec":
        raise NkiTypeError("err_stt_arith_only", "scalar_tensor_tensor supports arithmetic operations only")
    data = check_compute_operand(ctx, opn, "data", data, "vector")
    o1 = check_compute_operand(ctx, opn, "operand1", operand1, "vector")
    dst = check_compute_operand(ctx, opn, "dst", dst, "vector")
    if data._a.memory == "psum" and o1._a.memory == "psum":
        raise NkiValidationError("err_stt_both_psum", "scalar_tensor_tensor data and operand1 cannot both be in PSUM")
    check_same_shape_pp(opn, [("data", data), ("operand1", o1), ("dst", dst)])
    c0 = scalar_or_column(opn, "operand0", operand0, data)
    reads = [("data", data), ("operand1", o1)] + ([("operand0", operand0)] if isinstance(operand0, NkiTensor) else [])
    record(ctx, opn, "vector", reads, [("dst", dst)], alu=(a0.name, a1.name))
    if not ctx.compute:
        return
    r = _apply(a0, f32(data), c0, reverse0)
    r = _apply(a1, _pf(r, _p(data)), _pf(f32(o1), _p(o1)), reverse1)
    write(ctx, dst, r.reshape(dst.shape))


def _act_scale_bias(ctx: Any, opn: str, data: NkiTensor, scale: Any, bias: Any) -> tuple[Any, Any, list[tuple[str, NkiTensor]]]:
    reads: list[tuple[str, NkiTensor]] = []
    if isinstance(scale, NkiTensor):
        if scale.dtype != dt.float32:
            raise NkiValidationError(
                "err_activation_scale_invalid_type", "Scale parameter of activation or activation_reduce must be a scalar or vector of type float32."
            )
        if scale.shape[0] != _p(data) or scale.size != _p(data):
            raise NkiValidationError(
                "err_activation_scale_scalar_or_vector",
                "Scale parameter of activation must be either a scalar value or a 1D vector spanning the partition dimension.",
            )
        reads.append(("scale", scale))
    elif not isinstance(scale, (int, float, np.integer, np.floating)):
        raise NkiValidationError(
            "err_activation_scale_invalid_type", "Scale parameter of activation or activation_reduce must be a scalar or vector of type float32."
        )
    if isinstance(bias, NkiTensor):
        if bias.dtype not in (dt.float32, dt.float16, dt.bfloat16):
            raise NkiValidationError(
                "err_activation_bias_invalid_type", "Bias parameter of activation or activation_reduce must be a vector of type float32, float16, or bfloat16."
            )
        if bias.shape[0] != _p(data) or bias.size != _p(data):
            raise NkiValidationError(
                "err_activation_bias_shape", f"bias shape ({'x'.join(map(str, bias.shape))}) must be Nx1 with N = {_p(data)} partitions"
            )
        check_memory(opn, "bias", bias, ON_CHIP)
        reads.append(("bias", bias))
    elif bias is not None:
        if not isinstance(bias, (int, float, np.integer, np.floating)):
            raise NkiValidationError(
                "err_activation_bias_invalid_type", "Bias parameter of activation or activation_reduce must be a vector of type float32, float16, or bfloat16."
            )
        if not ctx.target.scalar_bias_ok:
            raise NkiValidationError(
                "err_activation_bias_invalid_type", f"a scalar bias is only supported on trn2 and later; on {ctx.target.name} pass a [{_p(data)}, 1] vector"
            )
    if not ctx.compute:
        return 1.0, 0.0, reads
    s = scalar_or_column(opn, "scale", scale, data) if isinstance(scale, NkiTensor) else np.float32(scale)
    if isinstance(bias, NkiTensor):
        b = f32(bias).reshape((_p(data),) + (1,) * (data.ndim - 1))
    else:
        b = np.float32(0.0 if bias is None else bias)
    return s, b, reads


def _activation(opn: str, dst: Any, op: Any, data: Any, bias: Any, scale: Any, reduce_op: Any, reduce_res: Any) -> None:
    ctx = current()
    func = act_func(op, opn)
    data = check_compute_operand(ctx, opn, "data", data, "scalar")
    dst = check_compute_operand(ctx, opn, "dst", dst, "scalar")
    check_same_shape_pp(opn, [("data", data), ("dst", dst)])
    writes = [("dst", dst)]
    if reduce_op is not None or reduce_res is not None:
        if reduce_op is None or alu_op(reduce_op, opn).name != "add":
            raise NkiValidationError("err_activation_reduce_op", f"{opn} reduce_op must be nl.add")
        rr = check_compute_operand(ctx, opn, "reduce_res", reduce_res, "scalar")
        if rr.shape[0] != _p(data) or rr.size != _p(data):
            raise NkiValidationError("err_activation_reduce_res", f"{opn} reduce_res must be [{_p(data)}, 1], got {list(rr.shape)}")
        writes.append(("reduce_res", rr))
    s, b, extra = _act_scale_bias(ctx, opn, data, scale, bias)
    record(ctx, opn, "scalar", [("data", data)] + extra, writes, func=func.name, reduce=reduce_op is not None)
    if not ctx.compute:
        return
    x = f32(data) * s + b
    check_act_range(func, np.asarray(x), opn)
    y = np.asarray(func.fn(x), dtype=np.float32)
    close_psum_group(data)
    write(ctx, dst, _pf(y, _p(data)).reshape(dst.shape))
    if len(writes) > 1:
        rr = writes[1][1]
        write(ctx, rr, _pf(y, _p(data)).sum(axis=1, dtype=np.float32).reshape(rr.shape))


def activation(dst: Any, op: Any, data: Any, bias: Any = None, scale: Any = 1.0, reduce_op: Any = None, reduce_res: Any = None,
               reduce_cmd: Any = reduce_cmd.idle, name: Any = None) -> None:
    """``dst = op(data · scale + bias)`` on ScalarE, optionally summing each row into ``reduce_res``."""
    _activation("activation", dst, op, data, bias, scale, reduce_op, reduce_res)


def activation_reduce(dst: Any, op: Any, data: Any, reduce_op: Any, reduce_res: Any, bias: Any = None, scale: Any = 1.0, name: Any = None) -> None:
    """``activation`` plus a row reduction (``nl.add``) of the result into ``reduce_res``."""
    if reduce_res is None:
        raise NkiTypeError("err_activation_reduce_res", "activation_reduce needs reduce_res, a (P, 1) tile")
    _activation("activation_reduce", dst, op, data, bias, scale, reduce_op, reduce_res)


def _norm_axes(opn: str, data: NkiTensor, axis: Any) -> tuple[int, ...]:
    axes = axis_tuple(opn, axis)
    nd = data.ndim
    axes = tuple(sorted(int(a) + nd if int(a) < 0 else int(a) for a in axes))
    if not axes or any(a <= 0 or a >= nd for a in axes):
        raise NkiValidationError(
            "err_reduce_axis", f"{opn} axis {axis} must name free dimensions 1..{nd - 1} of data{list(data.shape)}; the partition dim 0 cannot be reduced"
        )
    if axes != tuple(range(nd - len(axes), nd)):
        raise NkiValidationError(
            "err_reduce_axis", f"{opn} axis {axis} must be the last contiguous dimensions of data{list(data.shape)}, e.g. ({nd - 1},) or {tuple(range(1, nd))}"
        )
    return axes


def tensor_reduce(dst: Any, op: Any, data: Any, axis: Any, negate: bool = False, keepdims: bool = False, name: Any = None) -> None:
    """Reduce ``data`` along its last free axes with ``op`` (add, maximum, minimum, multiply, bitwise…)."""
    ctx = current()
    opn = "tensor_reduce"
    alu = alu_op(op, opn)
    if alu.reduce is None:
        raise NkiValidationError("err_reduce_op", f"{alu.name} is not a legal reduction op; use add, multiply, maximum, minimum or a bitwise/logical op")
    data = check_compute_operand(ctx, opn, "data", data, "vector")
    dst = check_compute_operand(ctx, opn, "dst", dst, "vector")
    axes = _norm_axes(opn, data, axis)
    kept = math.prod(n for k, n in enumerate(data.shape) if k not in axes)
    if _p(dst) != _p(data) or dst.size != kept:
        raise NkiValidationError(
            "err_reduce_dst_shape", f"tensor_reduce dst{list(dst.shape)} must hold {kept} elements over {_p(data)} partitions for data{list(data.shape)} reduced over {axes}"
        )
    record(ctx, opn, "vector", [("data", data)], [("dst", dst)], alu=alu.name, axes=axes)
    if not ctx.compute:
        return
    r = alu.reduce(_values(data, alu.kind), axis=axes)
    if negate:
        r = -r
    close_psum_group(data)
    write(ctx, dst, np.asarray(r).reshape(dst.shape))


def tensor_partition_reduce(dst: Any, op: Any, data: Any, name: Any = None) -> None:
    """Reduce across partitions: ``dst[0, f] = op over p of data[p, f]`` (GpSimd)."""
    ctx = current()
    opn = "tensor_partition_reduce"
    alu = alu_op(op, opn)
    if alu.reduce is None:
        raise NkiValidationError("err_reduce_op", f"{alu.name} is not a legal reduction op")
    data = check_compute_operand(ctx, opn, "data", data, "gpsimd")
    dst = check_compute_operand(ctx, opn, "dst", dst, "gpsimd")
    epp = data.size // _p(data)
    if dst.size != epp:
        raise NkiValidationError("err_reduce_dst_shape", f"tensor_partition_reduce dst{list(dst.shape)} must hold {epp} elements")
    record(ctx, opn, "gpsimd", [("data", data)], [("dst", dst)], alu=alu.name)
    if ctx.compute:
        write(ctx, dst, np.asarray(alu.reduce(_pf(_values(data, alu.kind), _p(data)), axis=0)).reshape(dst.shape))


def reciprocal(dst: Any, data: Any, name: Any = None) -> None:
    """``dst = 1 / data`` on VectorE (fp32)."""
    ctx = current()
    opn = "reciprocal"
    data = check_compute_operand(ctx, opn, "data", data, "vector")
    dst = check_compute_operand(ctx, opn, "dst", dst, "vector")
    check_same_shape_pp(opn, [("data", data), ("dst", dst)])
    record(ctx, opn, "vector", [("data", data)], [("dst", dst)])
    if ctx.compute:
        with np.errstate(divide="ignore"):
            r = np.float32(1.0) / f32(data)
        close_psum_group(data)
        write(ctx, dst, _pf(r, _p(data)).reshape(dst.shape))


# --------------------------------------------------------------------------------------------
# TensorE
# --------------------------------------------------------------------------------------------
_FP32_LIKE = (dt.float32, dt.tfloat32)


def nc_matmul(dst: Any, stationary: Any, moving: Any, is_stationary_onezero: bool = False, is_moving_onezero: bool = False,
              is_transpose: bool = False, accumulate: Any = None, tile_position: Any = (), tile_size: Any = (),
              perf_mode: Any = matmul_perf_mode.none, name: Any = None) -> None:
    """``dst[M, N] (+)= stationary[K, M]ᵀ · moving[K, N]`` on TensorE, fp32 accumulation in PSUM.

    ``accumulate=None`` auto-detects: the first matmul write to a PSUM location overwrites and
    later ones accumulate, until a non-matmul instruction reads or writes that location.
    """
    ctx = current()
    opn = "nc_matmul"
    st = check_compute_operand(ctx, opn, "stationary", stationary, "tensor")
    mv = check_compute_operand(ctx, opn, "moving", moving, "tensor")
    dst = require_tensor(opn, "dst", dst)
    if dst._a.memory != "psum":
        raise NkiValidationError("err_matmul_dst_not_psum", "Matmult dst tensor is not psum: nc_matmul must write its result to a PSUM tensor")
    check_compute_operand(ctx, opn, "dst", dst, "tensor", ON_CHIP)
    if tile_position or tile_size:
        k, m, n, fp32 = _check_matmul(ctx.target, st, mv, dst, bool(is_transpose), (tuple(tile_position), tuple(tile_size)))
    else:
        # The rules depend only on the operands' shapes and dtypes, dst's geometry (numbered by the
        # operand checks it passed: its PSUM bank) and the target: an inner loop repeats a few.
        combo = (st._shape, st._dtype, mv._shape, mv._dtype, dst._ok.serial, bool(is_transpose))
        checked = ctx.matmuls_checked
        facts = checked.get(combo)
        if facts is None:
            facts = _check_matmul(ctx.target, st, mv, dst, bool(is_transpose), None)
            if len(checked) < CHECKED_GEOMETRIES_MAX:
                checked[combo] = facts
        k, m, n, fp32 = facts
    onezero = bool(is_stationary_onezero or is_moving_onezero) and _onezero_kept(ctx, (("stationary", st, is_stationary_onezero),
                                                                                  ("moving", mv, is_moving_onezero)))
    acc_mode = None if accumulate is None else bool(accumulate)
    was_written = dst._a.written
    # (the attributes only go into a trace: an untraced run skips building them, 10⁴ times a second)
    attrs: dict[str, Any] = {} if ctx.trace is None else {
        "K": k, "M": m, "N": n, "fp32": fp32, "onezero": onezero, "accumulate": acc_mode, "tile_size": tuple(tile_size) if tile_size else None}
    record(ctx, opn, "tensor", (("stationary", st), ("moving", mv)), (("dst", dst),), **attrs)
    if not ctx.compute:
        return
    a = dst._a
    if acc_mode is True and not was_written:
        warn("nc_matmul(accumulate=True) into PSUM that was never written: the result is undefined on hardware")
    key = (a.uid, dst._offset, dst._shape, dst._strides)
    group = ctx.mm_group
    if group is not None and (group.key != key or acc_mode is False):
        flush_matmul_group(ctx)
        group = None
    if group is None:
        mask = None
        if acc_mode is None:
            opened = a.acc_open.query(dst, m)
            mode = "accumulate" if opened is True else "overwrite" if opened is False else "mask"
            mask = opened if mode == "mask" else None
        else:
            mode = "accumulate" if acc_mode else "overwrite"
        group = MatmulGroup(dst, key, mode, mask, m)
        ctx.mm_group = group
        a.acc_open.set(dst, True)  # later matmuls into this tile accumulate (auto-detect semantics)
    group.views.append((st, mv))
    a.written = True
    a.pending = True


def _onezero_kept(ctx: Any, flagged: tuple[tuple[str, NkiTensor, Any], ...]) -> bool:
    """Whether ``nc_matmul``'s ``is_*_onezero`` promises hold: every element of each flagged operand is exactly 0.0 or 1.0.

    The flag halves the fp32 matmul's price, so it is believed only where it was checked, on
    this instruction's own data: a timing-only run has no data and gets no discount. A broken
    promise is an error (hardware given a wrong hint computes a wrong product).
    """
    if not ctx.compute:
        return False
    for role, t, flag in flagged:
        if not flag:
            continue
        vals = f32(t)
        bad = (vals != 0.0) & (vals != 1.0)
        if bad.any():
            first = np.argwhere(bad)[0]
            raise NkiValidationError(
                "err_matmul_onezero",
                f"nc_matmul is_{role}_onezero=True promises that {role}[{', '.join(map(str, t.shape))}] holds only 0.0 and 1.0, "
                f"but {role}[{', '.join(map(str, first))}] is {float(vals[tuple(first)])!r}; pass is_{role}_onezero=False "
                "(the flag is a hint for 0/1 matrices such as masks and identities)",
            )
    return True


def _check_matmul(t: Any, st: NkiTensor, mv: NkiTensor, dst: NkiTensor, is_transpose: bool,
                  tiling: tuple[tuple[Any, ...], tuple[Any, ...]] | None) -> tuple[int, int, int, bool]:
    """``nc_matmul``'s shape, dtype, bank and tiling rules; ``(K, M, N, fp32 operands)`` when they hold."""
    k, km, pd = _p(st), _p(mv), _p(dst)
    m, n = st.size // max(k, 1), mv.size // max(km, 1)
    if km != k:
        raise NkiValidationError("err_matmul_contraction", f"nc_matmul stationary and moving contraction (partition) sizes differ: {k} vs {km}")
    if m > t.gemm_stationary_fmax:
        raise NkiValidationError("err_matmul_stationary_size", f"nc_matmul stationary free size {m} exceeds maximum {t.gemm_stationary_fmax} (gemm_stationary_fmax)")
    dst_bf16 = dst.dtype == dt.bfloat16
    nmax = t.matmul_moving_max_bf16 if dst_bf16 else t.matmul_moving_max_fp32
    if n > nmax:
        raise NkiValidationError("err_matmul_moving_size", f"nc_matmul moving free size {n} exceeds maximum {nmax} on {t.name} (gemm_moving_fmax)")
    if pd != m or dst.size // max(pd, 1) != n:
        raise NkiValidationError("err_matmul_dst_shape", f"nc_matmul dst{list(dst.shape)} must be [{m}, {n}] for stationary{list(st.shape)} and moving{list(mv.shape)}")
    if dst.dtype != dt.float32 and not (t.matmul_bf16_dst and dst_bf16):
        raise NkiValidationError("err_matmul_dst_dtype", f"nc_matmul dst dtype must be float32 on gen{t.nc_version}, got {dt.dtype_name(dst.dtype)}")
    fp32 = st.dtype in _FP32_LIKE
    if fp32 != (mv.dtype in _FP32_LIKE):
        raise NkiValidationError(
            "err_matmul_dtype_mix", f"nc_matmul fp32/tf32 operands must pair with fp32/tf32: stationary {dt.dtype_name(st.dtype)}, moving {dt.dtype_name(mv.dtype)}"
        )
    if {st.dtype, mv.dtype} == {dt.float8_e4m3, dt.float8_e4m3fn}:
        raise NkiValidationError("err_matmul_dtype_mix", "nc_matmul cannot mix float8_e4m3 and float8_e4m3fn operands")
    if is_transpose and t.nc_version < 3:
        raise NkiValidationError("err_matmul_transpose_gen", "nc_matmul is_transpose=True needs trn2 or later")
    reg = dst.region()
    if t.nc_version < 4 and reg.b_lo // t.psum_bank_bytes != (reg.b_hi - 1) // t.psum_bank_bytes:
        raise _bank_error(dst, reg, t)
    if tiling is not None:
        tile_position, tile_size = tiling
        if len(tile_position) != 2 or len(tile_size) != 2:
            raise NkiValidationError("err_matmul_tiling", "nc_matmul tile_position and tile_size must both be given as (row, col) pairs")
        if any(int(v) % 32 for v in tile_position + tile_size):
            raise NkiValidationError("err_matmul_tiling", f"nc_matmul tile_position {tile_position} and tile_size {tile_size} must be multiples of 32")
    return k, m, n, fp32


def _bank_error(dst: NkiTensor, reg: Any, t: Any) -> Exception:
    from .errors import NkiCapacityError

    return NkiCapacityError(
        "err_psum_bank_crossing",
        f"nc_matmul dst `{dst.name}` spans PSUM bytes [{reg.b_lo}, {reg.b_hi}) per partition, crossing a {t.psum_bank_bytes}-byte bank boundary; "
        f"a matmul result must lie within one PSUM bank on {t.name}",
    )


def nc_transpose(dst: Any, data: Any, engine: Any = engine.unknown, name: Any = None) -> None:
    """Transpose a 2-D tile: TensorE ([≤128, ≤128] SBUF → PSUM) or VectorE ([≤32, ≤32])."""
    ctx = current()
    opn = "nc_transpose"
    dst = require_tensor(opn, "dst", dst)
    data = require_tensor(opn, "data", data)
    eng = _engines.select(opn, engine, "tensor" if dst._a.memory == "psum" and data._a.memory == "sbuf" else "vector")
    data = check_compute_operand(ctx, opn, "data", data, eng)
    if eng == "tensor":
        if dst._a.memory != "psum":
            raise NkiValidationError("err_transpose_dst", "nc_transpose on the tensor engine writes PSUM: dst must be a PSUM tensor")
        check_compute_operand(ctx, opn, "dst", dst, eng, ON_CHIP)
        lim = ctx.target.pmax
    else:
        check_compute_operand(ctx, opn, "dst", dst, eng)
        lim = 32
    p, f = _p(data), data.size // max(_p(data), 1)
    if data.ndim > 2 and any(s != 1 for s in data.shape[2:]):
        raise NkiValidationError(
            "err_exceed_max_supported_dimension", f"parameter 'data[{', '.join(map(str, data.shape))}]' of 'transpose' exceed max supported number of dimensions of 2."
        )
    for dim, size in ((0, p), (1, f)):
        if size > lim:
            raise NkiValidationError(
                "err_size_of_dimension_exceed_arch_limit",
                f"size of dimension {dim} in 'data[{p}, {f}]' of 'transpose' exceed architecture limitation of {lim}.",
            )
    if _p(dst) != f or dst.size != p * f:
        raise NkiValidationError("err_transpose_shape", f"nc_transpose dst{list(dst.shape)} must be [{f}, {p}] for data[{p}, {f}]")
    if dst.dtype != data.dtype:
        raise NkiValidationError("err_transpose_dtype", f"nc_transpose requires dst.dtype == data.dtype, got {dt.dtype_name(dst.dtype)} and {dt.dtype_name(data.dtype)}")
    record(ctx, opn, eng, [("data", data)], [("dst", dst)], P=p, F=f)
    if ctx.compute:
        close_psum_group(data)
        write(ctx, dst, _pf(data._np(), p).T.reshape(dst.shape))


from .isa_more import *  # noqa: F401,F403  second-tier ops
_IMPLEMENTED = {k for k, v in dict(globals()).items() if callable(v) and not k.startswith("_")}


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)  # the import system's probes (``__path__`` for ``from .x import y``) must see a plain miss
    raise not_emulated(name, "nki.isa", _IMPLEMENTED)
