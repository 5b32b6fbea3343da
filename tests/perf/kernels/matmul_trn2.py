"""The trn2 2048³ bf16 matmul MFU ladder (nki-reference §4.5g), one kernel per published step.

All compute ``result[M, N] = lhsT[K, M]ᵀ · rhs[K, N]`` from bf16 operands into a bf16 result,
one ``[128, 128]ᵀ · [128, 512]`` ``nc_matmul`` per (M tile, N tile, K tile) — 1024 matmuls at
2048³ in every step, so the steps differ only in how operands and accumulators are buffered:

1. :func:`matmul_sunk_single_buffer` (~16% MFU): both operand loads sunk into the innermost
   K loop, each into a single buffer declared once, so every load waits for the matmul that
   read the previous tile and DMA and TensorE serialize; operands are reloaded for every
   output tile.
2. :func:`matmul_psum_tiled_hoisted` (59%): both operands loaded once, up front, and kept
   resident in SBUF; one ``[128, N]`` PSUM accumulator per M tile (memset, then the K loop
   accumulates, then a drain to SBUF), single-buffered — TensorE waits for every drain.
3. :func:`matmul_psum_double_buffered` (83.7%): the same with a ``[128, 2, N]`` PSUM tile
   whose halves alternate with ``m % 2``, so the drain of one M tile overlaps the next
   tile's matmuls.
4. :func:`matmul_streaming` (89.5%): step 3 plus streaming loads — the ``lhsT`` column block
   of the next M tile is prefetched inside the M loop into a double buffer (``m % 2``), and K
   is the outer loop of each M tile (single-level K: each K tile feeds all N tiles), so
   TensorE starts as soon as the first K tiles arrive instead of after all 16 MiB.

The accumulators follow the ladder's own code generation (alloc + memset outside K, plain
accumulating matmuls, drain after K); buffers are declared once, at the top, as that code
generation does, so the loops that reuse them are ``sequential_range``. How the published
kernels stored the result is not recorded; here every M tile (every output tile in step 1) is
drained to SBUF and stored as soon as it is complete. Shapes must be multiples of the tiles;
steps 2–4 keep one ``[128, N]`` fp32 accumulator per PSUM half, so ``N`` ≤ 2048.
"""

import nki
import nki.isa as nisa
import nki.language as nl

from tests.emu.kernels.matmul import _shapes, _tiles


def _load_k_tiles(dst, src, n_k, tile_k):
    """Load ``src[K, F]`` into the resident ``dst[tile_k, n_k, F]``, one DMA per K tile (in K order)."""
    for k in nl.affine_range(n_k):
        nisa.dma_copy(dst=dst[:, k, :], src=src[k * tile_k : (k + 1) * tile_k, :])


def _drain(result_rows, acc, dtype):
    """Copy a PSUM accumulator to a fresh SBUF tile (VectorE) and store it."""
    out_tile = nl.ndarray(acc.shape, dtype=dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out_tile, src=acc)
    nisa.dma_copy(dst=result_rows, src=out_tile)


