"""Data movement: DMA copies and transposes, on-engine copies, fills and ``iota``."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from .. import dtypes as dt
from .. import engines as _engines
from ..errors import NkiOutOfBoundsError, NkiTypeError, NkiValidationError, warn
from ..memory import LazyCopy, current
from ..ops import (
    HBM,
    SBUF_ONLY,
    check_compute_operand,
    check_memory,
    check_partitions,
    check_same_shape_pp,
    close_psum_group,
    mark_written,
    record,
    require_tensor,
    write,
)
from ..registry import ISA_INDEX, CostAttrs, NoAttrs, instruction, page
from ..tensor import NkiTensor
from .common import _HWDGE, _affine_values, _p, _pf, dge_mode, engine, oob_mode


@dataclass(frozen=True, slots=True, kw_only=True)
class DmaAttrs(CostAttrs):
    """A DMA's descriptor-generation mode (``nisa.dge_mode`` value; 2 is hardware DGE) and the engine triggering it."""

    dge_mode: int = 0
    dge_trigger: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DmaTransposeAttrs(CostAttrs):
    """The permutation a transposing DMA applies."""

    axes: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemsetAttrs(CostAttrs):
    """The fill value (zeroing 16-bit data is faster)."""

    value: float


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


@instruction(
    family="data movement",
    engines="dma",
    source=page("dma_copy"),
    attrs=DmaAttrs,
    rules=(
        "src and dst in HBM or SBUF (not PSUM), with equal element counts; casts go through fp32, integer to integer saturates",
        "dge_mode=hwdge needs trn2+, src.dtype == dst.dtype and no gather/scatter",
        "engine= only picks the hardware-DGE trigger (sync or scalar) and needs dge_mode=hwdge",
        "priority= is refused (not modelled: the queues have no priorities)",
        "an indirect (vector_offset) access out of bounds is an error unless oob_mode=nisa.oob_mode.skip",
    ),
    example="nisa.dma_copy(dst=x_sb, src=x_hbm[i * 128:(i + 1) * 128, :])",
)
def dma_copy(
    dst: Any,
    src: Any,
    priority: Any = None,
    oob_mode: Any = oob_mode.error,
    dge_mode: Any = dge_mode.unknown,
    engine: Any = engine.unknown,
    name: Any = None,
) -> None:
    """Copy ``src`` to ``dst`` through a DMA queue (HBM↔SBUF, SBUF↔SBUF, HBM↔HBM); casts via fp32 (not with dge_mode=hwdge: equal dtypes only)."""
    ctx = current()
    op = "dma_copy"
    _reject_priority(op, priority)
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
    if not ctx.compute or (ctx.fast and _deferred(dst, src)):
        return
    vals = src._np()
    if src.dtype != dst.dtype and not (dt.is_int(src.dtype) and dt.is_int(dst.dtype)):
        vals = vals.astype(np.float32)
    elif src.dtype != dst.dtype:
        vals = _saturate_int(vals, dst.dtype)
    if src._valid is not None:  # oob_mode=skip: the skipped source elements leave dst untouched
        vals = np.where(src._valid, vals, dst._np().reshape(src.shape))
    write(ctx, dst, vals.reshape(dst.shape))


def _reject_priority(op: str, priority: Any) -> None:
    """``priority=`` is refused rather than ignored: NKI documents the argument but not how DMA queues
    arbitrate between priorities, so no timing could honour it, and a silently dropped priority would
    time the kernel as if the author had not asked for one."""
    if priority is not None:
        raise NkiValidationError(
            "err_dma_priority_not_modelled",
            f"{op} priority={priority!r} is not modelled: the emulator serves DMA queues without priorities (NKI does not "
            "document how they arbitrate), so it would be ignored; leave priority unset and order the DMAs by their dependences",
        )


