"""Statistics: ``bn_stats`` and ``bn_aggr`` (per-partition mean and variance)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import NkiValidationError
from ..memory import current
from ..ops import (
    check_compute_operand,
    close_psum_group,
    f32,
    record,
    write,
)
from ..registry import ISA_INDEX, NoAttrs, instruction
from .common import _epp, _pp, _rows, _same_partitions, _shape


def _group_stats(g: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = g.shape[1]
    if n == 0:
        z = np.zeros(g.shape[0], dtype=np.float32)
        return z, z, z
    mean = g.mean(axis=1, dtype=np.float32)
    m2 = np.square(g - mean[:, None]).sum(axis=1, dtype=np.float32)
    return np.full(g.shape[0], n, dtype=np.float32), mean, m2


@instruction(
    family="statistics",
    engines="vector",
    source=ISA_INDEX,
    attrs=NoAttrs,
    rules=(
        "data's free size at most the target's bn_stats_fmax; dst holds 6 values per partition (count, mean, variance·count of the even and odd elements)",
    ),
    example="nisa.bn_stats(dst=stats, data=x)",
)
def bn_stats(dst: Any, data: Any, name: Any = None) -> None:
    """Per-partition mean/variance statistics of ``data`` on VectorE, for :func:`bn_aggr`.

    ``dst`` gets 6 values per partition, computed in fp32 over the flattened free elements:
    ``(count, mean, variance·count)`` of the even-indexed elements, then the same three for
    the odd-indexed elements (variance·count is the sum of squared deviations). ``data`` may
    hold at most ``nl.tile_size.bn_stats_fmax`` (512) elements per partition; for longer rows
    run one ``bn_stats`` per 512-element tile and aggregate all their outputs in one ``bn_aggr``.
    """
    ctx = current()
    op = "bn_stats"
    data = check_compute_operand(ctx, op, "data", data, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    _same_partitions(op, [("data", data), ("dst", dst)])
    fmax = ctx.target.bn_stats_fmax
    if _epp(data) > fmax:
        raise NkiValidationError(
            "err_bn_stats_free_size",
            f"bn_stats data has {_epp(data)} elements per partition, more than bn_stats_fmax = {fmax} (nl.tile_size.bn_stats_fmax); "
            f"run bn_stats on tiles of at most {fmax} elements and combine their outputs with one bn_aggr",
        )
    if _epp(dst) != 6:
        raise NkiValidationError(
            "err_bn_stats_dst_shape",
            f"bn_stats dst must hold 6 elements per partition (count, mean, var*count for even and odd elements), got {_shape(dst, 'dst')}",
        )
    record(ctx, op, "vector", [("data", data)], [("dst", dst)])
    if not ctx.compute:
        return
    p = _pp(data)
    x = _rows(f32(data), p)
    stats = _group_stats(x[:, 0::2]) + _group_stats(x[:, 1::2])
    close_psum_group(data)
    write(ctx, dst, np.stack(stats, axis=1).reshape(dst.shape))


@instruction(
    family="statistics",
    engines="vector",
    source=ISA_INDEX,
    attrs=NoAttrs,
    rules=("data holds a multiple of 6 values per partition (bn_stats outputs); dst is [P, 2] (mean, variance)",),
    example="nisa.bn_aggr(dst=mean_var, data=stats)",
)
def bn_aggr(dst: Any, data: Any, name: Any = None) -> None:
    """Combine ``bn_stats`` outputs into ``(mean, variance)`` per partition on VectorE.

    ``data`` holds ``(count, mean, variance·count)`` triples per partition (any number of them,
    e.g. two ``bn_stats`` outputs side by side); ``dst`` gets the pooled mean and the population
    variance of all the elements they describe, computed in fp32.
    """
    ctx = current()
    op = "bn_aggr"
    data = check_compute_operand(ctx, op, "data", data, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    _same_partitions(op, [("data", data), ("dst", dst)])
    if _epp(data) == 0 or _epp(data) % 3:
        raise NkiValidationError(
            "err_bn_aggr_input_size",
            "bn_aggr data must hold a multiple of 3 elements per partition ((count, mean, var*count) triples from bn_stats), "
            f"got {_epp(data)}",
        )
    if _epp(dst) != 2:
        raise NkiValidationError(
            "err_bn_aggr_dst_shape", f"bn_aggr dst must hold 2 elements per partition (mean, variance), got {_shape(dst, 'dst')}"
        )
    record(ctx, op, "vector", [("data", data)], [("dst", dst)])
    if not ctx.compute:
        return
    p = _pp(data)
    s = _rows(f32(data), p).reshape(p, -1, 3)
    n, m, m2 = s[..., 0], s[..., 1], s[..., 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        total = n.sum(axis=1)
        mean = (n * m).sum(axis=1) / total
        var = (m2 + n * np.square(m - mean[:, None])).sum(axis=1) / total
    close_psum_group(data)
    write(ctx, dst, np.stack([mean, var], axis=1).astype(np.float32).reshape(dst.shape))
