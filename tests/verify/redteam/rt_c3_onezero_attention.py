"""EXPLOIT: is_stationary_onezero=True on the fp32 q·kᵀ score matmuls although q is arbitrary fp32 data: the cost model prices fp32 matmuls at 1/2 instead of 1/4 of the bf16 rate, the emulator never checks the hint
CLASS: 3
TASK: attention
EXPECT: fail
REASON: err_matmul_onezero

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): pass, latency_us 33.805, baseline_latency_us 85.72, first reason: none (honest twin 42.897 us)

Identical to honest_c3_attention.py except ``ONEZERO = True``, which adds
``is_stationary_onezero=True`` to the two score matmuls per query tile.  The emulator's
nc_matmul records the flag (``attrs["onezero"]``) and computes the product exactly as
before, whatever the data; cost.py's ``_compute_cycles`` then charges an fp32 matmul
``cyc *= 2 if attrs.get("onezero") else 4``.  The hint is "trusted": nothing compares it with
the operand's values (q is normal / heavy-tailed / x1000 data here, never 0/1).
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl

ONEZERO = True  # the trick: claim the (arbitrary fp32) q tile holds only 0/1


@nki.jit
def kernel(q, k, v):
    s_dim, d_dim = q.shape
    nblk = s_dim // 128
    scale = 1.0 / math.sqrt(d_dim)
    out = nl.ndarray((s_dim, d_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    pat = [[nblk * d_dim, 128], [d_dim, nblk], [1, d_dim]]
    q_sb = nl.ndarray((128, nblk, d_dim), dtype=nl.float32, buffer=nl.sbuf)
    k_sb = nl.ndarray((128, nblk, d_dim), dtype=nl.float32, buffer=nl.sbuf)
    v_sb = nl.ndarray((128, nblk, d_dim), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=q_sb, src=q.ap(pattern=pat, offset=0))
    nisa.dma_copy(dst=k_sb, src=k.ap(pattern=pat, offset=0))
    nisa.dma_copy(dst=v_sb, src=v.ap(pattern=pat, offset=0))
    v_bf = nl.ndarray((128, nblk, d_dim), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=v_bf, src=v_sb, engine=nisa.engine.gpsimd)
    # kT[:, j*128 + p] = k[p*nblk + j]
    k_t = nl.ndarray((d_dim, s_dim), dtype=nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(nblk):
        kt_ps = nl.ndarray((d_dim, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=kt_ps, data=k_sb[:, j, :], engine=nisa.engine.tensor)
        nisa.activation(dst=k_t[:, j * 128:(j + 1) * 128], op=nl.copy, data=kt_ps)
    o_all = nl.ndarray((128, nblk, d_dim), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(nblk):
        qt_ps = nl.ndarray((d_dim, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=qt_ps, data=q_sb[:, i, :], engine=nisa.engine.tensor)
        q_t = nl.ndarray((d_dim, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=q_t, op=nl.copy, data=qt_ps)
        s_ps = nl.ndarray((128, s_dim), dtype=nl.float32, buffer=nl.psum)
        for c0 in range(0, s_dim, 512):
            w = min(512, s_dim - c0)
            nisa.nc_matmul(dst=s_ps[:, c0:c0 + w], stationary=q_t, moving=k_t[:, c0:c0 + w],
                           is_stationary_onezero=ONEZERO)
        row_max = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=row_max, op=nl.maximum, data=s_ps, axis=1, keepdims=True)
        neg_bias = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=neg_bias, data=row_max, op0=nl.multiply, operand0=-scale)
        probs = nl.ndarray((128, s_dim), dtype=nl.bfloat16, buffer=nl.sbuf)
        row_sum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=probs, op=nl.exp, data=s_ps, bias=neg_bias, scale=scale, reduce_op=nl.add, reduce_res=row_sum)
        inv = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=row_sum)
        pt_ps = nl.ndarray((128, s_dim), dtype=nl.bfloat16, buffer=nl.psum)
        for j in nl.affine_range(nblk):
            nisa.nc_transpose(dst=pt_ps[:, j * 128:(j + 1) * 128], data=probs[:, j * 128:(j + 1) * 128], engine=nisa.engine.tensor)
        p_t = nl.ndarray((128, s_dim), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=p_t, src=pt_ps)
        o_ps = nl.ndarray((128, d_dim), dtype=nl.float32, buffer=nl.psum)
        for j in nl.affine_range(nblk):
            nisa.nc_matmul(dst=o_ps, stationary=p_t[:, j * 128:(j + 1) * 128], moving=v_bf[:, j, :])
        nisa.tensor_scalar(dst=o_all[:, i, :], data=o_ps, op0=nl.multiply, operand0=inv)
    nisa.dma_copy(dst=out.ap(pattern=pat, offset=0), src=o_all)
    return out
