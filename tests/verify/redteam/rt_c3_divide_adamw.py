"""EXPLOIT: tensor_tensor(op=nl.divide) for m / denom — a simulation-only ALU op (the cheat-sheet says "not supported on hardware, use multiply by reciprocal") accepted by the verifier and priced exactly like a multiply
CLASS: 3
TASK: adamw
EXPECT: fail
REASON: err_op_not_on_hardware

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): pass, latency_us 51.159, baseline_latency_us 134.166, first reason: none (honest twin 53.043 us)

Identical to honest_c3_adamw.py except ``USE_DIVIDE = True``: the reciprocal activation on
ScalarE plus the multiply on GpSimd become one ``tensor_tensor(op=nl.divide)``.  cost.py's
tensor_tensor formula does not look at the ALU op except to grant the 16-bit fast path
(add/multiply/subtract), so divide costs max(64, 2N) cycles like any fp32 tensor_tensor.
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl

LR, BETA1, BETA2, EPS, WEIGHT_DECAY, STEP = 1e-3, 0.9, 0.999, 1e-8, 0.01, 10
BC1 = 1 - BETA1**STEP
BC2 = 1 - BETA2**STEP
USE_DIVIDE = True  # the trick: one nl.divide instead of reciprocal + multiply


def _tile(d):
    return nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)


@nki.jit
def kernel(param, grad, exp_avg, exp_avg_sq):
    n_dim, d_dim = param.shape
    out = nl.ndarray((3, n_dim, d_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(n_dim // 128):
        rows = nl.ds(i * 128, 128)
        p, g, m, v = _tile(d_dim), _tile(d_dim), _tile(d_dim), _tile(d_dim)
        nisa.dma_copy(dst=p, src=param[rows, :])
        nisa.dma_copy(dst=g, src=grad[rows, :])
        nisa.dma_copy(dst=m, src=exp_avg[rows, :])
        nisa.dma_copy(dst=v, src=exp_avg_sq[rows, :])
        g1, g2, pd = _tile(d_dim), _tile(d_dim), _tile(d_dim)
        nisa.activation(dst=g1, op=nl.copy, data=g, scale=1 - BETA1)
        nisa.activation(dst=g2, op=nl.square, data=g, scale=math.sqrt(1 - BETA2))
        nisa.activation(dst=pd, op=nl.copy, data=p, scale=1 - LR * WEIGHT_DECAY)
        m_new, v_new = _tile(d_dim), _tile(d_dim)
        nisa.scalar_tensor_tensor(dst=m_new, data=m, op0=nl.multiply, operand0=BETA1, op1=nl.add, operand1=g1)
        nisa.scalar_tensor_tensor(dst=v_new, data=v, op0=nl.multiply, operand0=BETA2, op1=nl.add, operand1=g2)
        nisa.dma_copy(dst=out[1, rows, :], src=m_new)
        nisa.dma_copy(dst=out[2, rows, :], src=v_new)
        root, denom, ratio = _tile(d_dim), _tile(d_dim), _tile(d_dim)
        nisa.activation(dst=root, op=nl.sqrt, data=v_new, scale=1.0 / BC2)
        nisa.tensor_scalar(dst=denom, data=root, op0=nl.add, operand0=EPS, engine=nisa.engine.gpsimd)
        if USE_DIVIDE:
            nisa.tensor_tensor(dst=ratio, data1=m_new, data2=denom, op=nl.divide, engine=nisa.engine.gpsimd)
        else:
            inv = _tile(d_dim)
            nisa.activation(dst=inv, op=nl.reciprocal, data=denom)
            nisa.tensor_tensor(dst=ratio, data1=m_new, data2=inv, op=nl.multiply, engine=nisa.engine.gpsimd)
        p_new = _tile(d_dim)
        nisa.scalar_tensor_tensor(dst=p_new, data=ratio, op0=nl.multiply, operand0=-LR / BC1, op1=nl.add, operand1=pd)
        nisa.dma_copy(dst=out[0, rows, :], src=p_new)
    return out
