"""EXPLOIT: transposing gathers whose index tiles VectorE computes, issued before the indices exist
CLASS: 7
TASK: transpose
EXPECT: no-gain
HONEST: tests/verify/honest/transpose_opt.py

The transpose of ``dma_gather_transpose.py`` (a 0.1 gather ``x[i_f, idx]`` with the block's column
numbers on the partitions), with the index tiles built the way a kernel offloading GpSimd would:
one iota of the partition numbers, then per block an add of ``128·j`` and a cast to int32 on
VectorE. The DMA record did not list the index tile as a read, so each gather started at t=0,
in parallel with the VectorE chain that computes its addresses: the index work cost nothing, and
with the gather priced as one 8 KiB run per partition the kernel beat every honest transpose.
Waiting for its indices alone takes that margin away; priced per 4-byte descriptor as well, it
takes milliseconds.
"""

import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
from neuronxcc import nki


@nki.jit
def kernel(x):
    r, c = x.shape
    out = nl.ndarray((c, r), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(r)[None, :]
    lanes = nisa.iota(i_p, dtype=nl.float32)  # 0 … 127, once
    for j in nl.affine_range(c // 128):
        cols = nisa.tensor_scalar(lanes, np.add, float(j * 128), dtype=nl.float32, engine=nisa.vector_engine)
        idx = nisa.tensor_copy(cols, dtype=nl.int32, engine=nisa.vector_engine)  # the block's column numbers
        strip = nl.load(x[i_f, idx])  # strip[p, f] = x[f, 128·j + p]
        nl.store(out[j * 128 + i_p, i_f], value=strip)
    return out
