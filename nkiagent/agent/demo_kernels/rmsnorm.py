"""Search starting kernel for rmsnorm: row groups, where the square runs, one rsqrt or sqrt + reciprocal, a fused weight multiply.

``ROWS_PER_PARTITION`` consecutive rows per partition per DMA (halved until 128-partition
blocks tile ``n``); ``SQUARE_ON_SCALAR`` squares and sums each row in one ScalarE
``activation`` with a row reduction instead of two VectorE instructions; ``RECIPROCAL``
computes 1/rms in one ScalarE ``rsqrt`` instead of a ``sqrt`` and a VectorE ``reciprocal``
(the hardware has no divide: both multiply the row by 1/rms);
``FUSE_WEIGHT`` applies the row scale and the weight in one ``scalar_tensor_tensor``.
"""

import nki
import nki.isa as nisa
import nki.language as nl

EPS = 1e-6
ROWS_PER_PARTITION = 1  # nkiagent: tune [1, 2, 4]
SQUARE_ON_SCALAR = False  # nkiagent: tune
RECIPROCAL = False  # nkiagent: tune
FUSE_WEIGHT = False  # nkiagent: tune


def _row_group(n):
    k = ROWS_PER_PARTITION
    while k > 1 and n % (128 * k) != 0:
        k //= 2
    return k


@nki.jit
def kernel(x, weight):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    k = _row_group(n)
    w = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w, src=weight.ap(pattern=[[0, 128], [1, d]], offset=0))
    x_v, out_v = x.reshape((n // k, k, d)), out.reshape((n // k, k, d))
    for i in nl.affine_range(n // (128 * k)):
        rows = nl.ds(i * 128, 128)
        xt = nl.ndarray((128, k, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x_v[rows, :, :])
        yt = nl.ndarray((128, k, d), dtype=nl.float32, buffer=nl.sbuf)
        for r in nl.affine_range(k):
            row = xt[:, r, :]
            sum_sq = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            sq = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
            if SQUARE_ON_SCALAR:
                nisa.activation_reduce(dst=sq, op=nl.square, data=row, reduce_op=nl.add, reduce_res=sum_sq)
            else:
                nisa.tensor_tensor(dst=sq, data1=row, data2=row, op=nl.multiply)
                nisa.tensor_reduce(dst=sum_sq, op=nl.add, data=sq, axis=1, keepdims=True)
            mean_sq = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=mean_sq, data=sum_sq, op0=nl.multiply, operand0=1.0 / d, op1=nl.add, operand1=EPS)
            scale = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            if RECIPROCAL:
                nisa.activation(dst=scale, op=nl.rsqrt, data=mean_sq)
            else:
                rms = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.activation(dst=rms, op=nl.sqrt, data=mean_sq)
                nisa.reciprocal(dst=scale, data=rms)
            if FUSE_WEIGHT:
                nisa.scalar_tensor_tensor(dst=yt[:, r, :], data=row, op0=nl.multiply, operand0=scale, op1=nl.multiply, operand1=w)
            else:
                normed = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_scalar(dst=normed, data=row, op0=nl.multiply, operand0=scale)
                nisa.tensor_tensor(dst=yt[:, r, :], data1=normed, data2=w, op=nl.multiply)
        nisa.dma_copy(dst=out_v[rows, :, :], src=yt)
    return out
