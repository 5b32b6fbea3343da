"""RMSNorm: ``y = x · rsqrt(mean(x², axis=-1) + eps) · weight``, rows tiled by 128.

The weight vector is broadcast to all partitions once, by a DMA whose access pattern
repeats the same HBM row (partition stride 0), and is reused by every row tile. Per tile:
ScalarE squares the row and sums it in the same instruction (``reduce_res``), a
``tensor_scalar`` turns the sum into ``mean + eps``, ScalarE takes the rsqrt, and one
``scalar_tensor_tensor`` applies both the per-row scale and the per-column weight.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rmsnorm(x, weight, eps=1e-6):
    """RMSNorm of an ``[N, D]`` fp32 tensor with a ``[D]`` weight; output ``[N, D]`` in x's dtype."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows, cols = x.shape
    pmax = nl.tile_size.pmax

    w_tile = nl.ndarray((pmax, cols), dtype=weight.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_tile, src=weight.ap(pattern=[[0, pmax], [1, cols]], offset=0))

    for i in nl.affine_range((rows + pmax - 1) // pmax):
        r0 = i * pmax
        p = min(pmax, rows - r0)
        xt = nl.ndarray((p, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[r0 : r0 + p, :])

        squares = nl.ndarray((p, cols), dtype=nl.float32, buffer=nl.sbuf)
        sum_sq = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=squares, op=nl.square, data=xt, reduce_op=nl.add, reduce_res=sum_sq)

        mean_sq = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=mean_sq, data=sum_sq, op0=nl.multiply, operand0=1.0 / cols, op1=nl.add, operand1=eps)
        inv_rms = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=inv_rms, op=nl.rsqrt, data=mean_sq)

        yt = nl.ndarray((p, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=yt, data=xt, op0=nl.multiply, operand0=inv_rms, op1=nl.multiply, operand1=w_tile[:p, :])
        nisa.dma_copy(dst=out[r0 : r0 + p, :], src=yt)
    return out