def _resident_operands(lhsT, rhs, tile_k):
    """Steps 2–3: ``lhsT`` and ``rhs`` loaded whole, K-tile by K-tile, and kept in SBUF."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    n_k = K // tile_k
    lhsT_all = nl.ndarray((tile_k, n_k, M), dtype=lhsT.dtype, buffer=nl.sbuf)
    rhs_all = nl.ndarray((tile_k, n_k, N), dtype=rhs.dtype, buffer=nl.sbuf)
    _load_k_tiles(lhsT_all, lhsT, n_k, tile_k)
    _load_k_tiles(rhs_all, rhs, n_k, tile_k)
    return lhsT_all, rhs_all


def _m_tile_n_then_k(acc, lhsT_all, rhs_all, m, tiles):
    """One M tile of steps 2–3: for each N tile, accumulate all K tiles into its PSUM bank."""
    _, TILE_M, TILE_N = tiles
    nisa.memset(dst=acc, value=0.0)
    for n in nl.affine_range(acc.shape[-1] // TILE_N):
        for k in nl.affine_range(lhsT_all.shape[1]):
            nisa.nc_matmul(
                dst=acc[:, n * TILE_N : (n + 1) * TILE_N],
                stationary=lhsT_all[:, k, m * TILE_M : (m + 1) * TILE_M],
                moving=rhs_all[:, k, n * TILE_N : (n + 1) * TILE_N],
                accumulate=True,
            )


@nki.jit
def matmul_sunk_single_buffer(lhsT, rhs):
    """Step 1 (~16% MFU): loads sunk into the inner K loop, one buffer per operand."""
    TILE_K, TILE_M, TILE_N = _tiles()
    K, M, N = _shapes(lhsT, rhs, TILE_M, TILE_N, TILE_K)
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    # Declared once at the top: every iteration reuses the same bytes (no multi-buffering).
    lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
    rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
    acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
    out_tile = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
    for m in nl.sequential_range(M // TILE_M):
        for n in nl.sequential_range(N // TILE_N):
            nisa.memset(dst=acc, value=0.0)
            for k in nl.sequential_range(K // TILE_K):
                rows = nl.ds(k * TILE_K, TILE_K)
                nisa.dma_copy(dst=lhsT_tile, src=lhsT[rows, nl.ds(m * TILE_M, TILE_M)])
                nisa.dma_copy(dst=rhs_tile, src=rhs[rows, nl.ds(n * TILE_N, TILE_N)])
                nisa.nc_matmul(dst=acc, stationary=lhsT_tile, moving=rhs_tile, accumulate=True)
            nisa.tensor_copy(dst=out_tile, src=acc)
            nisa.dma_copy(dst=result[nl.ds(m * TILE_M, TILE_M), nl.ds(n * TILE_N, TILE_N)], src=out_tile)
    return result


def _hoisted_ladder_step(lhsT, rhs, psum_buffers):
    """Steps 2–3: resident operands, one ``[128, N]`` PSUM accumulator per M tile, rotating over ``psum_buffers`` halves."""
    tiles = _tiles()
    TILE_K, TILE_M, TILE_N = tiles
    _, M, N = _shapes(lhsT, rhs, TILE_M, TILE_N, TILE_K)
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    lhsT_all, rhs_all = _resident_operands(lhsT, rhs, TILE_K)
    acc = nl.ndarray((TILE_M, psum_buffers, N), dtype=nl.float32, buffer=nl.psum)
    for m in nl.sequential_range(M // TILE_M):  # M tile m reuses the PSUM of tile m - psum_buffers
        half = acc[:, m % psum_buffers, :]
        _m_tile_n_then_k(half, lhsT_all, rhs_all, m, tiles)
        _drain(result[nl.ds(m * TILE_M, TILE_M), :], half, result.dtype)
    return result


@nki.jit
def matmul_psum_tiled_hoisted(lhsT, rhs):
    """Step 2 (59% MFU): operands hoisted and resident; one single-buffered ``[128, N]`` PSUM accumulator.

    Every M tile accumulates into the same PSUM bytes, so its memset waits for the previous
    tile's drain and TensorE waits for both.
    """
    return _hoisted_ladder_step(lhsT, rhs, 1)


@nki.jit
def matmul_psum_double_buffered(lhsT, rhs):
    """Step 3 (83.7% MFU): step 2 with a ``[128, 2, N]`` PSUM accumulator alternating halves (``m % 2``)."""
    return _hoisted_ladder_step(lhsT, rhs, 2)


def _load_lhsT_block(dst, lhsT, m, tile_k, tile_m):
    """``lhsT[k * 128 + p, m * 128 + j]`` → ``dst[p, k, j]``: all K tiles of one 128-column block in one DMA."""
    M = lhsT.shape[1]
    n_k = lhsT.shape[0] // tile_k
    nisa.dma_copy(dst=dst, src=lhsT.ap(pattern=[[M, tile_k], [tile_k * M, n_k], [1, tile_m]], offset=m * tile_m))


@nki.jit
def matmul_streaming(lhsT, rhs):
    """Step 4 (89.5% MFU): double-buffered PSUM (step 3) plus streaming, double-buffered loads.

    The first ``lhsT`` column block goes first, then the ``rhs`` K tiles in K order; the first M
    tile's K loop (the outer loop of each M tile: single-level K, every K tile feeds all N
    tiles) consumes them as they land. While TensorE works on M tile ``m`` from half
    ``m % 2`` of a two-block ``lhsT`` buffer, the block of M tile ``m + 1`` streams into the
    other half.
    """
    TILE_K, TILE_M, TILE_N = _tiles()
    K, M, N = _shapes(lhsT, rhs, TILE_M, TILE_N, TILE_K)
    n_k, n_m, n_n = K // TILE_K, M // TILE_M, N // TILE_N
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    lhsT_blocks = nl.ndarray((TILE_K, 2, n_k, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
    _load_lhsT_block(lhsT_blocks[:, 0, :, :], lhsT, 0, TILE_K, TILE_M)
    rhs_all = nl.ndarray((TILE_K, n_k, N), dtype=rhs.dtype, buffer=nl.sbuf)
    _load_k_tiles(rhs_all, rhs, n_k, TILE_K)
    acc = nl.ndarray((TILE_M, 2, N), dtype=nl.float32, buffer=nl.psum)
    for m in nl.sequential_range(n_m):  # M tile m reuses the buffers of tile m - 2
        block = lhsT_blocks[:, m % 2, :, :]
        half = acc[:, m % 2, :]
        nisa.memset(dst=half, value=0.0)
        for k in nl.affine_range(n_k):
            for n in nl.affine_range(n_n):
                nisa.nc_matmul(
                    dst=half[:, n * TILE_N : (n + 1) * TILE_N],
                    stationary=block[:, k, :],
                    moving=rhs_all[:, k, n * TILE_N : (n + 1) * TILE_N],
                    accumulate=True,
                )
        if m + 1 < n_m:  # prefetch the next block into the half this tile is not reading
            _load_lhsT_block(lhsT_blocks[:, (m + 1) % 2, :, :], lhsT, m + 1, TILE_K, TILE_M)
        _drain(result[nl.ds(m * TILE_M, TILE_M), :], half, result.dtype)
    return result
