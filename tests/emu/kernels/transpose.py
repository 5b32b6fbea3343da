"""2-D transpose ``out[C, R] = x[R, C]ᵀ``, two ways.

* :func:`transpose_pe` moves 128 × 128 tiles through TensorE (``nc_transpose``, SBUF → PSUM),
  evacuates PSUM with VectorE and stores each tile at its mirrored position.
* :func:`transpose_dma` lets the DMA engine transpose while copying (``dma_transpose``
  straight from HBM into SBUF), which keeps the compute engines free.

Both handle ragged edge tiles, so any ``[R, C]`` works.
"""

import nki
import nki.isa as nisa
import nki.language as nl


def _tile_grid(rows, cols, tile):
    """``(r0, rp, c0, cp)`` for every ``tile × tile`` block of a ``rows × cols`` matrix, edges included."""
    for i in nl.affine_range((rows + tile - 1) // tile):
        for j in nl.affine_range((cols + tile - 1) // tile):
            yield i * tile, min(tile, rows - i * tile), j * tile, min(tile, cols - j * tile)


@nki.jit
def transpose_pe(x):
    """Transpose ``x [R, C]`` with TensorE, one ≤128 × 128 tile at a time."""
    rows, cols = x.shape
    out = nl.ndarray((cols, rows), dtype=x.dtype, buffer=nl.shared_hbm)
    for r0, rp, c0, cp in _tile_grid(rows, cols, nl.tile_size.pmax):
        xt = nl.ndarray((rp, cp), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[r0 : r0 + rp, c0 : c0 + cp])
        xt_t_psum = nl.ndarray((cp, rp), dtype=x.dtype, buffer=nl.psum)
        nisa.nc_transpose(dst=xt_t_psum, data=xt, engine=nisa.engine.tensor)
        xt_t = nl.ndarray((cp, rp), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=xt_t, src=xt_t_psum)
        nisa.dma_copy(dst=out[c0 : c0 + cp, r0 : r0 + rp], src=xt_t)
    return out


@nki.jit
def transpose_dma(x):
    """Transpose ``x [R, C]`` with DMA transposes from HBM, one ≤128 × 128 tile at a time."""
    rows, cols = x.shape
    out = nl.ndarray((cols, rows), dtype=x.dtype, buffer=nl.shared_hbm)
    for r0, rp, c0, cp in _tile_grid(rows, cols, nl.tile_size.pmax):
        xt_t = nl.ndarray((cp, rp), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=xt_t, src=x[r0 : r0 + rp, c0 : c0 + cp], axes=(1, 0))
        nisa.dma_copy(dst=out[c0 : c0 + cp, r0 : r0 + rp], src=xt_t)
    return out
