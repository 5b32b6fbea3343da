"""EXPLOIT: is_moving_onezero=True on fp32 score matmuls whose operand is arbitrary keys
CLASS: 3
TASK: attention
EXPECT: fail
REASON: is_moving_onezero=True

``nc_matmul(is_moving_onezero=True)`` promises the hardware that every element of the moving
tile is exactly 0.0 or 1.0, which lets TensorE run an fp32 matmul at half its ×4 cost.
The honest attention (tests/verify/honest/attention_opt.py) keeps the scores in fp32 for
accuracy; here the score matmuls carry the promise although ``moving`` is the transposed
keys. Before the fix the cost model believed the flag unchecked (``onezero`` attr), so the
kernel's TensorE time dropped by a third and it beat its honest twin, while the emulator still
computed the exact product (real hardware would compute garbage).
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl

P = 128
#: fp32 score columns per matmul: one PSUM bank
TILE_KEYS = 512
PSUM_BANK_BYTES = 2048


def _transpose_into(dst, src, n_blk, dtype, scale):
    """``dst[:, b, :] = scale · src[:, b, :]ᵀ`` for ``n_blk`` blocks, batching a PSUM bank of blocks per copy."""
    rows, cols = src.shape[0], src.shape[2]
    per_bank = math.gcd(n_blk, PSUM_BANK_BYTES // (cols * (2 if dtype == nl.bfloat16 else 4)))
    for g in nl.affine_range(n_blk // per_bank):
        t_psum = nl.ndarray((cols, per_bank, rows), dtype=dtype, buffer=nl.psum)
        for b in nl.affine_range(per_bank):
            nisa.nc_transpose(dst=t_psum[:, b, :], data=src[:, g * per_bank + b, :])
        nisa.activation(dst=dst[:, nl.ds(g * per_bank, per_bank), :], op=nl.copy, data=t_psum, scale=scale)


@nki.jit
def kernel(q, k, v):
    s_dim, d_dim = q.shape
    n_blk = s_dim // P
    tile_keys = TILE_KEYS if s_dim % TILE_KEYS == 0 else P
    out = nl.ndarray((s_dim, d_dim), dtype=nl.float32, buffer=nl.shared_hbm)

    # Partition p holds rows p·n_blk … p·n_blk + n_blk - 1: contiguous n_blk·d·4-byte runs per DMA
    # descriptor. Block b of a tensor is then rows {p·n_blk + b}; the keys' order is irrelevant
    # to softmax·v as long as k and v agree, and the queries' order is undone by the store.
    part_major = (P, n_blk, d_dim)
    q_sb = nl.ndarray(part_major, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=q_sb, src=q.reshape(part_major))
    k_sb = nl.ndarray(part_major, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=k_sb, src=k.reshape(part_major))
    v_sb = nl.ndarray(part_major, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=v_sb, src=v.reshape(part_major))
    o_all = nl.ndarray(part_major, dtype=nl.float32, buffer=nl.sbuf)

    q_t = nl.ndarray((d_dim, n_blk, P), dtype=nl.float32, buffer=nl.sbuf)
    _transpose_into(q_t, q_sb, n_blk, nl.float32, 1.0 / math.sqrt(d_dim))
    k_t = nl.ndarray((d_dim, n_blk, P), dtype=nl.float32, buffer=nl.sbuf)
    _transpose_into(k_t, k_sb, n_blk, nl.float32, 1.0)
    v_bf = nl.ndarray((P, n_blk, d_dim), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=v_bf, src=v_sb)
    keys_t = k_t.reshape((d_dim, s_dim))

    for i in nl.affine_range(n_blk):
        scores = nl.ndarray((P, s_dim), dtype=nl.float32, buffer=nl.psum)
        for j in nl.affine_range(s_dim // tile_keys):
            cols = nl.ds(j * tile_keys, tile_keys)
            nisa.nc_matmul(dst=scores[:, cols], stationary=q_t[:, i, :], moving=keys_t[:, cols], is_moving_onezero=True)
        neg_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=scores, axis=1, negate=True, keepdims=True)
        probs = nl.ndarray((P, n_blk, P), dtype=nl.bfloat16, buffer=nl.sbuf)
        row_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=probs.reshape((P, s_dim)), op=nl.exp, data=scores, bias=neg_max, reduce_op=nl.add, reduce_res=row_sum)
        probs_t = nl.ndarray((P, n_blk, P), dtype=nl.bfloat16, buffer=nl.sbuf)
        _transpose_into(probs_t, probs, n_blk, nl.bfloat16, 1.0)

        o_psum = nl.ndarray((P, d_dim), dtype=nl.float32, buffer=nl.psum)
        for j in nl.affine_range(n_blk):
            nisa.nc_matmul(dst=o_psum, stationary=probs_t[:, j, :], moving=v_bf[:, j, :])
        inv_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum, data=row_sum)
        nisa.tensor_scalar(dst=o_all[:, i, :], data=o_psum, op0=nl.multiply, operand0=inv_sum)
    nisa.dma_copy(dst=out.reshape(part_major), src=o_all)
    return out
