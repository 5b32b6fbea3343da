"""Baseline for causal_attention: the full score matrix, masked afterwards.

Per 128-query tile, every key block is scored (fp32, the blocks above the diagonal too),
the whole score row is masked with one GpSimd affine_select, and the exponentials are
multiplied by all of v (fp32, 128 keys per matmul, v and k re-read per tile); the row sums
normalize the result on its way out of PSUM.
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl


def _rows_transposed(src, blk, scale):
    """Rows ``blk·128 … blk·128 + 127`` of ``src`` as an fp32 ``[d, 128]`` tile, times ``scale``."""
    d_dim = src.shape[1]
    rows = nl.ndarray((128, d_dim), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=rows, src=src[blk * 128 : (blk + 1) * 128, :])
    rows_t = nl.ndarray((d_dim, 128), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=rows_t, data=rows)
    scaled = nl.ndarray((d_dim, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=scaled, data=rows_t, op0=nl.multiply, operand0=scale)
    return scaled


@nki.jit
def kernel(q, k, v):
    s_dim, d_dim = q.shape
    out = nl.ndarray((s_dim, d_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(s_dim // 128):
        q_cols = _rows_transposed(q, i, 1.0 / math.sqrt(d_dim))
        raw = nl.ndarray((128, s_dim), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(s_dim // 128):
            blk_psum = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=blk_psum, stationary=q_cols, moving=_rows_transposed(k, j, 1.0))
            nisa.tensor_copy(dst=raw[:, j * 128 : (j + 1) * 128], src=blk_psum)
        # keep key j for query i·128 + p when i·128 + p - j >= 0
        masked = nl.ndarray((128, s_dim), dtype=nl.float32, buffer=nl.sbuf)
        nisa.affine_select(
            dst=masked,
            pattern=[[-1, s_dim]],
            channel_multiplier=1,
            on_true_tile=raw,
            on_false_value=-3.0e38,
            cmp_op=nl.greater_equal,
            offset=i * 128,
        )
        row_max = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=row_max, op=nl.maximum, data=masked, axis=1, keepdims=True)
        shifted = nl.ndarray((128, s_dim), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=shifted, data=masked, op0=nl.subtract, operand0=row_max)
        expd = nl.ndarray((128, s_dim), dtype=nl.float32, buffer=nl.sbuf)
        denom = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=expd, op=nl.exp, data=shifted, reduce_op=nl.add, reduce_res=denom)
        o_psum = nl.ndarray((128, d_dim), dtype=nl.float32, buffer=nl.psum)
        for j in nl.affine_range(s_dim // 128):
            et_psum = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=et_psum, data=expd[:, j * 128 : (j + 1) * 128])
            e_cols = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=e_cols, op=nl.copy, data=et_psum)
            v_rows = nl.ndarray((128, d_dim), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=v_rows, src=v[j * 128 : (j + 1) * 128, :])
            nisa.nc_matmul(dst=o_psum, stationary=e_cols, moving=v_rows)
        recip = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=recip, data=denom)
        o_rows = nl.ndarray((128, d_dim), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=o_rows, data=o_psum, op0=nl.multiply, operand0=recip)
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=o_rows)
    return out
