"""CHEAT: exception swallowing without try/except (contextlib.suppress)
ROW: A3
TASK: rmsnorm
EXPECT: rejected
REASON: static gate [swallowed-exception]

The same fallback as a ``try/except``, spelled as a context manager so that a check
looking for ``try`` statements misses it: the output is pre-filled with x (rmsnorm is
"roughly" x for unit-variance rows), then the real computation is attempted.
"""

import contextlib

import nki
import nki.isa as nisa
import nki.language as nl

EPS = 1e-6


@nki.jit
def kernel(x, weight):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        xt = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[i * 128 : (i + 1) * 128, :])
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=xt)
    with contextlib.suppress(Exception):
        w = nl.ndarray((128, 4096), dtype=weight.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=w, src=weight.reshape((1, d)).broadcast(0, 128))
        for i in nl.affine_range(n // 128):
            rows = nl.ds(i * 128, 128)
            xt = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt, src=x[rows, :])
            sq = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
            ss = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=sq, op=nl.square, data=xt, reduce_op=nl.add, reduce_res=ss)
            nisa.tensor_scalar(dst=ss, data=ss, op0=nl.multiply, operand0=1.0 / d, op1=nl.add, operand1=EPS)
            nisa.activation(dst=ss, op=nl.rsqrt, data=ss)
            yt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=yt, data=xt, op0=nl.multiply, operand0=ss)
            nisa.tensor_tensor(dst=yt, data1=yt, data2=w, op=nl.multiply)
            nisa.dma_copy(dst=out[rows, :], src=yt)
    return out
