"""Optimized matmul: both operands resident in SBUF from large row DMAs, K accumulated in PSUM.

The whole of lhsT (K·M·2 B) and rhs (K·N·2 B) is loaded once, one 128-row K tile per DMA so
that the first products can start while later rows are still in flight; rhs rows are loaded
full-width (contiguous runs of N·2 bytes, the DMA's efficient regime). Each 128-row block of
the result is accumulated over all of K in up to four PSUM banks, so every product lands in
PSUM exactly once; the banks are evacuated alternately by VectorE and ScalarE and the block
is stored with one wide DMA.
"""

import nki
import nki.isa as nisa
import nki.language as nl

TILE_K = 128
TILE_M = 128
TILE_N = 512
#: result columns accumulated per row block: four PSUM banks, leaving four for the next block
BLOCK_N = 4 * TILE_N


@nki.jit
def kernel(lhsT, rhs):
    k_dim, m_dim = lhsT.shape
    n_dim = rhs.shape[1]
    n_k = k_dim // TILE_K
    block_n = min(BLOCK_N, n_dim)
    out = nl.ndarray((m_dim, n_dim), dtype=nl.float32, buffer=nl.shared_hbm)

    lhs_sb = nl.ndarray((TILE_K, n_k, m_dim), dtype=lhsT.dtype, buffer=nl.sbuf)
    rhs_sb = nl.ndarray((TILE_K, n_k, n_dim), dtype=rhs.dtype, buffer=nl.sbuf)
    for k in nl.affine_range(n_k):
        rows = nl.ds(k * TILE_K, TILE_K)
        nisa.dma_copy(dst=lhs_sb[:, k, :], src=lhsT[rows, :])
        nisa.dma_copy(dst=rhs_sb[:, k, :], src=rhs[rows, :])

    for m in nl.affine_range(m_dim // TILE_M):
        cols_m = nl.ds(m * TILE_M, TILE_M)
        for nb in nl.affine_range((n_dim + block_n - 1) // block_n):
            width = min(block_n, n_dim - nb * block_n)  # the last block may be narrower (N % 512 == 0 only)
            acc = nl.ndarray((TILE_M, width), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(n_k):
                for j in nl.affine_range(width // TILE_N):
                    cols_n = nl.ds(nb * block_n + j * TILE_N, TILE_N)
                    nisa.nc_matmul(dst=acc[:, nl.ds(j * TILE_N, TILE_N)], stationary=lhs_sb[:, k, cols_m], moving=rhs_sb[:, k, cols_n])
            res = nl.ndarray((TILE_M, width), dtype=nl.float32, buffer=nl.sbuf)
            for j in nl.static_range(width // TILE_N):  # unrolled: the engine alternates per bank
                bank = nl.ds(j * TILE_N, TILE_N)
                if j % 2 == 0:
                    nisa.tensor_copy(dst=res[:, bank], src=acc[:, bank])
                else:
                    nisa.activation(dst=res[:, bank], op=nl.copy, data=acc[:, bank])
            nisa.dma_copy(dst=out[cols_m, nl.ds(nb * block_n, width)], src=res)
    return out
