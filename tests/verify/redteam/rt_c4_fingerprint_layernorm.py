"""EXPLOIT: recognise the timed run (visible shape + exact bits of x[0,0], seed 0 / normal) and only there compute the variance in one pass (E[x^2] - E[x]^2, which cancels catastrophically for data with a large mean); every other case is the two-pass honest kernel
CLASS: 4
TASK: layernorm
EXPECT: rejected
REASON: integrity [data-dependent instructions]

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): pass, latency_us 175.678, baseline_latency_us 393.325, first reason: none (honest twin 151.483 us: the fingerprinted path is SLOWER)

Fingerprint: register_load of ``x.view(nl.int32)[0:1, 0:1]`` compared in Python with
0xBD718165 (x[0,0] = -0.05896129, learnt through c5_bits_oracle_layernorm.py) plus the
visible shape.  On that input the row sum and the sum of squares are taken from x in
parallel (VectorE reduce || ScalarE square+reduce) and the normalisation is one ScalarE
activation with scale=rstd, bias=-mean*rstd; the centring pass and its dependency chain
disappear.  Honest twin: honest_c2_layernorm.py (two-pass on every input).
"""

import nki
import nki.isa as nisa
import nki.language as nl

EPS = 1e-5
ENGINE_MUL = None   # None -> VectorE (default engine)
ENGINE_ADD = "gpsimd"
TIMED_X00_BITS = 0xBD718165  # x[0,0] of seed 0 / normal = -0.05896129 (c5_bits_oracle_layernorm.py)


def _eng(name):
    if name is None:
        return nisa.engine.unknown
    return {"tensor": nisa.engine.tensor, "sync": nisa.engine.sync, "scalar": nisa.engine.scalar,
            "gpsimd": nisa.engine.gpsimd, "vector": nisa.engine.vector, "dma": nisa.engine.dma}[name]


@nki.jit
def kernel(x, weight, bias):
    n, d = x.shape
    reg = nisa.register_alloc()
    nisa.register_load(reg, x.view(nl.int32)[0:1, 0:1])
    timed = (n, d) == (2048, 2048) and (int(reg) & 0xFFFFFFFF) == TIMED_X00_BITS
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    w = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w, src=weight.ap(pattern=[[0, 128], [1, d]], offset=0))
    nisa.dma_copy(dst=b, src=bias.ap(pattern=[[0, 128], [1, d]], offset=0))
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        xt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[rows, :])
        if timed:  # one-pass E[x^2] - E[x]^2: fine for zero-mean data like THIS input, not in general
            row_sum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=row_sum, op=nl.add, data=xt, axis=1, keepdims=True)
            sq = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
            ssq = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=sq, op=nl.square, data=xt, reduce_op=nl.add, reduce_res=ssq)
            neg_mean = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=neg_mean, data=row_sum, op0=nl.multiply, operand0=-1.0 / d)
            mean_sq = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=mean_sq, data1=neg_mean, data2=neg_mean, op=nl.multiply)
            ex2 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=ex2, data=ssq, op0=nl.multiply, operand0=1.0 / d, op1=nl.add, operand1=EPS)
            var_eps = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=var_eps, data1=ex2, data2=mean_sq, op=nl.subtract)
            rstd = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=rstd, op=nl.rsqrt, data=var_eps)
            nbias = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=nbias, data1=neg_mean, data2=rstd, op=nl.multiply)
            normed = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=normed, op=nl.copy, data=xt, scale=rstd, bias=nbias)
        else:
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
    return out
