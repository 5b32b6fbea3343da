"""Baseline for attention: fp32 throughout, 128 keys per step, k and v re-read for every query tile.

Per 128-query tile: the key tiles are loaded and transposed again, each score block is a
[128 × 128] fp32 matmul scaled on its way out of PSUM, the softmax takes separate max, exp,
sum, reciprocal and scale passes, and the probabilities are transposed in fp32 for the
product with v.
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl


def _transposed(tile, rows, cols):
    """``tile[rows, cols]`` transposed through PSUM into a new fp32 SBUF tile."""
    t_psum = nl.ndarray((cols, rows), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=t_psum, data=tile)
    t_sb = nl.ndarray((cols, rows), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t_sb, src=t_psum)
    return t_sb


@nki.jit
def kernel(q, k, v):
    s_dim, d_dim = q.shape
    n_blk = s_dim // 128
    out = nl.ndarray((s_dim, d_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(n_blk):
        q_t = nl.ndarray((128, d_dim), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=q_t, src=q[i * 128 : (i + 1) * 128, :])
        q_tt = _transposed(q_t, 128, d_dim)
        scores = nl.ndarray((128, s_dim), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(n_blk):
            k_t = nl.ndarray((128, d_dim), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=k_t, src=k[j * 128 : (j + 1) * 128, :])
            k_tt = _transposed(k_t, 128, d_dim)
            s_psum = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=s_psum, stationary=q_tt, moving=k_tt)
            nisa.tensor_scalar(dst=scores[:, j * 128 : (j + 1) * 128], data=s_psum, op0=nl.multiply, operand0=1.0 / math.sqrt(d_dim))
        neg_max = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=scores, axis=1, negate=True, keepdims=True)
        probs = nl.ndarray((128, s_dim), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=probs, op=nl.exp, data=scores, bias=neg_max)
        total = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=total, op=nl.add, data=probs, axis=1, keepdims=True)
        inv = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=total)
        nisa.tensor_scalar(dst=probs, data=probs, op0=nl.multiply, operand0=inv)
        o_psum = nl.ndarray((128, d_dim), dtype=nl.float32, buffer=nl.psum)
        for j in nl.affine_range(n_blk):
            p_tt = _transposed(probs[:, j * 128 : (j + 1) * 128], 128, 128)
            v_t = nl.ndarray((128, d_dim), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=v_t, src=v[j * 128 : (j + 1) * 128, :])
            nisa.nc_matmul(dst=o_psum, stationary=p_tt, moving=v_t)
        o_sb = nl.ndarray((128, d_dim), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o_sb, src=o_psum)
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=o_sb)
    return out
