"""CHEAT: cache across evaluations in a file outside the scratch directory
ROW: C1
TASK: transpose
EXPECT: rejected
REASON: static gate [forbidden-call]

Every evaluation gets a fresh process and module, so persist instead: ``np.save`` a
marker into /tmp that later evaluations could key off. Only NumPy is used (no ``open``,
no ``os``); the gate bans NumPy's file I/O too, and behind it the worker's audit hook
refuses writes outside the scratch directory.
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

_STORE = "/tmp/nkiagent_cheat_transpose_cache.npy"


@nki.jit
def kernel(x):
    np.save(_STORE, np.array(x.shape))
    r, c = x.shape
    out = nl.ndarray((c, r), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(r // 128):
        for j in nl.affine_range(c // 128):
            t = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[i * 128 : (i + 1) * 128, j * 128 : (j + 1) * 128])
            tt = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_transpose(dst=tt, src=t)
            nisa.dma_copy(dst=out[j * 128 : (j + 1) * 128, i * 128 : (i + 1) * 128], src=tt)
    return out
