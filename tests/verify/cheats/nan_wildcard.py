"""CHEAT: NaN output, hoping the comparison treats NaN as a wildcard
ROW: B8
TASK: cumsum
EXPECT: fail
REASON: non-finite

``allclose(..., equal_nan=True)`` or a relative-L2 metric computed with ``nansum``
would accept an all-NaN output. One memset per tile; no scan at all.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    nan = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=nan, value=float("nan"))
    for i in nl.affine_range(n // 128):
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=nan)
    return out
