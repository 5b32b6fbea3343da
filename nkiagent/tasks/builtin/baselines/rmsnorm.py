"""Baseline for rmsnorm: one 128-row tile at a time, every step its own instruction, fp32.

square → row sum → mean + eps → sqrt → its reciprocal → multiply the rows by it → multiply by
the weight, which is broadcast to all partitions once by a stride-0 DMA. (The hardware has no
divide: dividing by the row's rms is a reciprocal and a multiply.)
"""

import nki
import nki.isa as nisa
import nki.language as nl

EPS = 1e-6


@nki.jit
def kernel(x, weight):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    w = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w, src=weight.ap(pattern=[[0, 128], [1, d]], offset=0))
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        xt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[rows, :])
        sq = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=sq, data1=xt, data2=xt, op=nl.multiply)
        sum_sq = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=sum_sq, op=nl.add, data=sq, axis=1, keepdims=True)
        mean_sq = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=mean_sq, data=sum_sq, op0=nl.multiply, operand0=1.0 / d, op1=nl.add, operand1=EPS)
        rms = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rms, op=nl.sqrt, data=mean_sq)
        inv_rms = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_rms, data=rms)
        normed = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=normed, data=xt, op0=nl.multiply, operand0=inv_rms)
        yt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=yt, data1=normed, data2=w, op=nl.multiply)
        nisa.dma_copy(dst=out[rows, :], src=yt)
    return out
