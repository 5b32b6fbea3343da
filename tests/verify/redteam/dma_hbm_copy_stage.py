"""EXPLOIT: the copy phase of a two-phase transpose as HBM → HBM DMAs, priced as one pass over the bytes
CLASS: 7
TASK: transpose
EXPECT: no-gain
HONEST: tests/verify/redteam/honest_hbm_copy_stage.py

The kernel transposes into a scratch HBM tensor (phase 1, as ``transpose_opt``) and then copies
the scratch into the output. Its honest twin moves each 128-row strip through SBUF (a load and a
store); here each strip goes HBM → HBM in two half-row DMAs. The bytes read and written in HBM
are the same, but the cost model moved an HBM → HBM DMA's bytes through the queues once — half
the queue time of the load + store pair — and the half-row pieces (4 KiB runs, 128 of them) gave
each DMA all 16 queues, so the copy phase cost half its twin's. Counting the HBM read and the
HBM write, it costs what the pair costs. (Phase 1 is repeated from the twin: the static gate
lets a kernel import only NKI and a few standard modules.)
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
    half = r // 2
    for j in nl.affine_range(c // 128):
        rows = nl.ds(j * 128, 128)
        for h in nl.affine_range(2):
            cols = nl.ds(h * half, half)
            nisa.dma_copy(dst=out[rows, cols], src=scratch[rows, cols])
    return out
