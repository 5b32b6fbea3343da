"""EXPLOIT: a ``while reg:`` loop over output strips whose iterations overlap the register update that decides them
CLASS: 7
TASK: transpose
EXPECT: no-gain
HONEST: tests/verify/honest/transpose_opt.py

``transpose_opt``'s strip loop as an on-device loop: a strip counter lives in SBUF, and each
iteration, after assembling and storing its strip, decrements the counter on VectorE and loads
it into the virtual register the ``while`` tests. On hardware each iteration's branch waits for
that register_load, and the register cannot be rewritten while the previous iteration's
instructions still depend on it, so the iterations run one after another. Registers carried no
dependences in the cost model: the loop was priced as if its iterations overlapped as freely as
``affine_range``'s — the serial loop cost what the parallel one costs. (It cannot beat its
affine twin that way; it shows how much a register-driven loop was underpriced.) Ordered by its
register, the strips no longer overlap.
"""

import nki
import nki.isa as nisa
import nki.language as nl

BANK_COLS = 512  #: fp32 columns in one 2 KiB PSUM bank: four transposed 128 × 128 blocks


@nki.jit
def kernel(x):
    r, c = x.shape
    out = nl.ndarray((c, r), dtype=x.dtype, buffer=nl.shared_hbm)
    n_row_blocks = r // 128
    resident = nl.ndarray((128, n_row_blocks, c), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(n_row_blocks):
        nisa.dma_copy(dst=resident[:, i, :], src=x[i * 128 : (i + 1) * 128, :])
    left = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)  # strips still to do
    nisa.iota(dst=left, pattern=[[0, 1]], offset=c // 128, channel_multiplier=0)
    more = nisa.register_alloc()
    nisa.register_load(more, left)
    j = 0
    while more:
        cols = nl.ds(j * 128, 128)
        strip = nl.ndarray((128, r), dtype=x.dtype, buffer=nl.sbuf)
        for g in nl.affine_range((r + BANK_COLS - 1) // BANK_COLS):
            g0 = g * BANK_COLS
            width = min(BANK_COLS, r - g0)
            bank = nl.ndarray((128, width), dtype=x.dtype, buffer=nl.psum)
            for t in nl.affine_range(width // 128):
                nisa.nc_transpose(dst=bank[:, t * 128 : (t + 1) * 128], data=resident[:, g0 // 128 + t, cols], engine=nisa.engine.tensor)
            nisa.tensor_copy(dst=strip[:, g0 : g0 + width], src=bank)
        nisa.dma_copy(dst=out[cols, :], src=strip)
        nisa.tensor_scalar(dst=left, data=left, op0=nl.subtract, operand0=1, engine=nisa.engine.vector)
        nisa.register_load(more, left)
        j += 1
    return out
