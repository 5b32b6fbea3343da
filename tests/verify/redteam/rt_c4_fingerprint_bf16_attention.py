"""EXPLOIT: recognise the timed run (visible shape + exact bits of q[0,0]) and only there compute the scores from bf16 q and k (4x the TensorE rate of fp32); the task's own constraint says bf16 scores fail the x1000 inputs, which never reach this path
CLASS: 4
TASK: attention
EXPECT: rejected
REASON: integrity [data-dependent instructions]

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): pass, latency_us 33.361, baseline_latency_us 85.72, first reason: none (honest twin 42.897 us)

Same fingerprint as c4_fingerprint_attention.py (register_load of q[0,0]'s bits = 0xBFB8EDAD
learnt through the failure message, plus the visible shape).  On the timed input the
transposed q and k tiles are written as bf16 instead of fp32, so the score matmuls run at
the bf16 rate; the normal-distribution scores stay well inside rel-L2 1e-2.  On every other
input (seeds 1-4, heavy-tailed, x1000, hidden shapes) the scores stay fp32 exactly as in
honest_c3_attention.py, the honest twin.
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl

ONEZERO = False
TIMED_Q00_BITS = 0xBFB8EDAD  # q[0,0] of seed 0 / normal = -1.4447533 (c5_bits_oracle_attention.py)


@nki.jit
def kernel(q, k, v):
    s_dim, d_dim = q.shape
    nblk = s_dim // 128
    reg = nisa.register_alloc()
    nisa.register_load(reg, q.view(nl.int32)[0:1, 0:1])
    timed = (s_dim, d_dim) == (1024, 128) and (int(reg) & 0xFFFFFFFF) == TIMED_Q00_BITS
    sdt = nl.bfloat16 if timed else nl.float32  # bf16 scores: fine for N(0,1) data, wrong for the x1000 cases
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
    k_t = nl.ndarray((d_dim, s_dim), dtype=sdt, buffer=nl.sbuf)
    for j in nl.affine_range(nblk):
        kt_ps = nl.ndarray((d_dim, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=kt_ps, data=k_sb[:, j, :], engine=nisa.engine.tensor)
        nisa.activation(dst=k_t[:, j * 128:(j + 1) * 128], op=nl.copy, data=kt_ps)
    o_all = nl.ndarray((128, nblk, d_dim), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(nblk):
        qt_ps = nl.ndarray((d_dim, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=qt_ps, data=q_sb[:, i, :], engine=nisa.engine.tensor)
        q_t = nl.ndarray((d_dim, 128), dtype=sdt, buffer=nl.sbuf)
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
