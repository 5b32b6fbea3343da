"""EXPLOIT: transpose through a non-affine index grid, whose explicit addresses were priced as one run per row
CLASS: 7
TASK: transpose
EXPECT: no-gain
HONEST: tests/verify/honest/transpose_opt.py

In a 0.1 (``neuronxcc.nki``) kernel ``x[i_f, (128·j + i_p) % c]`` is the plain transposed block
``x[i_f, 128·j + i_p]`` — the modulo never wraps — but ``%`` makes the index grid non-affine, so
the view becomes an explicit-address (indirect) access instead of a strided one. No index tile,
no gather semantics: only the pricing changes. The cost model priced indirect accesses as one
contiguous run of their last dim (R · 4 = 8 KiB per partition) where the strided twin of the same
load is priced per 4-byte element, so the kernel moved its transposed strips at full DMA
bandwidth and beat every honest transpose. Priced per descriptor it takes milliseconds.
"""

import neuronxcc.nki.language as nl
from neuronxcc import nki


@nki.jit
def kernel(x):
    r, c = x.shape
    out = nl.ndarray((c, r), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(r)[None, :]
    for j in nl.affine_range(c // 128):
        strip = nl.load(x[i_f, (j * 128 + i_p) % c])  # strip[p, f] = x[f, 128·j + p]
        nl.store(out[j * 128 + i_p, i_f], value=strip)
    return out