def _check_hwdge(ctx: Any, src: NkiTensor, dst: NkiTensor) -> None:
    """Hardware DGE's rules: NeuronCore-v3 or newer, no casting, no gather/scatter (the docs of ``dma_copy`` and ``nki-dge``).

    Why here: hwdge is priced with its ~600 ns fixed cost instead of ~1.3 µs, so a copy the
    hardware DGE cannot do must not get that price.
    """
    if ctx.target.nc_version < 3:
        raise NkiValidationError(
            "err_dma_hwdge_gen",
            f"dma_copy dge_mode=hwdge needs trn2 or later (hardware DGE is NeuronCore-v3+), not {ctx.target.name}; "
            "use dge_mode=nisa.dge_mode.swdge or leave dge_mode unset",
        )
    if src.dtype != dst.dtype:
        raise NkiValidationError(
            "err_dma_hwdge_dtype",
            f"dma_copy with dge_mode=hwdge requires src.dtype == dst.dtype, got {dt.dtype_name(src.dtype)} and {dt.dtype_name(dst.dtype)}; "
            "cast in a software-DGE dma_copy (leave dge_mode unset) or on chip with tensor_copy",
        )
    for role, t in (("src", src), ("dst", dst)):
        if t._addr is not None:
            raise NkiValidationError(
                "err_dma_hwdge_indirect",
                f"dma_copy with dge_mode=hwdge cannot gather or scatter, but `{role}` is a vector-indirect view of "
                f"`{t.name}`; hardware DGE has no indirect mode: use dge_mode=nisa.dge_mode.swdge or leave dge_mode unset",
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
    strides = cast(tuple[int, ...], dst._strides)  # (a direct view, checked above)
    if not a.defer(LazyCopy(dst._offset, dst._shape, strides, dst.region(), source, sa), sa):
        return False
    mark_written(dst)
    return True


#: The permutation ``dma_transpose`` applies without ``axes``, by source rank (AWS's documented defaults).
_DMA_TRANSPOSE_DEFAULT = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


@instruction(
    family="data movement",
    engines="dma",
    source=page("dma_transpose"),
    attrs=DmaTransposeAttrs,
    rules=(
        "src in HBM or SBUF, dst in SBUF, same rank; axes (1, 0), (2, 1, 0) or (3, 1, 2, 0), by default the one of src's rank",
        "dst.shape must be src.shape permuted by axes",
        "priority= is refused (not modelled: the queues have no priorities)",
    ),
    example="nisa.dma_transpose(dst=xt_sb, src=x_hbm[0:128, 0:64])",
)
def dma_transpose(
    dst: Any,
    src: Any,
    axes: Any = None,
    priority: Any = None,
    dge_mode: Any = dge_mode.unknown,
    oob_mode: Any = oob_mode.error,
    name: Any = None,
) -> None:
    """Transpose while copying by DMA (axes (1,0), (2,1,0) or (3,1,2,0)); dst must be in SBUF."""
    ctx = current()
    op = "dma_transpose"
    _reject_priority(op, priority)
    dst = require_tensor(op, "dst", dst)
    src = require_tensor(op, "src", src)
    check_memory(op, "src", src, SBUF_ONLY | HBM)
    check_memory(op, "dst", dst, SBUF_ONLY)
    check_partitions(ctx, op, "dst", dst, start_rule=False)
    if dst.ndim != src.ndim:
        raise NkiValidationError("err_dma_transpose_rank", f"dma_transpose requires dst rank == src rank, got {dst.ndim} and {src.ndim}")
    axes = tuple(axes) if axes is not None else _DMA_TRANSPOSE_DEFAULT.get(src.ndim, tuple(reversed(range(src.ndim))))
    if axes not in ((1, 0), (2, 1, 0), (3, 1, 2, 0)):
        raise NkiValidationError(
            "err_dma_transpose_axes", f"dma_transpose axes {axes} not supported; use (1, 0), (2, 1, 0) or (3, 1, 2, 0)"
        )
    expect = tuple(src.shape[a] for a in axes)
    if tuple(dst.shape) != expect:
        raise NkiValidationError(
            "err_dma_transpose_shape",
            f"dma_transpose dst shape {list(dst.shape)} must be {list(expect)} for src {list(src.shape)} and axes {axes}",
        )
    record(ctx, op, "dma", [("src", src)], [("dst", dst)], axes=axes)
    if ctx.compute:
        write(ctx, dst, np.transpose(src._np(), axes))


@instruction(
    family="data movement",
    engines="vector scalar gpsimd",
    source="https://awsdocs-neuron.readthedocs-hosted.com/en/v2.28.1/nki/api/generated/nki.isa.tensor_copy.html "
    "(Constraints: NeuronCore v2 Vector, GpSimd; v3+ Vector, Scalar, GpSimd)",
    attrs=NoAttrs,
    rules=(
        "on-chip to on-chip, same partitions and elements per partition; converts to dst's dtype",
        "ScalarE only from trn2; GpSimd cannot touch PSUM",
    ),
    example="nisa.tensor_copy(dst=y_sb, src=acc_psum)",
    since=(("scalar", 3),),
    hint="; on trn1 copy on ScalarE with nisa.activation(op=nl.copy)",
)
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
        warn(
            f"tensor_copy(dtype={dt.dtype_name(cast)}) is NKI 0.2 API, removed in 0.3: values are rounded to it, then stored as dst's {dt.dtype_name(dst.dtype)}"
        )
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


@instruction(
    family="data movement",
    engines="vector gpsimd",
    source=page("memset"),
    attrs=MemsetAttrs,
    rules=("value must be a number of dst's kind (an int for integer tiles) within dst dtype's range",),
    example="nisa.memset(dst=acc, value=0.0)",
)
def memset(dst: Any, value: Any, engine: Any = engine.unknown, name: Any = None) -> None:
    """Fill ``dst`` with ``value``; the value's type must match the dst dtype (int for int tensors)."""
    ctx = current()
    op = "memset"
    eng = _engines.select(op, engine, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, eng)
    if dt.is_int(dst.dtype) and dst.dtype != dt.bool_ and isinstance(value, (float, np.floating)) and not float(value).is_integer():
        raise NkiTypeError(
            "err_memset_value_type", f"memset value {value!r} does not match dst dtype {dt.dtype_name(dst.dtype)}; pass an int"
        )
    if not isinstance(value, (int, float, bool, np.integer, np.floating)):
        raise NkiTypeError("err_memset_value_type", f"memset value must be a number, got {type(value).__name__}")
    if dt.is_int(dst.dtype) and dst.dtype != dt.bool_ and not np.iinfo(dst.dtype).min <= value <= np.iinfo(dst.dtype).max:
        info = np.iinfo(dst.dtype)
        raise NkiTypeError(
            "err_memset_value_range",
            f"memset value {value!r} is outside the range [{info.min}, {info.max}] of dst dtype {dt.dtype_name(dst.dtype)}",
        )
    record(ctx, op, eng, [], [("dst", dst)], value=float(value))
    if not ctx.compute:
        return
    stored = dt.store_cast(np.asarray(value, dtype=np.float64 if not dt.is_int(dst.dtype) else np.int64), dst.dtype)
    a = dst._a
    if ctx.fast and dst._dtype == a.dtype and dst.covers_storage():
        a.refill(stored[()])  # the whole tile: kept pending, so whatever overwrites it never pays for it
        mark_written(dst)
    else:
        write(ctx, dst, stored)


@instruction(
    family="data movement",
    engines="gpsimd",
    source=ISA_INDEX,
    attrs=NoAttrs,
    rules=("pattern has 1 to 4 [step, num] pairs covering dst's elements per partition; dst on chip (not PSUM: GpSimd)",),
    example="nisa.iota(dst=idx, pattern=[[1, 512]], offset=0, channel_multiplier=512)",
)
def iota(dst: Any, pattern: Any, offset: Any = 0, channel_multiplier: Any = 0, name: Any = None) -> None:
    """``dst[p, i…] = offset + p·channel_multiplier + Σ step_k·i_k`` on GpSimd."""
    ctx = current()
    op = "iota"
    dst = check_compute_operand(ctx, op, "dst", dst, "gpsimd")
    vals = _affine_values(op, dst, pattern, offset, channel_multiplier)
    record(ctx, op, "gpsimd", [], [("dst", dst)])
    if ctx.compute:
        write(ctx, dst, vals.reshape(dst.shape) if dt.is_int(dst.dtype) else vals.reshape(dst.shape).astype(np.float32))
