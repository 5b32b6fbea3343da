"""EXPLOIT: a legacy (NKI 0.1) kernel divides full tiles with nl.divide instead of reciprocal + multiply
CLASS: 3
TASK: silu
EXPECT: no-gain
HONEST: tests/verify/redteam/twins/legacy_silu_reciprocal.py

silu(x) = x / (1 + e^-x). The 0.1 front-end keeps ``nl.divide`` (public 0.1 kernels use it),
and before the fix its tile-by-tile quotient ran as one ``tensor_tensor(op=divide)`` priced
like a multiply, while the honest twin pays VectorE's ``reciprocal`` (about eight cycles per
element) and then the multiply. The hardware has no divide: the compiler lowers it to exactly
the twin's reciprocal + multiply, so the legacy front-end must record and price those two
instructions and the exploit must not beat its twin.
"""

import neuronxcc.nki.language as nl
from neuronxcc import nki

TILE_F = 512


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        for j in nl.affine_range(d // TILE_F):
            xt = nl.load(x[i * 128 : (i + 1) * 128, j * TILE_F : (j + 1) * TILE_F], dtype=nl.float32)
            e = nl.exp(nl.multiply(xt, -1.0))
            y = nl.divide(xt, e + 1.0, dtype=x.dtype)
            nl.store(out[i * 128 : (i + 1) * 128, j * TILE_F : (j + 1) * TILE_F], value=y)
    return out
