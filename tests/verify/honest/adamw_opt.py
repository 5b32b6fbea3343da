"""Optimized adamw: flat partition-major chunks, the work spread over ScalarE, VectorE and GpSimd.

The update is element-wise, so every tensor is viewed as [128, N·D/128] (each partition a
contiguous run of HBM) and processed in wide chunks: every DMA moves 8 KiB per partition.
ScalarE produces (1-β1)·g, (1-β2)·g² (square with a folded scale), the decayed parameter,
sqrt(v/bc2) and the scaled reciprocal lr/bc1 / (sqrt(·) + eps) (scale and bias folded
into the activation); VectorE forms both moments with one fused multiply-add each; GpSimd
multiplies and subtracts the step.
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl

LR, BETA1, BETA2, EPS, WEIGHT_DECAY, STEP = 1e-3, 0.9, 0.999, 1e-8, 0.01, 10
P = 128
CHUNK = 2048
#: lr / (1 - β1^t): the bias-corrected step size, folded into the reciprocal
STEP_SIZE = LR / (1 - BETA1**STEP)


@nki.jit
def kernel(param, grad, exp_avg, exp_avg_sq):
    n_dim, d_dim = param.shape
    flat = (P, n_dim * d_dim // P)
    chunk = math.gcd(CHUNK, flat[1])
    out = nl.ndarray((3, n_dim, d_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    srcs = [t.reshape(flat) for t in (param, grad, exp_avg, exp_avg_sq)]
    dsts = [out[k].reshape(flat) for k in range(3)]
    # r = STEP_SIZE / (s + eps) = 1 / (s / STEP_SIZE + eps / STEP_SIZE)
    eps_scaled = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=eps_scaled, value=EPS / STEP_SIZE)

    for c in nl.affine_range(flat[1] // chunk):
        cols = nl.ds(c * chunk, chunk)
        p, g, m, v = (nl.ndarray((P, chunk), dtype=nl.float32, buffer=nl.sbuf) for _ in range(4))
        for dst, src in zip((p, g, m, v), srcs):
            nisa.dma_copy(dst=dst, src=src[:, cols])

        g_part = nl.ndarray((P, chunk), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=g_part, op=nl.copy, data=g, scale=1 - BETA1)
        g_sq_part = nl.ndarray((P, chunk), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=g_sq_part, op=nl.square, data=g, scale=math.sqrt(1 - BETA2))
        m_new = nl.ndarray((P, chunk), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=m_new, data=m, op0=nl.multiply, operand0=BETA1, op1=nl.add, operand1=g_part)
        v_new = nl.ndarray((P, chunk), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=v_new, data=v, op0=nl.multiply, operand0=BETA2, op1=nl.add, operand1=g_sq_part)
        nisa.dma_copy(dst=dsts[1][:, cols], src=m_new)
        nisa.dma_copy(dst=dsts[2][:, cols], src=v_new)

        root = nl.ndarray((P, chunk), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=root, op=nl.sqrt, data=v_new, scale=1.0 / (1 - BETA2**STEP))
        inv = nl.ndarray((P, chunk), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=inv, op=nl.reciprocal, data=root, scale=1.0 / STEP_SIZE, bias=eps_scaled)
        decayed = nl.ndarray((P, chunk), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=decayed, op=nl.copy, data=p, scale=1 - LR * WEIGHT_DECAY)
        step = nl.ndarray((P, chunk), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=step, data1=m_new, data2=inv, op=nl.multiply, engine=nisa.engine.gpsimd)
        p_new = nl.ndarray((P, chunk), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=p_new, data1=decayed, data2=step, op=nl.subtract, engine=nisa.engine.gpsimd)
        nisa.dma_copy(dst=dsts[0][:, cols], src=p_new)
    return out
