"""The four steps of the NKI matrix-multiplication tutorial, written for the 0.3+ API.

All compute ``result[M, N] = lhsT[K, M]ᵀ · rhs[K, N]`` with bf16 (or any matmul dtype)
inputs and an fp32 result. TensorE contracts over the partition axis, so both operands
arrive with K on partitions and every ``nc_matmul`` is one ``[128, 128]ᵀ · [128, 512]``
tile product accumulated in a PSUM bank. The steps differ only in data movement, which
is the point of the tutorial:

1. :func:`matmul_tiled` loads both operand tiles inside the K loop, so every tile is
   re-read from HBM for every output tile that needs it.
2. :func:`matmul_hoisted` hoists the loads out of the K loop: a K-column of ``lhsT`` is
   loaded once per M tile and reused across all N tiles.
3. :func:`matmul_block_free` blocks the free dimensions: ``FREE_BLOCK_TILES_M`` ×
   ``FREE_BLOCK_TILES_N`` output tiles share their operands, dividing HBM traffic for the
   rhs by the M blocking factor.
4. :func:`matmul_fully_optimized` also blocks K: operand blocks come in as wide DMAs, the
   PSUM partial products of each K block are added into fp32 accumulators held in SBUF
   for a whole column stripe of the result, and the result is stored once at the end.
   The block sizes are the tunable ``TILES_IN_BLOCK_*`` constants below.

Shapes must be multiples of the tiles (K of 128, M of 128, N of 512) and of the blocks
(block sizes larger than the problem are clamped to it).
"""

import nki
import nki.isa as nisa
import nki.language as nl

#: Output tiles per block along M and N in :func:`matmul_block_free` (the tutorial's 2 × 2).
FREE_BLOCK_TILES_M = 2
FREE_BLOCK_TILES_N = 2

#: Tiles per block in :func:`matmul_fully_optimized` (the tutorial's defaults M=16, N=2, K=8):
#: a 2048 × 1024 output block fed by 1024-deep operand blocks.
TILES_IN_BLOCK_M = 16
TILES_IN_BLOCK_N = 2
TILES_IN_BLOCK_K = 8


def _tiles():
    """``(TILE_K, TILE_M, TILE_N)``: the largest operand tile TensorE takes in one instruction."""
    return nl.tile_size.pmax, nl.tile_size.gemm_stationary_fmax, nl.tile_size.gemm_moving_fmax


def _shapes(lhsT, rhs, block_m, block_n, block_k):
    """``(K, M, N)`` after checking the operands agree on K and divide into the given block sizes."""
    K, M = lhsT.shape
    K2, N = rhs.shape
    assert K == K2, f"lhsT has K={K} rows but rhs has {K2}"
    assert M % block_m == 0 and N % block_n == 0 and K % block_k == 0, (
        f"M={M}, N={N}, K={K} must be multiples of {block_m}, {block_n}, {block_k}"
    )
    return K, M, N


def _store_psum(result_tile, res_psum):
    """Evacuate a PSUM tile to SBUF (VectorE) and DMA it to its place in the result."""
    res_sb = nl.ndarray(res_psum.shape, dtype=result_tile.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res_sb, src=res_psum)
    nisa.dma_copy(dst=result_tile, src=res_sb)


@nki.jit
def matmul_tiled(lhsT, rhs):
    """Step 1: plain tiling; operand tiles are loaded inside the K loop."""
    TILE_K, TILE_M, TILE_N = _tiles()
    K, M, N = _shapes(lhsT, rhs, TILE_M, TILE_N, TILE_K)
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            res_psum = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhsT_tile, src=lhsT[k * TILE_K : (k + 1) * TILE_K, m * TILE_M : (m + 1) * TILE_M])
                nisa.dma_copy(dst=rhs_tile, src=rhs[k * TILE_K : (k + 1) * TILE_K, n * TILE_N : (n + 1) * TILE_N])
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_tile, moving=rhs_tile)
            _store_psum(result[m * TILE_M : (m + 1) * TILE_M, n * TILE_N : (n + 1) * TILE_N], res_psum)
    return result


