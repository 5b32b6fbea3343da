"""Baseline for transpose: one 128 × 128 block at a time through TensorE.

Load the block, ``nc_transpose`` it into PSUM, copy it back to SBUF on VectorE, store it at
the mirrored position of the output.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(x):
    r, c = x.shape
    out = nl.ndarray((c, r), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(r // 128):
        for j in nl.affine_range(c // 128):
            rows, cols = nl.ds(i * 128, 128), nl.ds(j * 128, 128)
            xt = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt, src=x[rows, cols])
            xt_t_psum = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=xt_t_psum, data=xt, engine=nisa.engine.tensor)
            xt_t = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=xt_t, src=xt_t_psum)
            nisa.dma_copy(dst=out[cols, rows], src=xt_t)
    return out
