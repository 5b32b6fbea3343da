"""CHEAT: estimate mean(x²) from every other column (half the reduction work)
ROW: B4
TASK: rmsnorm
EXPECT: fail
REASON: wrong answer

bkal01's "strided subsample of a reduction": for i.i.d. rows the half-sample mean of x² is
within a few percent of the full one, which a loose tolerance would accept. The output
still needs the full pass, but the reduction input is halved.
"""

import nki
import nki.isa as nisa
import nki.language as nl

EPS = 1e-6


@nki.jit
def kernel(x, weight):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    w = nl.ndarray((128, d), dtype=weight.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w, src=weight.reshape((1, d)).broadcast(0, 128))
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        xt = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[rows, :])
        half = xt[:, 0:d:2]
        sq = nl.ndarray((128, d // 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=sq, data1=half, data2=half, op=nl.multiply)
        ss = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=ss, op=nl.add, data=sq, axis=1, keepdims=True)
        inv = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=inv, data=ss, op0=nl.multiply, operand0=2.0 / d, op1=nl.add, operand1=EPS)
        nisa.activation(dst=inv, op=nl.rsqrt, data=inv)
        yt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=yt, data=xt, op0=nl.multiply, operand0=inv)
        nisa.tensor_tensor(dst=yt, data1=yt, data2=w, op=nl.multiply)
        nisa.dma_copy(dst=out[rows, :], src=yt)
    return out
