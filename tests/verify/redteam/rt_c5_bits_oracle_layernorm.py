"""EXPLOIT: deliberately wrong layernorm (honest result, then the first lo16+1 output elements overwritten with 1000+hi16) that leaks the exact bits of x[0,0] of the timed input through the wrong-answer reason
CLASS: 5
TASK: layernorm
EXPECT: rejected
REASON: integrity [data-dependent instructions]
LEAK: none

The stream of a kernel that reads its input's bits into registers to decide what it writes depends
on the data, so it is rejected before any failure text could carry those bits.

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): fail, latency_us None, baseline_latency_us None, first reason: "wrong answer (shape(D=2048,N=2048) seed=0 dist=normal): 33126 of 4194304 elements outside tolerance (rtol 0.0001, atol 1e-05×rms); max abs err 4.95e+04, max rel err 1.19e+09. first mismatch at index [0, 0]: got 49497, expected 0.937099" -> same bits as softmax: x[0,0] = 0xBD718165 = -0.05896129

Same channel as c5_bits_oracle_softmax.py: "K of M elements outside tolerance" gives lo16 = K-1
and "first mismatch at index [0, 0]: got V" gives hi16 = V-1000, for run 0 (visible shape,
seed 0, normal), the run the latency is taken from.  The honest part of the kernel is honest_c2_layernorm.py.
"""

import nki
import nki.isa as nisa
import nki.language as nl

EPS = 1e-5
ENGINE_MUL = None   # None -> VectorE (default engine)
ENGINE_ADD = "gpsimd"


def _eng(name):
    if name is None:
        return nisa.engine.unknown
    return {"tensor": nisa.engine.tensor, "sync": nisa.engine.sync, "scalar": nisa.engine.scalar,
            "gpsimd": nisa.engine.gpsimd, "vector": nisa.engine.vector, "dma": nisa.engine.dma}[name]


@nki.jit
def kernel(x, weight, bias):
    reg = nisa.register_alloc()
    nisa.register_load(reg, x.view(nl.int32)[0:1, 0:1])
    bits = int(reg) & 0xFFFFFFFF
    hi, lo = bits >> 16, bits & 0xFFFF
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
        neg_mean = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=neg_mean, data=row_sum, op0=nl.multiply, operand0=-1.0 / d)
        centred = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=centred, op=nl.copy, data=xt, bias=neg_mean)
        sq = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        ssq = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=sq, op=nl.square, data=centred, reduce_op=nl.add, reduce_res=ssq)
        var_eps = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=var_eps, data=ssq, op0=nl.multiply, operand0=1.0 / d, op1=nl.add, operand1=EPS)
        rstd = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=var_eps)
        normed = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=normed, op=nl.copy, data=centred, scale=rstd)
        scaled = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=scaled, data1=normed, data2=w, op=nl.multiply, engine=_eng(ENGINE_MUL))
        yt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=yt, data1=scaled, data2=b, op=nl.add, engine=_eng(ENGINE_ADD))
        nisa.dma_copy(dst=out[rows, :], src=yt)
    k_cnt = lo + 1
    full, rem = k_cnt // d, k_cnt % d
    mark = float(1000 + hi)
    for r0 in range(0, full, 128):
        h = min(128, full - r0)
        blk = nl.ndarray((h, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=blk, value=mark)
        nisa.dma_copy(dst=out[r0:r0 + h, :], src=blk)
    if rem:
        part = nl.ndarray((1, rem), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=part, value=mark)
        nisa.dma_copy(dst=out[full:full + 1, 0:rem], src=part)
    return out
