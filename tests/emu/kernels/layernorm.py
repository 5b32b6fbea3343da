"""LayerNorm two ways: plain reductions, and the BatchNorm-statistics instructions.

``y = (x - mean) · rsqrt(var + eps) · gamma + beta`` over the last axis of ``x [N, D]``,
rows tiled by 128, gamma and beta ``[D]`` broadcast to all partitions once by a DMA with a
partition stride of 0.

* :func:`layernorm` computes the mean with a ``tensor_reduce`` and the variance as the
  mean of the squared centred row (ScalarE square with a fused row sum): two passes over
  the row on two engines.
* :func:`layernorm_bn` gets mean and variance from ``nisa.bn_stats`` (one per chunk of at
  most ``bn_stats_fmax`` columns, each writing :data:`BN_STATS_DIM` statistics) combined
  by one ``nisa.bn_aggr`` into :data:`BN_AGGR_DIM` values (mean, variance), then
  normalizes with a single two-op ``tensor_scalar``. This is the faster form the
  LayerNorm tutorial arrives at.
"""

import nki
import nki.isa as nisa
import nki.language as nl

#: Statistics ``bn_stats`` writes per partition (count, mean and count·var for even and odd elements).
BN_STATS_DIM = 6
#: Values ``bn_aggr`` writes per partition: mean, variance.
BN_AGGR_DIM = 2


def _broadcast_rows(vec, pmax, cols):
    """Load a ``[D]`` HBM vector into a ``[pmax, D]`` SBUF tile, the same row on every partition."""
    tile = nl.ndarray((pmax, cols), dtype=vec.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=vec.ap(pattern=[[0, pmax], [1, cols]], offset=0))
    return tile


def _scale_shift(out_rows, normed, gamma_t, beta_t, p, cols, dtype):
    """``normed · gamma + beta`` into a new tile, then store it to ``out_rows``."""
    scaled = nl.ndarray((p, cols), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=scaled, data1=normed, data2=gamma_t[:p, :], op=nl.multiply)
    yt = nl.ndarray((p, cols), dtype=dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=yt, data1=scaled, data2=beta_t[:p, :], op=nl.add)
    nisa.dma_copy(dst=out_rows, src=yt)


def _inv_std(var, p, eps):
    """``rsqrt(var + eps)`` of a ``[p, 1]`` fp32 column."""
    var_eps = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=var_eps, data=var, op0=nl.add, operand0=eps)
    inv_std = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=inv_std, op=nl.rsqrt, data=var_eps)
    return inv_std


def _layernorm_rows(x, gamma, beta, eps, normalize):
    """The row-tile loop every LayerNorm here shares: load a tile of up to 128 rows (the last one
    may be ragged), ``normalize(xt, p, cols, eps)`` it into an fp32 tile, scale, shift, store."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows, cols = x.shape
    pmax = nl.tile_size.pmax
    gamma_t = _broadcast_rows(gamma, pmax, cols)
    beta_t = _broadcast_rows(beta, pmax, cols)
    for i in nl.affine_range((rows + pmax - 1) // pmax):
        r0 = i * pmax
        p = min(pmax, rows - r0)
        xt = nl.ndarray((p, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[r0 : r0 + p, :])
        _scale_shift(out[r0 : r0 + p, :], normalize(xt, p, cols, eps), gamma_t, beta_t, p, cols, x.dtype)
    return out


def _normalize_plain(xt, p, cols, eps):
    row_sum = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=row_sum, op=nl.add, data=xt, axis=1, keepdims=True)
    mean = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=mean, data=row_sum, op0=nl.multiply, operand0=1.0 / cols)

    centred = nl.ndarray((p, cols), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=centred, data=xt, op0=nl.subtract, operand0=mean)
    squares = nl.ndarray((p, cols), dtype=nl.float32, buffer=nl.sbuf)
    sum_sq = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=squares, op=nl.square, data=centred, reduce_op=nl.add, reduce_res=sum_sq)
    var = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=var, data=sum_sq, op0=nl.multiply, operand0=1.0 / cols)

    normed = nl.ndarray((p, cols), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=normed, data=centred, op0=nl.multiply, operand0=_inv_std(var, p, eps))
    return normed


def _normalize_bn(xt, p, cols, eps):
    fmax = nl.tile_size.bn_stats_fmax
    n_chunks = (cols + fmax - 1) // fmax
    stats = nl.ndarray((p, n_chunks * BN_STATS_DIM), dtype=nl.float32, buffer=nl.sbuf)
    for c in nl.affine_range(n_chunks):
        c0 = c * fmax
        f = min(fmax, cols - c0)
        nisa.bn_stats(dst=stats[:, c * BN_STATS_DIM : (c + 1) * BN_STATS_DIM], data=xt[:, c0 : c0 + f])
    mean_var = nl.ndarray((p, BN_AGGR_DIM), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_aggr(dst=mean_var, data=stats)

    normed = nl.ndarray((p, cols), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(
        dst=normed, data=xt, op0=nl.subtract, operand0=mean_var[:, 0:1], op1=nl.multiply, operand1=_inv_std(mean_var[:, 1:2], p, eps)
    )
    return normed


@nki.jit
def layernorm(x, gamma, beta, eps=1e-5):
    """LayerNorm of ``x [N, D]`` with mean and variance from plain reductions."""
    return _layernorm_rows(x, gamma, beta, eps, _normalize_plain)


@nki.jit
def layernorm_bn(x, gamma, beta, eps=1e-5):
    """LayerNorm of ``x [N, D]`` with mean and variance from ``bn_stats`` / ``bn_aggr``."""
    return _layernorm_rows(x, gamma, beta, eps, _normalize_bn)
