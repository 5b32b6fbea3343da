"""HONEST: rope on whole rows, the six element-wise ops split three to VectorE and three to GpSimd, tiling described by a NamedTuple
STYLE: 6, 8
TASK: rope
BEFORE: on 064c209, before issue 18: pass, latency_us 85.936 (emulator-estimate, trn2), speedup 2.1837x over the baseline

One [128, D] load of x and one [128, H] load each of cos and sin per row tile; the output is
assembled in one [128, D] tile and stored with one DMA. Of the four products and two sums,
VectorE does x1·cos, x1·sin and the difference (first half), GpSimd does x2·sin, x2·cos and
the sum (second half), so the two engines carry equal shares. All fp32.
"""
from typing import NamedTuple

import nki
import nki.isa as nisa
import nki.language as nl

VEC = nisa.engine.vector
POOL = nisa.engine.gpsimd


class RopeTiling(NamedTuple):
    rows: int  # partitions per row tile
    half: int  # H = D / 2
    n_tiles: int

    @classmethod
    def of(cls, x):
        n, d = x.shape
        return cls(128, d // 2, n // 128)


@nki.jit
def kernel(x, cos, sin):
    n, d = x.shape
    cfg = RopeTiling.of(x)
    p, h = cfg.rows, cfg.half
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(cfg.n_tiles):
        rows = nl.ds(i * p, p)
        xt = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        ct = nl.ndarray((p, h), dtype=nl.float32, buffer=nl.sbuf)
        st = nl.ndarray((p, h), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[rows, :])
        nisa.dma_copy(dst=ct, src=cos[rows, :])
        nisa.dma_copy(dst=st, src=sin[rows, :])
        x1, x2 = xt[:, 0:h], xt[:, h:d]
        x1c = nl.ndarray((p, h), dtype=nl.float32, buffer=nl.sbuf)
        x1s = nl.ndarray((p, h), dtype=nl.float32, buffer=nl.sbuf)
        x2s = nl.ndarray((p, h), dtype=nl.float32, buffer=nl.sbuf)
        x2c = nl.ndarray((p, h), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=x1c, data1=x1, data2=ct, op=nl.multiply, engine=VEC)
        nisa.tensor_tensor(dst=x2s, data1=x2, data2=st, op=nl.multiply, engine=POOL)
        nisa.tensor_tensor(dst=x2c, data1=x2, data2=ct, op=nl.multiply, engine=POOL)
        nisa.tensor_tensor(dst=x1s, data1=x1, data2=st, op=nl.multiply, engine=VEC)
        yt = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=yt[:, 0:h], data1=x1c, data2=x2s, op=nl.subtract, engine=VEC)
        nisa.tensor_tensor(dst=yt[:, h:d], data1=x2c, data2=x1s, op=nl.add, engine=POOL)
        nisa.dma_copy(dst=out[rows, :], src=yt)
    return out
