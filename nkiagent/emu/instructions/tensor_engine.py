"""TensorE: ``nc_matmul`` (fp32 accumulation in PSUM) and ``nc_transpose``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes as dt
from .. import engines as _engines
from ..errors import NkiCapacityError, NkiValidationError, warn
from ..memory import current
from ..ops import (
    CHECKED_GEOMETRIES_MAX,
    ON_CHIP,
    MatmulGroup,
    check_compute_operand,
    close_psum_group,
    f32,
    flush_matmul_group,
    record,
    require_tensor,
    write,
)
from ..registry import CostAttrs, instruction, page
from ..tensor import NkiTensor
from .common import _p, _pf, engine, matmul_perf_mode


@dataclass(frozen=True, slots=True, kw_only=True)
class MatmulAttrs(CostAttrs):
    """A matmul's contraction K, stationary columns M, moving columns N and what changes its rate."""

    K: int
    M: int
    N: int
    fp32: bool = False
    onezero: bool = False
    accumulate: bool | None = None
    tile_size: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TransposeAttrs(CostAttrs):
    """A transpose's partitions P and free size F."""

    P: int
    F: int


_FP32_LIKE = (dt.float32, dt.tfloat32)


@instruction(
    family="TensorE",
    engines="tensor",
    source=page("nc_matmul"),
    attrs=MatmulAttrs,
    rules=(
        "stationary [K, M] and moving [K, N] in SBUF, K ≤ 128 and M ≤ 128; N ≤ 512 (fp32 dst)",
        "dst [M, N] in PSUM, fp32 (bf16 allowed on trn3; is_transpose on trn2+ writes bf16/fp16 moving in its own dtype), within one 2 KiB PSUM bank on trn1/trn2",
        "fp32/tf32 operands pair only with fp32/tf32; is_*_onezero flags are checked against the data",
        "accumulate=None: the first write overwrites, later matmuls into the tile accumulate",
    ),
    example="nisa.nc_matmul(dst=acc_psum, stationary=a_t[:, k, :], moving=b_sb[:, k, :])",
)
def nc_matmul(
    dst: Any,
    stationary: Any,
    moving: Any,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    accumulate: Any = None,
    tile_position: Any = (),
    tile_size: Any = (),
    perf_mode: Any = matmul_perf_mode.none,
    name: Any = None,
) -> None:
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
        raise NkiValidationError(
            "err_matmul_dst_not_psum", "Matmult dst tensor is not psum: nc_matmul must write its result to a PSUM tensor"
        )
    check_compute_operand(ctx, opn, "dst", dst, "tensor", ON_CHIP)
    if tile_position or tile_size or not ctx.fast:
        tiling = (tuple(tile_position), tuple(tile_size)) if tile_position or tile_size else None
        k, m, n, fp32 = _check_matmul(ctx.target, st, mv, dst, bool(is_transpose), tiling)
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
    onezero = bool(is_stationary_onezero or is_moving_onezero) and _onezero_kept(
        ctx, (("stationary", st, is_stationary_onezero), ("moving", mv, is_moving_onezero))
    )
    acc_mode = None if accumulate is None else bool(accumulate)
    was_written = dst._a.written
    # (the attributes only go into a trace: an untraced run skips building them, 10⁴ times a second)
    attrs: dict[str, Any] = (
        {}
        if ctx.trace is None
        else {
            "K": k,
            "M": m,
            "N": n,
            "fp32": fp32,
            "onezero": onezero,
            "accumulate": acc_mode,
            "tile_size": tuple(tile_size) if tile_size else None,
        }
    )
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
    if not ctx.fast:
        flush_matmul_group(ctx)  # the reference path: every instruction lands on its own


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


