"""EXPLOIT: transpose as an index-tile gather along the columns, priced as if the columns were rows
CLASS: 7
TASK: transpose
EXPECT: no-gain
HONEST: tests/verify/honest/transpose_opt.py

A 0.1 (``neuronxcc.nki``) gather ``x[i_f, idx]`` puts an SBUF index tile on the *column* dim:
with ``idx`` = the column numbers of a 128-column block (an iota), partition ``p`` reads column
``128·j + p`` of every row, so one DMA lands the block already transposed and one store writes
``out[128·j : 128·j + 128, :]`` with full-row runs. No TensorE transposes, no PSUM round trip.
Each element is its own 4-byte descriptor, but the cost model priced every indirect access as
one contiguous run of its last dim (R · 4 = 8 KiB per partition, full DMA bandwidth): the kernel
came out a little above the task's speed of light and below every honest transpose. Priced per
descriptor it takes milliseconds.
"""

import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from neuronxcc import nki


@nki.jit
def kernel(x):
    r, c = x.shape
    out = nl.ndarray((c, r), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(r)[None, :]
    for j in nl.affine_range(c // 128):
        idx = nisa.iota(j * 128 + i_p, dtype=nl.int32)  # the block's column numbers, one per partition
        strip = nl.load(x[i_f, idx])  # strip[p, f] = x[f, 128·j + p]
        nl.store(out[j * 128 + i_p, i_f], value=strip)
    return out
