"""Baseline for softmax: one 128-row tile at a time, every step its own instruction, fp32.

max → subtract → exp → sum → reciprocal → multiply, no fused bias or reduction ports.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        xt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[rows, :])
        row_max = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=row_max, op=nl.maximum, data=xt, axis=1, keepdims=True)
        shifted = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=shifted, data=xt, op0=nl.subtract, operand0=row_max)
        exps = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=exps, op=nl.exp, data=shifted)
        row_sum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=row_sum, op=nl.add, data=exps, axis=1, keepdims=True)
        inv_sum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum, data=row_sum)
        yt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=yt, data=exps, op0=nl.multiply, operand0=inv_sum)
        nisa.dma_copy(dst=out[rows, :], src=yt)
    return out
