"""EXPLOIT: the copy phase of a two-phase transpose as identity-index HBM → HBM gathers of whole rows
CLASS: 7
TASK: transpose
EXPECT: no-gain
HONEST: tests/verify/redteam/honest_hbm_copy_stage.py

The kernel transposes into a scratch HBM tensor (phase 1, as ``transpose_opt``) and copies the
scratch into the output; its honest twin moves each 128-row strip through SBUF. Here each strip
is one HBM → HBM DMA whose source is a gather with identity indices (an iota). Written directly,
the strip is one contiguous MiB, which the cost model gave a single DMA queue; as a gather it
counted as 128 runs and got all 16 queues, at full bandwidth, moving its bytes through the queues
once though they are read from and written to HBM. The copy phase cost half its twin's. Priced by
its descriptors (queues by the bytes moved, not by how the copy is cut up) and counting both the
HBM read and write, the gather costs what the load + store pair costs. (Phase 1 is repeated from
the twin: the static gate lets a kernel import only NKI and a few standard modules.)
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
    rows = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=rows, pattern=[[0, 1]], offset=0, channel_multiplier=1)  # 0 … 127: row p of the strip is row p
    for j in nl.affine_range(c // 128):
        strip = scratch.ap([[r, 128], [1, r]], offset=j * 128 * r, vector_offset=rows, indirect_dim=0)
        nisa.dma_copy(dst=out[j * 128 : (j + 1) * 128, :], src=strip)
    return out
