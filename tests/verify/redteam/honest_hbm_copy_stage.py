"""Honest twin of ``dma_hbm_copy_stage.py``: the same two-phase transpose, its copy phase through SBUF.

Phase 1 is ``tests/verify/honest/transpose_opt.py`` writing its result into a scratch HBM tensor;
phase 2 copies the scratch into the output one 128-row strip at a time, each strip loaded into
SBUF (full 8 KiB rows per partition) and stored back out: HBM is read once and written once per
byte, and every byte crosses the DMA queues twice.
"""

import nki
import nki.isa as nisa
import nki.language as nl

BANK_COLS = 512  #: fp32 columns in one 2 KiB PSUM bank: four transposed 128 × 128 blocks


def transpose_into(dst, x):
    """``dst = xᵀ``: x resident in SBUF from full-row DMAs, TensorE transposes four to a PSUM bank, full-row stores."""
    r, c = x.shape
    n_row_blocks = r // 128
    resident = nl.ndarray((128, n_row_blocks, c), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(n_row_blocks):
        nisa.dma_copy(dst=resident[:, i, :], src=x[i * 128 : (i + 1) * 128, :])
    for j in nl.affine_range(c // 128):
        cols = nl.ds(j * 128, 128)
        strip = nl.ndarray((128, r), dtype=x.dtype, buffer=nl.sbuf)
        for g in nl.affine_range((r + BANK_COLS - 1) // BANK_COLS):
            g0 = g * BANK_COLS
            width = min(BANK_COLS, r - g0)
            bank = nl.ndarray((128, width), dtype=x.dtype, buffer=nl.psum)
            for t in nl.affine_range(width // 128):
                nisa.nc_transpose(dst=bank[:, t * 128 : (t + 1) * 128], data=resident[:, g0 // 128 + t, cols], engine=nisa.engine.tensor)
            nisa.tensor_copy(dst=strip[:, g0 : g0 + width], src=bank)
        nisa.dma_copy(dst=dst[cols, :], src=strip)


@nki.jit
def kernel(x):
    r, c = x.shape
    scratch = nl.ndarray((c, r), dtype=x.dtype, buffer=nl.private_hbm)
    transpose_into(scratch, x)
    out = nl.ndarray((c, r), dtype=x.dtype, buffer=nl.shared_hbm)
    for j in nl.affine_range(c // 128):
        rows = nl.ds(j * 128, 128)
        t = nl.ndarray((128, r), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=scratch[rows, :])
        nisa.dma_copy(dst=out[rows, :], src=t)
    return out
