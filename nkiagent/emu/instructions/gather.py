"""Gather and shuffle: partitions moved within quadrants, gathers within GpSimd cores and within partitions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes as dt
from ..errors import NkiOutOfBoundsError, NkiValidationError
from ..memory import current
from ..ops import (
    check_compute_operand,
    check_same_shape_pp,
    close_psum_group,
    record,
    write,
)
from ..registry import ISA_INDEX, CostAttrs, NoAttrs, instruction
from .common import _epp, _pp, _rows, _same_partitions, _shape


@dataclass(frozen=True, slots=True, kw_only=True)
class ShuffleAttrs(CostAttrs):
    """The partition each of a quadrant's 32 partitions comes from (255: kept)."""

    shuffle_mask: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GatherAttrs(CostAttrs):
    """Elements per index and the indices used."""

    num_elem_per_idx: int
    num_valid_indices: int


_KEEP = 255


@instruction(
    family="gather and shuffle",
    engines="vector",
    source=ISA_INDEX,
    attrs=ShuffleAttrs,
    rules=("shuffle_mask has 32 entries (255 keeps a partition); src and dst start at a quadrant, same free size and dtype",),
    example="nisa.nc_stream_shuffle(dst=y, src=x, shuffle_mask=[31 - i for i in range(32)])",
)
def nc_stream_shuffle(dst: Any, src: Any, shuffle_mask: Any, name: Any = None) -> None:
    """Move whole partitions within 32-partition quadrants on VectorE.

    In every quadrant ``q``, destination partition ``32q + i`` receives source partition
    ``32q + shuffle_mask[i]``; ``shuffle_mask[i] == 255`` leaves it unchanged. The 32-entry mask
    is the same for all quadrants. ``src`` and ``dst`` share a dtype and elements per partition
    and may be the same tile. With ``n`` active partitions (the larger access rounded up to a
    multiple of 32), both accesses must start at partition 0 (n > 64), 0 or 64 (n = 64), or a
    multiple of 32 (n = 32).
    """
    ctx = current()
    op = "nc_stream_shuffle"
    src = check_compute_operand(ctx, op, "src", src, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    mask = list(shuffle_mask) if isinstance(shuffle_mask, (list, tuple)) else None
    if mask is None or len(mask) != 32:
        raise NkiValidationError("err_shuffle_mask", f"{op} shuffle_mask must be a list of 32 partition indices, got {shuffle_mask!r}")
    for i, m in enumerate(mask):
        if not isinstance(m, (int, np.integer)) or not (0 <= int(m) < 32 or int(m) == _KEEP):
            raise NkiValidationError(
                "err_shuffle_mask",
                f"{op} shuffle_mask[{i}] = {m!r} must be a source partition 0..31 within the quadrant, or 255 to keep dst",
            )
    if src.dtype != dst.dtype:
        raise NkiValidationError(
            "err_shuffle_dtype", f"{op} dst must have src's dtype, got {dt.dtype_name(dst.dtype)} and {dt.dtype_name(src.dtype)}"
        )
    if _epp(src) != _epp(dst):
        raise NkiValidationError(
            "err_free_size_mismatch",
            f"{op} dst must have as many elements per partition as src: {_shape(src, 'src')} vs {_shape(dst, 'dst')}",
        )
    src_p, dst_p = _pp(src), _pp(dst)
    active = -(-max(src_p, dst_p) // 32) * 32
    allowed = (0,) if active > 64 else (0, 64) if active == 64 else (0, 32, 64, 96)
    for role, t in (("src", src), ("dst", dst)):
        if t.partition_start() not in allowed:
            raise NkiValidationError(
                "err_start_partition",
                f"{op} {role} starts at partition {t.partition_start()}; with {active} active partitions "
                "the accesses must start at partition "
                f"{' or '.join(map(str, allowed))}",
            )
    pairs: list[tuple[int, int]] = []
    for row in range(dst_p):
        q, i = divmod(row, 32)
        if int(mask[i]) == _KEEP:
            continue
        s = q * 32 + int(mask[i])
        if s >= src_p:
            raise NkiValidationError(
                "err_shuffle_mask",
                f"{op} shuffle_mask[{i}] = {int(mask[i])} makes dst partition {row} read src partition {s}, but src has {src_p} partitions",
            )
        pairs.append((row, s))
    record(ctx, op, "vector", [("src", src)], [("dst", dst)], shuffle_mask=tuple(int(m) for m in mask))
    if not ctx.compute:
        return
    x = _rows(src._np(), src_p).copy()
    out = _rows(dst._np(), dst_p).copy()
    if pairs:
        rows, sources = zip(*pairs, strict=True)
        out[list(rows)] = x[list(sources)]
    close_psum_group(src)
    write(ctx, dst, out.reshape(dst.shape))


_GATHER_ELEMS = (1, 2, 4, 8, 16, 32)


_CORE_PARTITIONS = 16


_CORE_MAX_INDICES = 4096


@instruction(
    family="gather and shuffle",
    engines="gpsimd",
    source=ISA_INDEX,
    attrs=GatherAttrs,
    rules=(
        "src_buffer and index span a multiple of 16 partitions; num_elem_per_idx is 1, 2, 4, 8, 16 or 32",
        "index is uint16/uint32 within its 16-partition group's buffer",
    ),
    example="nisa.local_gather(dst=g, src_buffer=table, index=idx16)",
)
def local_gather(dst: Any, src_buffer: Any, index: Any, num_elem_per_idx: int = 1, num_valid_indices: Any = None, name: Any = None) -> None:
    """Gather within groups of 16 partitions on GpSimd (one group per GpSimd core).

    Each core flattens its 16-partition slice of the uint16 ``index`` tile partition-first
    (``index[16c:16c+16].flatten(order='F')``) and keeps the first ``num_valid_indices`` entries
    (default: all of them). Every partition ``p`` of that core then gathers, for each index
    ``k``, the ``num_elem_per_idx`` contiguous elements starting at element ``k`` of its own
    (flattened) row of ``src_buffer``: ``dst[p, j, e] = src_buffer[p, idx[j] + e]``, which is
    AWS's NumPy reference. ``src_buffer`` and ``index`` have the same partition count, a
    multiple of 16; ``dst`` has ``src_buffer``'s dtype and partitions and
    ``num_valid_indices * num_elem_per_idx`` elements per partition. All operands are in SBUF.
    Indices that run past the row (undefined on hardware) are an error here.
    """
    ctx = current()
    op = "local_gather"
    src = check_compute_operand(ctx, op, "src_buffer", src_buffer, "gpsimd")
    idx = check_compute_operand(ctx, op, "index", index, "gpsimd")
    dst = check_compute_operand(ctx, op, "dst", dst, "gpsimd")
    p = _pp(src)
    _same_partitions(op, [("src_buffer", src), ("index", idx), ("dst", dst)])
    if p % _CORE_PARTITIONS:
        raise NkiValidationError(
            "err_local_gather_partitions",
            f"{op} src_buffer and index must span a multiple of 16 partitions (one GpSimd core each), got {p}",
        )
    if idx.dtype != dt.uint16:
        raise NkiValidationError("err_index_dtype", f"{op} index must be uint16, got {dt.dtype_name(idx.dtype)}")
    if dst.dtype != src.dtype:
        raise NkiValidationError(
            "err_local_gather_dtype",
            f"{op} does not cast: dst must have src_buffer's dtype {dt.dtype_name(src.dtype)}, got {dt.dtype_name(dst.dtype)}",
        )
    if num_elem_per_idx not in _GATHER_ELEMS:
        raise NkiValidationError(
            "err_local_gather_elems", f"{op} num_elem_per_idx must be one of {list(_GATHER_ELEMS)}, got {num_elem_per_idx!r}"
        )
    per_core = _CORE_PARTITIONS * _epp(idx)
    valid = per_core if num_valid_indices is None else int(num_valid_indices)
    if not 0 < valid <= per_core:
        raise NkiValidationError(
            "err_local_gather_valid",
            f"{op} num_valid_indices must be between 1 and {per_core} (the indices in each 16-partition slice of index), got {valid}",
        )
    if valid > _CORE_MAX_INDICES:
        raise NkiValidationError(
            "err_local_gather_valid", f"{op} gathers {valid} indices per GpSimd core; the maximum is {_CORE_MAX_INDICES}"
        )
    if _epp(dst) != valid * num_elem_per_idx:
        raise NkiValidationError(
            "err_local_gather_dst_shape",
            f"{op} dst must hold num_valid_indices * num_elem_per_idx = {valid * num_elem_per_idx} elements per partition, "
            f"got {_shape(dst, 'dst')}",
        )
    record(
        ctx, op, "gpsimd", [("src_buffer", src), ("index", idx)], [("dst", dst)], num_elem_per_idx=num_elem_per_idx, num_valid_indices=valid
    )
    if not ctx.compute:
        return
    x = _rows(src._np(), p)
    ind = _rows(idx._np(), p).astype(np.int64)
    out = np.empty((p, valid * num_elem_per_idx), dtype=x.dtype)
    span = np.arange(num_elem_per_idx, dtype=np.int64)
    for c in range(p // _CORE_PARTITIONS):
        rows = slice(c * _CORE_PARTITIONS, (c + 1) * _CORE_PARTITIONS)
        flat = ind[rows].flatten(order="F")[:valid]
        cols = (flat[:, None] + span[None, :]).reshape(-1)
        if cols.max() >= x.shape[1]:
            raise NkiOutOfBoundsError(
                "err_local_gather_index",
                f"{op} index {int(flat.max())} of GpSimd core {c} reads elements up to {int(cols.max())}, "
                f"past the {x.shape[1]} elements per partition of src_buffer",
            )
        out[rows] = x[rows][:, cols]
    write(ctx, dst, out.reshape(dst.shape))


@instruction(
    family="gather and shuffle",
    engines="gpsimd",
    source=ISA_INDEX,
    attrs=NoAttrs,
    rules=("indices is uint32 with values below data's free size; dst has indices' shape and data's dtype",),
    example="nisa.nc_n_gather(dst=g, data=x, indices=idx32)",
    cost="gpsimd_pass",
)
def nc_n_gather(dst: Any, data: Any, indices: Any, name: Any = None) -> None:
    """Gather within each partition on GpSimd: ``dst[p, i] = data[p, indices[p, i]]``.

    ``data``'s free dims are flattened for indexing; ``indices`` is a uint32 SBUF tile whose
    free size (and shape) ``dst`` follows; ``dst`` has ``data``'s dtype. All operands are in
    SBUF with the same partition count. Indices outside the row are an error.
    """
    ctx = current()
    op = "nc_n_gather"
    data = check_compute_operand(ctx, op, "data", data, "gpsimd")
    ind = check_compute_operand(ctx, op, "indices", indices, "gpsimd")
    dst = check_compute_operand(ctx, op, "dst", dst, "gpsimd")
    check_same_shape_pp(op, [("indices", ind), ("dst", dst)])
    _same_partitions(op, [("data", data), ("indices", ind), ("dst", dst)])
    if ind.dtype != dt.uint32:
        raise NkiValidationError("err_index_dtype", f"{op} indices must be uint32, got {dt.dtype_name(ind.dtype)}")
    if dst.dtype != data.dtype:
        raise NkiValidationError(
            "err_n_gather_dtype", f"{op} dst must have data's dtype {dt.dtype_name(data.dtype)}, got {dt.dtype_name(dst.dtype)}"
        )
    record(ctx, op, "gpsimd", [("data", data), ("indices", ind)], [("dst", dst)])
    if not ctx.compute:
        return
    p = _pp(data)
    x = _rows(data._np(), p)
    k = _rows(ind._np(), p).astype(np.int64)
    if k.size and k.max() >= x.shape[1]:
        raise NkiOutOfBoundsError(
            "err_n_gather_index", f"{op} index {int(k.max())} is outside [0, {x.shape[1]}), the elements per partition of data"
        )
    write(ctx, dst, np.take_along_axis(x, k, axis=1).reshape(dst.shape))
