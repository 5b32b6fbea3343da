"""HONEST: layernorm with bn_stats/bn_aggr over 512-column chunks listed by a functools.cache'd pure helper; normalize on ScalarE, weight/bias half on VectorE, half on GpSimd
STYLE: 7, 8
TASK: layernorm
BEFORE: on 064c209, before issue 18: rejected, latency_us n/a, speedup n/a; first reason: static gate [global-state] layernorm_bnstats_cached_chunks.py:24: `functools.cache` is not allowed: a memo survives between calls, so later calls could skip the work; compute every call

Per 128-row tile: one bn_stats per ≤512-column chunk (the chunk list comes from a pure,
functools.cache'd function of the row length — ints in, a tuple of ints out), one bn_aggr
for (mean, var), rstd = rsqrt(var + eps) on ScalarE. ScalarE then normalizes the whole row
in one activation (x·rstd + (−mean·rstd)). The affine part (·weight + bias) is split by
columns: the left half on VectorE, the right half on GpSimd. weight and bias reach all
partitions once through stride-0 broadcast DMAs.
"""
import functools

import nki
import nki.isa as nisa
import nki.language as nl

P = 128
EPS = 1e-5
BN_FMAX = 512


@functools.cache
def _chunks(d, fmax):
    """(start, size) of the bn_stats chunks of a d-long row."""
    return tuple((s, min(fmax, d - s)) for s in range(0, d, fmax))


def _f32(shape):
    return nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)


@nki.jit
def kernel(x, weight, bias):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    w = _f32((P, d))
    b = _f32((P, d))
    nisa.dma_copy(dst=w, src=weight.ap(pattern=[[0, P], [1, d]], offset=0))
    nisa.dma_copy(dst=b, src=bias.ap(pattern=[[0, P], [1, d]], offset=0))
    chunks = _chunks(d, BN_FMAX)
    half = d // 2
    for i in nl.affine_range(n // P):
        rows = nl.ds(i * P, P)
        xt = _f32((P, d))
        nisa.dma_copy(dst=xt, src=x[rows, :])
        stats = _f32((P, 6 * len(chunks)))
        for c, (start, size) in enumerate(chunks):
            nisa.bn_stats(dst=stats[:, c * 6 : (c + 1) * 6], data=xt[:, start : start + size])
        mv = _f32((P, 2))
        nisa.bn_aggr(dst=mv, data=stats)
        var_eps = _f32((P, 1))
        nisa.tensor_scalar(dst=var_eps, data=mv[:, 1:2], op0=nl.add, operand0=EPS)
        rstd = _f32((P, 1))
        nisa.activation(dst=rstd, op=nl.rsqrt, data=var_eps)
        nbias = _f32((P, 1))
        nisa.scalar_tensor_tensor(dst=nbias, data=mv[:, 0:1], op0=nl.multiply, operand0=-1.0, op1=nl.multiply, operand1=rstd)
        xhat = _f32((P, d))
        nisa.activation(dst=xhat, op=nl.copy, data=xt, scale=rstd, bias=nbias)
        scaled = _f32((P, d))
        yt = _f32((P, d))
        for lo, eng in ((0, nisa.engine.vector), (half, nisa.engine.gpsimd)):
            cols = nl.ds(lo, half)
            nisa.tensor_tensor(dst=scaled[:, cols], data1=xhat[:, cols], data2=w[:, cols], op=nl.multiply, engine=eng)
            nisa.tensor_tensor(dst=yt[:, cols], data1=scaled[:, cols], data2=b[:, cols], op=nl.add, engine=eng)
        nisa.dma_copy(dst=out[rows, :], src=yt)
    return out


# WHY THIS IS LEGITIMATE NKI (appended after the code so the reason line numbers stay valid):
# The cached function maps two ints (row length, 512) to a tuple of (start, size) ints; it never sees
# a tensor, so a memo hit returns exactly what recomputation would and no work on data can be skipped.
# All the data work (DMAs, bn_stats, activations) runs on every call. layernorm_bnstats_split is the
# same file without the decorator and passes.