@nki.jit
def matmul_hoisted(lhsT, rhs):
    """Step 2: loads hoisted out of the K loop; the lhsT column of tiles is reused across N."""
    TILE_K, TILE_M, TILE_N = _tiles()
    K, M, N = _shapes(lhsT, rhs, TILE_M, TILE_N, TILE_K)
    n_k = K // TILE_K
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        lhsT_tiles = nl.ndarray((TILE_K, n_k, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(n_k):
            nisa.dma_copy(dst=lhsT_tiles[:, k, :], src=lhsT[k * TILE_K : (k + 1) * TILE_K, m * TILE_M : (m + 1) * TILE_M])
        for n in nl.affine_range(N // TILE_N):
            rhs_tiles = nl.ndarray((TILE_K, n_k, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(n_k):
                nisa.dma_copy(dst=rhs_tiles[:, k, :], src=rhs[k * TILE_K : (k + 1) * TILE_K, n * TILE_N : (n + 1) * TILE_N])
            res_psum = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(n_k):
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_tiles[:, k, :], moving=rhs_tiles[:, k, :])
            _store_psum(result[m * TILE_M : (m + 1) * TILE_M, n * TILE_N : (n + 1) * TILE_N], res_psum)
    return result


@nki.jit
def matmul_block_free(lhsT, rhs):
    """Step 3: blocked free dimensions; a block of M × N output tiles shares its operand tiles."""
    TILE_K, TILE_M, TILE_N = _tiles()
    K, M, N = lhsT.shape[0], lhsT.shape[1], rhs.shape[1]
    tiles_m = min(FREE_BLOCK_TILES_M, M // TILE_M)
    tiles_n = min(FREE_BLOCK_TILES_N, N // TILE_N)
    BLOCK_M, BLOCK_N = TILE_M * tiles_m, TILE_N * tiles_n
    _shapes(lhsT, rhs, BLOCK_M, BLOCK_N, TILE_K)
    n_k = K // TILE_K
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // BLOCK_M):
        lhsT_tiles = nl.ndarray((TILE_K, n_k, BLOCK_M), dtype=lhsT.dtype, buffer=nl.sbuf)
        for bm in nl.affine_range(tiles_m):
            cols = nl.ds(m * BLOCK_M + bm * TILE_M, TILE_M)
            for k in nl.affine_range(n_k):
                nisa.dma_copy(dst=lhsT_tiles[:, k, bm * TILE_M : (bm + 1) * TILE_M], src=lhsT[k * TILE_K : (k + 1) * TILE_K, cols])
        for n in nl.affine_range(N // BLOCK_N):
            rhs_tiles = nl.ndarray((TILE_K, n_k, BLOCK_N), dtype=rhs.dtype, buffer=nl.sbuf)
            for bn in nl.affine_range(tiles_n):
                cols = nl.ds(n * BLOCK_N + bn * TILE_N, TILE_N)
                for k in nl.affine_range(n_k):
                    nisa.dma_copy(dst=rhs_tiles[:, k, bn * TILE_N : (bn + 1) * TILE_N], src=rhs[k * TILE_K : (k + 1) * TILE_K, cols])
            for bm in nl.affine_range(tiles_m):
                for bn in nl.affine_range(tiles_n):
                    res_psum = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(n_k):
                        nisa.nc_matmul(
                            dst=res_psum,
                            stationary=lhsT_tiles[:, k, bm * TILE_M : (bm + 1) * TILE_M],
                            moving=rhs_tiles[:, k, bn * TILE_N : (bn + 1) * TILE_N],
                        )
                    rows = nl.ds(m * BLOCK_M + bm * TILE_M, TILE_M)
                    _store_psum(result[rows, nl.ds(n * BLOCK_N + bn * TILE_N, TILE_N)], res_psum)
    return result


@nki.jit
def matmul_fully_optimized(lhsT, rhs, tiles_in_block_m=TILES_IN_BLOCK_M, tiles_in_block_n=TILES_IN_BLOCK_N, tiles_in_block_k=TILES_IN_BLOCK_K):
    """Step 4: blocked M, N and K, block-wide DMAs, fp32 accumulation of K blocks in SBUF.

    For each column stripe of ``BLOCK_N`` result columns, fp32 accumulators for all M rows live
    in SBUF; every K block adds its PSUM partial products into them, so each operand block is
    loaded once per stripe and the result is written to HBM exactly once. The accumulator
    stripe is the one large long-lived buffer: it is allocated once, before the short-lived
    operand blocks, and re-zeroed for every stripe, which keeps SBUF from fragmenting.
    """
    TILE_K, TILE_M, TILE_N = _tiles()
    K, M, N = lhsT.shape[0], lhsT.shape[1], rhs.shape[1]
    tiles_m = min(tiles_in_block_m, M // TILE_M)
    tiles_n = min(tiles_in_block_n, N // TILE_N)
    tiles_k = min(tiles_in_block_k, K // TILE_K)
    BLOCK_M, BLOCK_N, BLOCK_K = TILE_M * tiles_m, TILE_N * tiles_n, TILE_K * tiles_k
    _shapes(lhsT, rhs, BLOCK_M, BLOCK_N, BLOCK_K)
    m_tiles = M // TILE_M
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((TILE_M, m_tiles, BLOCK_N), dtype=nl.float32, buffer=nl.sbuf)
    # Stripes reuse `acc` and K blocks accumulate into it: loop-carried, hence sequential_range.
    for n in nl.sequential_range(N // BLOCK_N):
        stripe = nl.ds(n * BLOCK_N, BLOCK_N)
        nisa.memset(dst=acc, value=0.0)
        for k in nl.sequential_range(K // BLOCK_K):
            rhs_block = nl.ndarray((TILE_K, tiles_k, BLOCK_N), dtype=rhs.dtype, buffer=nl.sbuf)
            for bk in nl.affine_range(tiles_k):
                nisa.dma_copy(dst=rhs_block[:, bk, :], src=rhs[nl.ds((k * tiles_k + bk) * TILE_K, TILE_K), stripe])
            for m in nl.affine_range(M // BLOCK_M):
                lhsT_block = nl.ndarray((TILE_K, tiles_k, BLOCK_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                for bk in nl.affine_range(tiles_k):
                    nisa.dma_copy(
                        dst=lhsT_block[:, bk, :], src=lhsT[nl.ds((k * tiles_k + bk) * TILE_K, TILE_K), nl.ds(m * BLOCK_M, BLOCK_M)]
                    )
                for bn in nl.affine_range(tiles_n):
                    for bm in nl.affine_range(tiles_m):
                        res_psum = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                        for bk in nl.affine_range(tiles_k):
                            nisa.nc_matmul(
                                dst=res_psum,
                                stationary=lhsT_block[:, bk, bm * TILE_M : (bm + 1) * TILE_M],
                                moving=rhs_block[:, bk, bn * TILE_N : (bn + 1) * TILE_N],
                            )
                        acc_tile = acc[:, m * tiles_m + bm, bn * TILE_N : (bn + 1) * TILE_N]
                        nisa.tensor_tensor(dst=acc_tile, data1=acc_tile, data2=res_psum, op=nl.add)
        for mt in nl.affine_range(m_tiles):
            nisa.dma_copy(dst=result[mt * TILE_M : (mt + 1) * TILE_M, stripe], src=acc[:, mt, :])
    return result
