"""Search starting kernel for layernorm: row groups, where the square-and-sum runs, fused centring and scaling.

``ROWS_PER_PARTITION`` consecutive rows per partition per DMA (halved until 128-partition
blocks tile ``n``); ``SQUARE_ON_SCALAR`` squares the centred row and sums it in one ScalarE
``activation_reduce`` instead of two VectorE instructions; ``FUSE_NORM`` centres and scales
by 1/std in one ``tensor_scalar`` (two ops) instead of two passes; ``FUSE_WEIGHT`` applies the
scale and the weight in one ``scalar_tensor_tensor``.
"""

import nki
import nki.isa as nisa
import nki.language as nl

EPS = 1e-5
ROWS_PER_PARTITION = 1  # nkiagent: tune [1, 2, 4]
SQUARE_ON_SCALAR = False  # nkiagent: tune
FUSE_NORM = False  # nkiagent: tune
FUSE_WEIGHT = False  # nkiagent: tune


def _row_group(n):
    k = ROWS_PER_PARTITION
    while k > 1 and n % (128 * k) != 0:
        k //= 2
    return k


@nki.jit
def kernel(x, weight, bias):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    k = _row_group(n)
    w = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w, src=weight.ap(pattern=[[0, 128], [1, d]], offset=0))
    nisa.dma_copy(dst=b, src=bias.ap(pattern=[[0, 128], [1, d]], offset=0))
    x_v, out_v = x.reshape((n // k, k, d)), out.reshape((n // k, k, d))
    for i in nl.affine_range(n // (128 * k)):
        rows = nl.ds(i * 128, 128)
        xt = nl.ndarray((128, k, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x_v[rows, :, :])
        yt = nl.ndarray((128, k, d), dtype=nl.float32, buffer=nl.sbuf)
        for r in nl.affine_range(k):
            row = xt[:, r, :]
            row_sum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=row_sum, op=nl.add, data=row, axis=1, keepdims=True)
            mean = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=mean, data=row_sum, op0=nl.multiply, operand0=1.0 / d)
            centred = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=centred, data=row, op0=nl.subtract, operand0=mean)
            sq = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
            sum_sq = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            if SQUARE_ON_SCALAR:
                nisa.activation_reduce(dst=sq, op=nl.square, data=centred, reduce_op=nl.add, reduce_res=sum_sq)
            else:
                nisa.tensor_tensor(dst=sq, data1=centred, data2=centred, op=nl.multiply)
                nisa.tensor_reduce(dst=sum_sq, op=nl.add, data=sq, axis=1, keepdims=True)
            var_eps = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=var_eps, data=sum_sq, op0=nl.multiply, operand0=1.0 / d, op1=nl.add, operand1=EPS)
            inv_std = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=inv_std, op=nl.rsqrt, data=var_eps)
            scaled = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
            if FUSE_WEIGHT:
                src = row if FUSE_NORM else centred
                if FUSE_NORM:  # (x − mean) · inv_std · w: centre in a tensor_scalar, then scale and weight in one instruction
                    nisa.tensor_scalar(dst=sq, data=src, op0=nl.subtract, operand0=mean)
                    src = sq
                nisa.scalar_tensor_tensor(dst=scaled, data=src, op0=nl.multiply, operand0=inv_std, op1=nl.multiply, operand1=w)
            else:
                normed = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
                if FUSE_NORM:
                    nisa.tensor_scalar(dst=normed, data=row, op0=nl.subtract, operand0=mean, op1=nl.multiply, operand1=inv_std)
                else:
                    nisa.tensor_scalar(dst=normed, data=centred, op0=nl.multiply, operand0=inv_std)
                nisa.tensor_tensor(dst=scaled, data1=normed, data2=w, op=nl.multiply)
            nisa.tensor_tensor(dst=yt[:, r, :], data1=scaled, data2=b, op=nl.add)
        nisa.dma_copy(dst=out_v[rows, :, :], src=yt)
    return out
