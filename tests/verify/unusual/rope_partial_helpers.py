"""HONEST: rope_split_engines written with module-level functools.partial helpers that pin each element-wise op to its engine
STYLE: 8
TASK: rope
BEFORE: on 064c209, before issue 18: rejected, latency_us n/a, speedup n/a; first reason: static gate [global-state] rope_partial_helpers.py:41: module-level object `vec_mul` (defined at rope_partial_helpers.py:18) is used here in a way that could keep or change it between calls; inside functions only read it (`X[i]`, `X.attr`, `for a in X`, arithmetic), or make it a tuple/constant

Same computation and engine split as rope_split_engines (VectorE: x1·cos, x1·sin and the
difference; GpSimd: x2·sin, x2·cos and the sum), but the six tensor_tensor calls go through
four immutable functools.partial objects defined once at module level — a common way to
name "multiply on GpSimd" and friends. The partials hold only an NKI function and enums.
"""
import functools

import nki
import nki.isa as nisa
import nki.language as nl

P = 128
vec_mul = functools.partial(nisa.tensor_tensor, op=nl.multiply, engine=nisa.engine.vector)
vec_sub = functools.partial(nisa.tensor_tensor, op=nl.subtract, engine=nisa.engine.vector)
pool_mul = functools.partial(nisa.tensor_tensor, op=nl.multiply, engine=nisa.engine.gpsimd)
pool_add = functools.partial(nisa.tensor_tensor, op=nl.add, engine=nisa.engine.gpsimd)


def _f32(shape):
    return nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)


@nki.jit
def kernel(x, cos, sin):
    n, d = x.shape
    h = d // 2
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // P):
        rows = nl.ds(i * P, P)
        xt, ct, st = _f32((P, d)), _f32((P, h)), _f32((P, h))
        nisa.dma_copy(dst=xt, src=x[rows, :])
        nisa.dma_copy(dst=ct, src=cos[rows, :])
        nisa.dma_copy(dst=st, src=sin[rows, :])
        x1, x2 = xt[:, 0:h], xt[:, h:d]
        x1c, x1s, x2s, x2c = _f32((P, h)), _f32((P, h)), _f32((P, h)), _f32((P, h))
        vec_mul(dst=x1c, data1=x1, data2=ct)
        pool_mul(dst=x2s, data1=x2, data2=st)
        pool_mul(dst=x2c, data1=x2, data2=ct)
        vec_mul(dst=x1s, data1=x1, data2=st)
        yt = _f32((P, d))
        vec_sub(dst=yt[:, 0:h], data1=x1c, data2=x2s)
        pool_add(dst=yt[:, h:d], data1=x2c, data2=x1s)
        nisa.dma_copy(dst=out[rows, :], src=yt)
    return out


# WHY THIS IS LEGITIMATE NKI (appended after the code so the reason line numbers stay valid):
# functools.partial objects are immutable, and these only bind an nki.isa function to an op and an
# engine enum; calling one is exactly calling nisa.tensor_tensor with those keywords. The gate allows
# calling module-level plain functions (and tuples of them) but not module-level partials. Numerics and
# engine assignment are identical to rope_split_engines, which passes.
