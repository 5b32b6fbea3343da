"""Single-head attention ``out = softmax(Qᵀ K) · V`` (no scaling, no mask).

Layout: ``q [d, seq_q]`` and ``k [d, seq_k]`` with the head dimension ``d ≤ 128`` on
partitions (TensorE contracts over partitions, so QᵀK needs no transpose), ``v [seq_k, d]``,
and ``out [seq_q, d]`` in fp32. Fold a ``1/sqrt(d)`` scale into ``q`` beforehand if wanted.

Per tile of 128 queries:

1. the full score row ``[128, seq_k]`` is built in PSUM by ``seq_k / 512`` matmuls, one per
   PSUM bank. Two query tiles' score rows are live at once (the next one is allocated
   before the previous one is released), so ``seq_k ≤ 1024`` — 2 banks each — leaves room
   for the P·V tiles in the 8 banks of PSUM;
2. softmax straight out of PSUM: a negated max reduction, then one ScalarE
   ``exp(s - max)`` that writes the probabilities to SBUF in V's dtype and sums each row;
3. ``P · V`` needs the keys on partitions, so each 128-key block of P is transposed on
   TensorE and multiplied with the matching V block, accumulating in one PSUM tile;
4. the accumulated rows are scaled by the reciprocal row sums while leaving PSUM.

Q, K and V are loaded once and stay in SBUF.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def attention(q, k, v):
    """``softmax(qᵀ k, axis=-1) · v`` for ``q [d, Sq]``, ``k [d, Sk]``, ``v [Sk, d]``; returns fp32 ``[Sq, d]``."""
    d, seq_q = q.shape
    d_k, seq_k = k.shape
    seq_v, d_v = v.shape
    TILE_Q = nl.tile_size.gemm_stationary_fmax  # queries per tile: the stationary free size
    TILE_KV = nl.tile_size.gemm_moving_fmax  # keys per score matmul: one PSUM bank of fp32
    TILE_S = nl.tile_size.pmax  # keys per P·V matmul: the contraction runs over partitions
    assert d == d_k and d <= nl.tile_size.pmax, f"q and k need the same head dim ≤ {nl.tile_size.pmax}, got {d} and {d_k}"
    assert seq_v == seq_k and d_v <= nl.tile_size.gemm_moving_fmax, f"v must be [{seq_k}, d ≤ 512], got {list(v.shape)}"
    assert seq_q % TILE_Q == 0 and seq_k % TILE_KV == 0, f"seq_q must be a multiple of {TILE_Q} and seq_k of {TILE_KV}"
    assert seq_k <= 2 * TILE_KV, f"the score row of {seq_k} keys must fit in 2 PSUM banks (seq_k ≤ {2 * TILE_KV})"

    out = nl.ndarray((seq_q, d_v), dtype=nl.float32, buffer=nl.shared_hbm)
    q_sb = nl.ndarray((d, seq_q), dtype=q.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=q_sb, src=q)
    k_sb = nl.ndarray((d, seq_k), dtype=k.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=k_sb, src=k)
    v_sb = nl.ndarray((TILE_S, seq_k // TILE_S, d_v), dtype=v.dtype, buffer=nl.sbuf)
    for s in nl.affine_range(seq_k // TILE_S):
        nisa.dma_copy(dst=v_sb[:, s, :], src=v[s * TILE_S : (s + 1) * TILE_S, :])

    for i in nl.affine_range(seq_q // TILE_Q):
        scores = nl.ndarray((TILE_Q, seq_k), dtype=nl.float32, buffer=nl.psum)
        for j in nl.affine_range(seq_k // TILE_KV):
            nisa.nc_matmul(
                dst=scores[:, j * TILE_KV : (j + 1) * TILE_KV],
                stationary=q_sb[:, i * TILE_Q : (i + 1) * TILE_Q],
                moving=k_sb[:, j * TILE_KV : (j + 1) * TILE_KV],
            )

        neg_max = nl.ndarray((TILE_Q, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=scores, axis=1, negate=True, keepdims=True)
        probs = nl.ndarray((TILE_Q, seq_k), dtype=v.dtype, buffer=nl.sbuf)
        row_sum = nl.ndarray((TILE_Q, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=probs, op=nl.exp, data=scores, bias=neg_max, reduce_op=nl.add, reduce_res=row_sum)
        inv_sum = nl.ndarray((TILE_Q, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum, data=row_sum)

        out_psum = nl.ndarray((TILE_Q, d_v), dtype=nl.float32, buffer=nl.psum)
        for s in nl.affine_range(seq_k // TILE_S):
            probs_t_psum = nl.ndarray((TILE_S, TILE_Q), dtype=probs.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=probs_t_psum, data=probs[:, s * TILE_S : (s + 1) * TILE_S], engine=nisa.engine.tensor)
            probs_t = nl.ndarray((TILE_S, TILE_Q), dtype=probs.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=probs_t, src=probs_t_psum)
            nisa.nc_matmul(dst=out_psum, stationary=probs_t, moving=v_sb[:, s, :])

        out_sb = nl.ndarray((TILE_Q, d_v), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=out_sb, data=out_psum, op0=nl.multiply, operand0=inv_sum)
        nisa.dma_copy(dst=out[i * TILE_Q : (i + 1) * TILE_Q, :], src=out_sb)
    return out
