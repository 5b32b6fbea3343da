"""Optimized layernorm: one-pass statistics (bn_stats/bn_aggr), normalization on ScalarE, affine split over two engines.

The baseline makes eight full passes per tile on VectorE. Here VectorE's BatchNorm
instructions give mean and variance in one read of the row (``bn_stats`` per 512-column
chunk, combined by ``bn_aggr``); ScalarE normalizes with a single activation
``x · rstd + (−mean · rstd)`` (scale and bias are [128, 1] columns); the weight multiply is
split by columns between VectorE (already busy with the statistics) and GpSimd, which then
adds the bias. This balances VectorE and GpSimd at about half the baseline's VectorE time
each, so the engines keep up with the DMAs.
"""

import nki
import nki.isa as nisa
import nki.language as nl

EPS = 1e-5
BN_STATS_DIM = 6  #: statistics bn_stats writes per partition and chunk
BN_AGGR_DIM = 2  #: values bn_aggr writes per partition: mean, variance


def _broadcast_rows(vec, d):
    """A [D] HBM vector on all 128 partitions, by one DMA with partition stride 0."""
    tile = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=vec.ap(pattern=[[0, 128], [1, d]], offset=0))
    return tile


def _mean_var(xt, d):
    """[128, 2] (mean, variance) of each row of ``xt`` from bn_stats over ≤ bn_stats_fmax-column chunks."""
    fmax = nl.tile_size.bn_stats_fmax
    n_chunks = (d + fmax - 1) // fmax
    stats = nl.ndarray((128, n_chunks * BN_STATS_DIM), dtype=nl.float32, buffer=nl.sbuf)
    for c in nl.affine_range(n_chunks):
        c0 = c * fmax
        nisa.bn_stats(dst=stats[:, c * BN_STATS_DIM : (c + 1) * BN_STATS_DIM], data=xt[:, c0 : min(d, c0 + fmax)])
    mean_var = nl.ndarray((128, BN_AGGR_DIM), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_aggr(dst=mean_var, data=stats)
    return mean_var


@nki.jit
def kernel(x, weight, bias):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    w = _broadcast_rows(weight, d)
    b = _broadcast_rows(bias, d)
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        xt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[rows, :])
        mean_var = _mean_var(xt, d)
        var_eps = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=var_eps, data=mean_var[:, 1:2], op0=nl.add, operand0=EPS)
        rstd = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=var_eps)
        shift = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=shift, data=mean_var[:, 0:1], op0=nl.multiply, operand0=rstd, op1=nl.multiply, operand1=-1.0)
        normed = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=normed, op=nl.copy, data=xt, scale=rstd, bias=shift)
        scaled = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        half = d // 2
        nisa.tensor_tensor(dst=scaled[:, :half], data1=normed[:, :half], data2=w[:, :half], op=nl.multiply)
        nisa.tensor_tensor(dst=scaled[:, half:], data1=normed[:, half:], data2=w[:, half:], op=nl.multiply, engine=nisa.engine.gpsimd)
        yt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=yt, data1=scaled, data2=b, op=nl.add, engine=nisa.engine.gpsimd)
        nisa.dma_copy(dst=out[rows, :], src=yt)
    return out
