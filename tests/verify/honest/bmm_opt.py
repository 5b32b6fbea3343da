"""Optimized bmm: whole-batch operand DMAs in partition-major order, transposes batched per PSUM bank.

Per batch, a and b are each loaded with one DMA in which partition p holds consecutive rows
(p·T … p·T + T - 1), so every descriptor moves T·row bytes contiguously instead of one row.
For b that permutes the contraction index (block j holds k = p·n_k + j); the matching
columns of a are read with a stride of n_k when its blocks are transposed, so the sum over
k is unchanged. The rows of a (and so of the result) are permuted the same way, which the
single partition-major store of the batch's result undoes. Transposes of a go eight bf16
blocks to a PSUM bank and leave it with one copy; K accumulates in PSUM.
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl

P = 128
TILE_N = 512
#: bf16 [128, 128] transposes per PSUM bank
BLOCKS_PER_BANK = 8


@nki.jit
def kernel(a, b):
    n_batch, m_dim, k_dim = a.shape
    n_dim = b.shape[2]
    n_k = k_dim // P
    n_m = m_dim // P
    out = nl.ndarray((n_batch, m_dim, n_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    for bi in nl.affine_range(n_batch):
        a_sb = nl.ndarray((P, n_m, k_dim), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_sb, src=a[bi].reshape((P, n_m, k_dim)))
        b_sb = nl.ndarray((P, n_k, n_dim), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=b_sb, src=b[bi].reshape((P, n_k, n_dim)))

        # a_t[:, t·n_k + j, :] = (rows {p·n_m + t}, columns {p'·n_k + j})ᵀ of this batch's a
        a_t = nl.ndarray((P, n_m * n_k, P), dtype=a.dtype, buffer=nl.sbuf)
        per_bank = math.gcd(BLOCKS_PER_BANK, n_k)
        for t in nl.affine_range(n_m):
            for g in nl.affine_range(n_k // per_bank):
                t_psum = nl.ndarray((P, per_bank, P), dtype=a.dtype, buffer=nl.psum)
                for j in nl.affine_range(per_bank):
                    nisa.nc_transpose(dst=t_psum[:, j, :], data=a_sb[:, t, (g * per_bank + j) :: n_k])
                nisa.tensor_copy(dst=a_t[:, nl.ds(t * n_k + g * per_bank, per_bank), :], src=t_psum)

        res = nl.ndarray((P, n_m, n_dim), dtype=nl.float32, buffer=nl.sbuf)
        for t in nl.affine_range(n_m):
            for n in nl.affine_range(n_dim // TILE_N):
                cols = nl.ds(n * TILE_N, TILE_N)
                acc = nl.ndarray((P, TILE_N), dtype=nl.float32, buffer=nl.psum)
                for j in nl.affine_range(n_k):
                    nisa.nc_matmul(dst=acc, stationary=a_t[:, t * n_k + j, :], moving=b_sb[:, j, cols])
                nisa.activation(dst=res[:, t, cols], op=nl.copy, data=acc)
        nisa.dma_copy(dst=out[bi].reshape((P, n_m, n_dim)), src=res)
    return out
