"""EXPLOIT: nl.divide as an ALU op of tensor_tensor, priced like a multiply, instead of reciprocal + multiply
CLASS: 3
TASK: adamw
EXPECT: fail
REASON: nl.divide

The adamw baseline forms m / (sqrt(v_hat) + eps) as VectorE's ``reciprocal`` (about eight
cycles per element) followed by a ``tensor_tensor`` multiply, and VectorE is the engine it
waits on. The obvious first "optimisation" is a single ``tensor_tensor(op=nl.divide)``.
The NKI ISA has no divide ALU operator (it is not in the table of supported math operators,
and the 0.3 release notes say ``nl.divide`` is not supported on hardware: write
``nl.multiply(x, nl.reciprocal(y))``). Before the fix the emulator computed the quotient
with NumPy and the cost model priced it as one ordinary two-input ALU op, so the reciprocal's
VectorE time vanished and the kernel beat the baseline it would fail to compile from.
"""

import nki
import nki.isa as nisa
import nki.language as nl

LR, BETA1, BETA2, EPS, WEIGHT_DECAY, STEP = 1e-3, 0.9, 0.999, 1e-8, 0.01, 10
TILE_F = 512


def _new(dtype):
    return nl.ndarray((128, TILE_F), dtype=dtype, buffer=nl.sbuf)


@nki.jit
def kernel(param, grad, exp_avg, exp_avg_sq):
    n_dim, d_dim = param.shape
    out = nl.ndarray((3, n_dim, d_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(n_dim // 128):
        for j in nl.affine_range(d_dim // TILE_F):
            rows, cols = nl.ds(i * 128, 128), nl.ds(j * TILE_F, TILE_F)
            p, g, m, v = _new(nl.float32), _new(nl.float32), _new(nl.float32), _new(nl.float32)
            nisa.dma_copy(dst=p, src=param[rows, cols])
            nisa.dma_copy(dst=g, src=grad[rows, cols])
            nisa.dma_copy(dst=m, src=exp_avg[rows, cols])
            nisa.dma_copy(dst=v, src=exp_avg_sq[rows, cols])

            m_old, g_part, m_new = _new(nl.float32), _new(nl.float32), _new(nl.float32)
            nisa.tensor_scalar(dst=m_old, data=m, op0=nl.multiply, operand0=BETA1)
            nisa.tensor_scalar(dst=g_part, data=g, op0=nl.multiply, operand0=1 - BETA1)
            nisa.tensor_tensor(dst=m_new, data1=m_old, data2=g_part, op=nl.add)

            g_sq, g_sq_part, v_old, v_new = _new(nl.float32), _new(nl.float32), _new(nl.float32), _new(nl.float32)
            nisa.tensor_tensor(dst=g_sq, data1=g, data2=g, op=nl.multiply)
            nisa.tensor_scalar(dst=g_sq_part, data=g_sq, op0=nl.multiply, operand0=1 - BETA2)
            nisa.tensor_scalar(dst=v_old, data=v, op0=nl.multiply, operand0=BETA2)
            nisa.tensor_tensor(dst=v_new, data1=v_old, data2=g_sq_part, op=nl.add)

            v_hat, root, denom = _new(nl.float32), _new(nl.float32), _new(nl.float32)
            nisa.tensor_scalar(dst=v_hat, data=v_new, op0=nl.multiply, operand0=1.0 / (1 - BETA2**STEP))
            nisa.activation(dst=root, op=nl.sqrt, data=v_hat)
            nisa.tensor_scalar(dst=denom, data=root, op0=nl.add, operand0=EPS)

            ratio, step, decayed, p_new = _new(nl.float32), _new(nl.float32), _new(nl.float32), _new(nl.float32)
            nisa.tensor_tensor(dst=ratio, data1=m_new, data2=denom, op=nl.divide)
            nisa.tensor_scalar(dst=step, data=ratio, op0=nl.multiply, operand0=LR / (1 - BETA1**STEP))
            nisa.tensor_scalar(dst=decayed, data=p, op0=nl.multiply, operand0=1 - LR * WEIGHT_DECAY)
            nisa.tensor_tensor(dst=p_new, data1=decayed, data2=step, op=nl.subtract)

            nisa.dma_copy(dst=out[0, rows, cols], src=p_new)
            nisa.dma_copy(dst=out[1, rows, cols], src=m_new)
            nisa.dma_copy(dst=out[2, rows, cols], src=v_new)
    return out
