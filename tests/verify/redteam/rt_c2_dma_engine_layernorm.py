"""EXPLOIT: tensor_tensor(op=multiply, engine=nisa.engine.dma): an element-wise multiply executed "by a DMA queue" and priced as a DMA (bytes / queue bandwidth)
CLASS: 2
TASK: layernorm
EXPECT: fail
REASON: err_unsupported_engine

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): pass, latency_us 160.841, baseline_latency_us 393.325, first reason: none (accepted although a DMA queue has no ALU; slower than the honest twin 151.483 us)

Identical to honest_c2_layernorm.py (151.483 us, pass) except for ``ENGINE_MUL``: the
``normed * weight`` tensor_tensor of every row tile is sent to ``dma``.  The emulator's
``engine_name`` accepts any ``nisa.engine`` member for tensor_tensor / tensor_scalar /
tensor_copy / memset, ``check_compute_operand`` only enforces memory rules for it, and the
cost model prices the instruction on that engine's lane (cost.instruction_cost: engine not in
vector/scalar/gpsimd/tensor -> "sync" lane; engine "dma" -> the DMA formula).
"""

import nki
import nki.isa as nisa
import nki.language as nl

EPS = 1e-5
ENGINE_MUL = "dma"  # the trick: x·weight on an engine that has no such ALU path
ENGINE_ADD = "gpsimd"


def _eng(name):
    if name is None:
        return nisa.engine.unknown
    return {"tensor": nisa.engine.tensor, "sync": nisa.engine.sync, "scalar": nisa.engine.scalar,
            "gpsimd": nisa.engine.gpsimd, "vector": nisa.engine.vector, "dma": nisa.engine.dma}[name]


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
