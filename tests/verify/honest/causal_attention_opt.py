"""Optimized causal_attention: key blocks above the diagonal are never touched, the mask is a matmul.

Query tile i needs keys 0 … 128·(i+1) - 1 only, so its score row, its softmax, its
transposes and its P·V products all stop at the diagonal block — about half the work of
the full matrix. The outer loop is unrolled (``static_range``) so those lengths are plain
integers. The diagonal block is masked without leaving PSUM: after its score matmul, one
more fp32 matmul of the identity with a precomputed additive mask (0 on and below the
diagonal, -3e38 above; built once on GpSimd) accumulates the mask into the scores. Scores
use fp32 q and k (the softmax of large inputs is nearly one-hot); exp(s - max) is written in
bf16 with its row sums by one ScalarE instruction, and P·V runs in bf16.
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl

P = 128
#: fp32 score columns per matmul: one PSUM bank
TILE_KEYS = 512
MASKED = -3.0e38


def _diagonal_select(keep, other, cmp_op):
    """A [128, 128] fp32 tile holding ``keep`` where ``cmp_op(p - j, 0)`` holds and ``other`` elsewhere (GpSimd)."""
    filled = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=filled, value=keep)
    selected = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.sbuf)
    nisa.affine_select(dst=selected, pattern=[[-1, P]], channel_multiplier=1, on_true_tile=filled, on_false_value=other, cmp_op=cmp_op)
    return selected


@nki.jit
def kernel(q, k, v):
    s_dim, d_dim = q.shape
    n_blk = s_dim // P
    out = nl.ndarray((s_dim, d_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    blocks = (n_blk, P, d_dim)

    q_sb = nl.ndarray((P, n_blk, d_dim), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=q_sb, src=q.reshape(blocks).permute((1, 0, 2)))
    k_sb = nl.ndarray((P, n_blk, d_dim), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=k_sb, src=k.reshape(blocks).permute((1, 0, 2)))
    v_f32 = nl.ndarray((P, n_blk, d_dim), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=v_f32, src=v.reshape(blocks).permute((1, 0, 2)))
    v_bf = nl.ndarray((P, n_blk, d_dim), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=v_bf, src=v_f32)

    ident = _diagonal_select(1.0, 0.0, nl.equal)
    mask = _diagonal_select(0.0, MASKED, nl.greater_equal)

    # q_t / k_t: [d, S] with d on partitions; q_t carries the 1/sqrt(d) scale
    q_t = nl.ndarray((d_dim, s_dim), dtype=nl.float32, buffer=nl.sbuf)
    k_t = nl.ndarray((d_dim, s_dim), dtype=nl.float32, buffer=nl.sbuf)
    for b in nl.affine_range(n_blk):
        pair = nl.ndarray((d_dim, 2, P), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=pair[:, 0, :], data=q_sb[:, b, :])
        nisa.nc_transpose(dst=pair[:, 1, :], data=k_sb[:, b, :])
        nisa.activation(dst=q_t[:, nl.ds(b * P, P)], op=nl.copy, data=pair[:, 0, :], scale=1.0 / math.sqrt(d_dim))
        nisa.tensor_copy(dst=k_t[:, nl.ds(b * P, P)], src=pair[:, 1, :])

    o_all = nl.ndarray((P, n_blk, d_dim), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.static_range(n_blk):
        width = (i + 1) * P
        scores = nl.ndarray((P, width), dtype=nl.float32, buffer=nl.psum)
        for c in nl.affine_range(math.ceil(width / TILE_KEYS)):
            cols = nl.ds(c * TILE_KEYS, min(TILE_KEYS, width - c * TILE_KEYS))
            nisa.nc_matmul(dst=scores[:, cols], stationary=q_t[:, nl.ds(i * P, P)], moving=k_t[:, cols])
        nisa.nc_matmul(dst=scores[:, nl.ds(i * P, P)], stationary=ident, moving=mask)

        neg_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=scores, axis=1, negate=True, keepdims=True)
        probs = nl.ndarray((P, width), dtype=nl.bfloat16, buffer=nl.sbuf)
        row_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=probs, op=nl.exp, data=scores, bias=neg_max, reduce_op=nl.add, reduce_res=row_sum)

        o_psum = nl.ndarray((P, d_dim), dtype=nl.float32, buffer=nl.psum)
        for j in nl.affine_range(i + 1):
            pt_psum = nl.ndarray((P, P), dtype=nl.bfloat16, buffer=nl.psum)
            nisa.nc_transpose(dst=pt_psum, data=probs[:, nl.ds(j * P, P)])
            p_t = nl.ndarray((P, P), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.tensor_copy(dst=p_t, src=pt_psum)
            nisa.nc_matmul(dst=o_psum, stationary=p_t, moving=v_bf[:, j, :])
        inv_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum, data=row_sum)
        nisa.tensor_scalar(dst=o_all[:, i, :], data=o_psum, op0=nl.multiply, operand0=inv_sum)
    nisa.dma_copy(dst=out.reshape(blocks).permute((1, 0, 2)), src=o_all)
    return out
