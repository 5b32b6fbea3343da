"""HONEST: a per-call dict cache of broadcast weight tiles inside the kernel (built on first use, reused by every row tile of the same call)
STYLE: red-team class 9 (a false rejection before issue 18)
TASK: rmsnorm
BEFORE: on 064c209, before issue 18: rejected, latency_us None, baseline_latency_us None, first reason: "static gate [global-state] c9_dict_cache_rmsnorm.py:29: assigning or deleting here changes `cache`, a closure variable of an enclosing function (or an alias of one); closure state outlives the call when the inner function is returned or used as a decorator: pass values in and return results"

``cache`` is a local dict; ``weight_tile()`` loads the stride-0 broadcast of ``weight`` once
and returns the same SBUF tile afterwards.  RMSNorm itself: ScalarE square with a fused row
sum, [P,1] statistics, one VectorE scalar_tensor_tensor (x · rstd) · w.
"""

import nki
import nki.isa as nisa
import nki.language as nl

EPS = 1e-6


@nki.jit
def kernel(x, weight):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    cache = {}

    def weight_tile():
        if "w" not in cache:
            w = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=w, src=weight.ap(pattern=[[0, 128], [1, d]], offset=0))
            cache["w"] = w
        return cache["w"]

    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        xt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[rows, :])
        sq = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        ssq = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=sq, op=nl.square, data=xt, reduce_op=nl.add, reduce_res=ssq)
        ms = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=ms, data=ssq, op0=nl.multiply, operand0=1.0 / d, op1=nl.add, operand1=EPS)
        rstd = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=ms)
        yt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=yt, data=xt, op0=nl.multiply, operand0=rstd, op1=nl.multiply, operand1=weight_tile())
        nisa.dma_copy(dst=out[rows, :], src=yt)
    return out
