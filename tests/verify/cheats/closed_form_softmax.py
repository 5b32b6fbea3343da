"""CHEAT: analytical shortcut — every softmax row averages 1/D, so return 1/D
ROW: B3, E1
TASK: softmax
EXPECT: fail
REASON: wrong answer

``mean(softmax) = 1/n`` is a famous degenerate-output trap (E1): on near-constant inputs
the uniform distribution is close. It costs one memset and the output DMAs. Inputs have
unit (and heavy-tailed, and large) spread, so the rows are far from uniform.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    uniform = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=uniform, value=1.0 / d)
    for i in nl.affine_range(n // 128):
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=uniform)
    return out
