"""Optimized rope: two whole rows per partition per DMA, and the six products/sums split between VectorE and GpSimd.

The baseline is VectorE-bound: six fp32 ``tensor_tensor`` passes (two cycles per element
each) on one engine, fed by 1 KiB DMA runs. Here each partition takes two consecutive rows
(the HBM views ``[N/2, 2, ·]`` keep them contiguous; one row when N/128 is odd), so a tile
is three DMAs of 4–8 KiB runs (x, cos, sin), and the two output halves are computed on two
engines in parallel: VectorE builds ``x₁·cos − x₂·sin``, GpSimd builds ``x₂·cos + x₁·sin``,
both writing straight into the halves of one output tile that is stored with a single DMA.
"""

import nki
import nki.isa as nisa
import nki.language as nl


def _rotate_half(dst, a, b, c, s, combine, engine):
    """``dst = combine(a·c, b·s)`` with all three ops on ``engine``."""
    ac = nl.ndarray(c.shape, dtype=nl.float32, buffer=nl.sbuf)
    bs = nl.ndarray(c.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=ac, data1=a, data2=c, op=nl.multiply, engine=engine)
    nisa.tensor_tensor(dst=bs, data1=b, data2=s, op=nl.multiply, engine=engine)
    nisa.tensor_tensor(dst=dst, data1=ac, data2=bs, op=combine, engine=engine)


@nki.jit
def kernel(x, cos, sin):
    n, d = x.shape
    h = d // 2
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    k = 2 if n % 256 == 0 else 1  # rows per partition
    xv, cv, sv, ov = x.reshape((n // k, k, d)), cos.reshape((n // k, k, h)), sin.reshape((n // k, k, h)), out.reshape((n // k, k, d))
    for i in nl.affine_range(n // (128 * k)):
        rows = nl.ds(i * 128, 128)
        xt = nl.ndarray((128, k, d), dtype=nl.float32, buffer=nl.sbuf)
        ct = nl.ndarray((128, k, h), dtype=nl.float32, buffer=nl.sbuf)
        st = nl.ndarray((128, k, h), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=xv[rows, :, :])
        nisa.dma_copy(dst=ct, src=cv[rows, :, :])
        nisa.dma_copy(dst=st, src=sv[rows, :, :])
        x1, x2 = xt[:, :, :h], xt[:, :, h:]
        yt = nl.ndarray((128, k, d), dtype=nl.float32, buffer=nl.sbuf)
        _rotate_half(yt[:, :, :h], x1, x2, ct, st, nl.subtract, nisa.engine.vector)
        _rotate_half(yt[:, :, h:], x2, x1, ct, st, nl.add, nisa.engine.gpsimd)
        nisa.dma_copy(dst=ov[rows, :, :], src=yt)
    return out
