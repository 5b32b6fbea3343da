"""Baseline for layernorm: one 128-row tile at a time, two-pass statistics, every step its own instruction, fp32.

mean by a row sum; variance as the mean of the squared centred row; sqrt → reciprocal;
then scale, weight and bias as three separate passes. Weight and bias are broadcast to all
partitions once by stride-0 DMAs.
"""

import nki
import nki.isa as nisa
import nki.language as nl

EPS = 1e-5


@nki.jit
def kernel(x, weight, bias):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    w = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w, src=weight.ap(pattern=[[0, 128], [1, d]], offset=0))
    nisa.dma_copy(dst=b, src=bias.ap(pattern=[[0, 128], [1, d]], offset=0))
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        xt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[rows, :])
        row_sum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=row_sum, op=nl.add, data=xt, axis=1, keepdims=True)
        mean = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=mean, data=row_sum, op0=nl.multiply, operand0=1.0 / d)
        centred = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=centred, data=xt, op0=nl.subtract, operand0=mean)
        sq = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=sq, data1=centred, data2=centred, op=nl.multiply)
        sum_sq = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=sum_sq, op=nl.add, data=sq, axis=1, keepdims=True)
        var_eps = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=var_eps, data=sum_sq, op0=nl.multiply, operand0=1.0 / d, op1=nl.add, operand1=EPS)
        std = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=std, op=nl.sqrt, data=var_eps)
        inv_std = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_std, data=std)
        normed = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=normed, data=centred, op0=nl.multiply, operand0=inv_std)
        scaled = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=scaled, data1=normed, data2=w, op=nl.multiply)
        yt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=yt, data1=scaled, data2=b, op=nl.add)
        nisa.dma_copy(dst=out[rows, :], src=yt)
    return out
