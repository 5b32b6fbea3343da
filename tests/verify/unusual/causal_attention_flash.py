"""HONEST: flash-style causal attention: per query tile only key chunks up to the diagonal (512 wide, ragged last chunk), the diagonal 128×128 block masked by adding a GpSimd-built mask, online softmax carried across chunks; Enum for chunk kinds, typed helpers
STYLE: 3, 4, 11, 12
TASK: causal_attention
BEFORE: on 064c209, before issue 18: pass, latency_us 46.596 (emulator-estimate, trn2), speedup 1.764x over the baseline

Query tile i sees keys [0, 128·(i+1)). Those keys are visited in chunks of up to 512; the
last chunk ends at the diagonal and is the only one that needs a mask, on its last 128
columns (key block i against query block i: keep key f for query p when p − f ≥ 0). The
mask is a [128, 128] fp32 tile of 0 / −1e30 built once with affine_select and added to the
scores on their way out of PSUM. The rest is the online softmax of attention_flash: running
max, running sum and running output rescaled by exp(m_old − m_new), fp32 scores, bf16 P·v.
"""
from __future__ import annotations

import enum
import math

import nki
import nki.isa as nisa
import nki.language as nl

P = 128
KB = 512
NEG_BIG = -3.0e38
MASKED = -1.0e30


class Chunk(enum.Enum):
    FULL = 0
    DIAGONAL = 1


def _f32(shape: tuple[int, ...], buffer=nl.sbuf):
    return nl.ndarray(shape, dtype=nl.float32, buffer=buffer)


def _chunks(n_keys: int) -> list[tuple[int, int, Chunk]]:
    """(start, width, kind) of the key chunks of a query tile that sees n_keys keys."""
    out: list[tuple[int, int, Chunk]] = []
    for k0 in range(0, n_keys, KB):
        w = min(KB, n_keys - k0)
        out.append((k0, w, Chunk.DIAGONAL if k0 + w == n_keys else Chunk.FULL))
    return out


def _diagonal_mask():
    zeros = _f32((P, P))
    nisa.memset(dst=zeros, value=0.0)
    mask = _f32((P, P))
    nisa.affine_select(dst=mask, pattern=[[-1, P]], channel_multiplier=1, on_true_tile=zeros,
                       on_false_value=MASKED, cmp_op=nl.greater_equal)
    return mask


@nki.jit
def kernel(q, k, v):
    s_dim, d_dim = q.shape
    nt = s_dim // P
    scale = 1.0 / math.sqrt(d_dim)
    out = nl.ndarray((s_dim, d_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    mask = _diagonal_mask()

    k_t = _f32((d_dim, s_dim))
    v_bf = nl.ndarray((P, nt, d_dim), dtype=nl.bfloat16, buffer=nl.sbuf)
    for t in nl.affine_range(nt):
        kr = _f32((P, d_dim))
        nisa.dma_copy(dst=kr, src=k[t * P : (t + 1) * P, :])
        kr_t = _f32((d_dim, P), nl.psum)
        nisa.nc_transpose(dst=kr_t, data=kr)
        nisa.tensor_copy(dst=k_t[:, t * P : (t + 1) * P], src=kr_t)
        vr = _f32((P, d_dim))
        nisa.dma_copy(dst=vr, src=v[t * P : (t + 1) * P, :])
        nisa.tensor_copy(dst=v_bf[:, t, :], src=vr, engine=nisa.engine.gpsimd)

    for i in nl.static_range(nt):
        qr = _f32((P, d_dim))
        nisa.dma_copy(dst=qr, src=q[i * P : (i + 1) * P, :])
        qr_t = _f32((d_dim, P), nl.psum)
        nisa.nc_transpose(dst=qr_t, data=qr)
        q_t = _f32((d_dim, P))
        nisa.tensor_scalar(dst=q_t, data=qr_t, op0=nl.multiply, operand0=scale)

        m_run, l_run, o_run = _f32((P, 1)), _f32((P, 1)), _f32((P, d_dim))
        nisa.memset(dst=m_run, value=NEG_BIG)
        nisa.memset(dst=l_run, value=0.0)
        nisa.memset(dst=o_run, value=0.0)
        for k0, w, kind in _chunks((i + 1) * P):
            s_ps = _f32((P, w), nl.psum)
            nisa.nc_matmul(dst=s_ps, stationary=q_t, moving=k_t[:, k0 : k0 + w])
            if kind is Chunk.DIAGONAL:
                s = _f32((P, w))
                if w > P:
                    nisa.tensor_copy(dst=s[:, : w - P], src=s_ps[:, : w - P])
                nisa.tensor_tensor(dst=s[:, w - P :], data1=s_ps[:, w - P :], data2=mask, op=nl.add)
            else:
                s = s_ps
            b_max = _f32((P, 1))
            nisa.tensor_reduce(dst=b_max, op=nl.maximum, data=s, axis=1, keepdims=True)
            m_new = _f32((P, 1))
            nisa.tensor_tensor(dst=m_new, data1=m_run, data2=b_max, op=nl.maximum)
            neg_m = _f32((P, 1))
            nisa.tensor_scalar(dst=neg_m, data=m_new, op0=nl.multiply, operand0=-1.0)
            p_bf = nl.ndarray((P, w), dtype=nl.bfloat16, buffer=nl.sbuf)
            p_sum = _f32((P, 1))
            nisa.activation(dst=p_bf, op=nl.exp, data=s, bias=neg_m, reduce_op=nl.add, reduce_res=p_sum)
            corr = _f32((P, 1))
            nisa.activation(dst=corr, op=nl.exp, data=m_run, bias=neg_m)
            pv = _f32((P, d_dim), nl.psum)
            for c in nl.affine_range(w // P):
                pt_ps = nl.ndarray((P, P), dtype=nl.bfloat16, buffer=nl.psum)
                nisa.nc_transpose(dst=pt_ps, data=p_bf[:, c * P : (c + 1) * P])
                pt = nl.ndarray((P, P), dtype=nl.bfloat16, buffer=nl.sbuf)
                nisa.tensor_copy(dst=pt, src=pt_ps)
                nisa.nc_matmul(dst=pv, stationary=pt, moving=v_bf[:, k0 // P + c, :])
            nisa.scalar_tensor_tensor(dst=l_run, data=l_run, op0=nl.multiply, operand0=corr, op1=nl.add, operand1=p_sum)
            nisa.scalar_tensor_tensor(dst=o_run, data=o_run, op0=nl.multiply, operand0=corr, op1=nl.add, operand1=pv)
            nisa.tensor_copy(dst=m_run, src=m_new)
        inv = _f32((P, 1))
        nisa.reciprocal(dst=inv, data=l_run)
        o_sb = _f32((P, d_dim))
        nisa.tensor_scalar(dst=o_sb, data=o_run, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=out[i * P : (i + 1) * P, :], src=o_sb)
    return out