def _check_matmul(
    t: Any, st: NkiTensor, mv: NkiTensor, dst: NkiTensor, is_transpose: bool, tiling: tuple[tuple[Any, ...], tuple[Any, ...]] | None
) -> tuple[int, int, int, bool]:
    """``nc_matmul``'s shape, dtype, bank and tiling rules; ``(K, M, N, fp32 operands)`` when they hold."""
    k, km, pd = _p(st), _p(mv), _p(dst)
    m, n = st.size // max(k, 1), mv.size // max(km, 1)
    if km != k:
        raise NkiValidationError(
            "err_matmul_contraction", f"nc_matmul stationary and moving contraction (partition) sizes differ: {k} vs {km}"
        )
    if m > t.gemm_stationary_fmax:
        raise NkiValidationError(
            "err_matmul_stationary_size",
            f"nc_matmul stationary free size {m} exceeds maximum {t.gemm_stationary_fmax} (gemm_stationary_fmax)",
        )
    dst_bf16 = dst.dtype == dt.bfloat16
    nmax = t.matmul_moving_max_bf16 if dst_bf16 else t.matmul_moving_max_fp32
    if n > nmax:
        raise NkiValidationError(
            "err_matmul_moving_size", f"nc_matmul moving free size {n} exceeds maximum {nmax} on {t.name} (gemm_moving_fmax)"
        )
    if pd != m or dst.size // max(pd, 1) != n:
        raise NkiValidationError(
            "err_matmul_dst_shape",
            f"nc_matmul dst{list(dst.shape)} must be [{m}, {n}] for stationary{list(st.shape)} and moving{list(mv.shape)}",
        )
    # Transpose mode (trn2+) moves 16-bit values bit-exactly, so it writes them to PSUM in their own dtype.
    transpose_16bit = is_transpose and t.nc_version >= 3 and dst.dtype in (dt.bfloat16, dt.float16) and mv.dtype == dst.dtype
    if dst.dtype != dt.float32 and not (t.matmul_bf16_dst and dst_bf16) and not transpose_16bit:
        raise NkiValidationError(
            "err_matmul_dst_dtype", f"nc_matmul dst dtype must be float32 on gen{t.nc_version}, got {dt.dtype_name(dst.dtype)}"
        )
    fp32 = st.dtype in _FP32_LIKE
    if fp32 != (mv.dtype in _FP32_LIKE):
        raise NkiValidationError(
            "err_matmul_dtype_mix",
            f"nc_matmul fp32/tf32 operands must pair with fp32/tf32: stationary {dt.dtype_name(st.dtype)}, moving {dt.dtype_name(mv.dtype)}",
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
            raise NkiValidationError(
                "err_matmul_tiling", f"nc_matmul tile_position {tile_position} and tile_size {tile_size} must be multiples of 32"
            )
    return k, m, n, fp32


def _bank_error(dst: NkiTensor, reg: Any, t: Any) -> Exception:
    return NkiCapacityError(
        "err_psum_bank_crossing",
        f"nc_matmul dst `{dst.name}` spans PSUM bytes [{reg.b_lo}, {reg.b_hi}) per partition, crossing a {t.psum_bank_bytes}-byte bank boundary; "
        f"a matmul result must lie within one PSUM bank on {t.name}",
    )


@instruction(
    family="TensorE",
    engines="tensor vector",
    source=page("nc_transpose"),
    attrs=TransposeAttrs,
    rules=("TensorE: SBUF [≤128, ≤128] to PSUM; VectorE: [≤32, ≤32]; dst is [F, P] of data's dtype",),
    example="nisa.nc_transpose(dst=xt_psum, data=x_sb)",
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
            "err_exceed_max_supported_dimension",
            f"parameter 'data[{', '.join(map(str, data.shape))}]' of 'transpose' exceed max supported number of dimensions of 2.",
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
        raise NkiValidationError(
            "err_transpose_dtype",
            f"nc_transpose requires dst.dtype == data.dtype, got {dt.dtype_name(dst.dtype)} and {dt.dtype_name(data.dtype)}",
        )
    record(ctx, opn, eng, [("data", data)], [("dst", dst)], P=p, F=f)
    if ctx.compute:
        close_psum_group(data)
        write(ctx, dst, _pf(data._np(), p).T.reshape(dst.shape))
