"""HONEST: rmsnorm_matmul with the scales reassociated: weight applied per partition while xᵀ leaves PSUM (cast to bf16), 1/rms applied per row while the product leaves PSUM; w resident in bf16
STYLE: 9, 11, 12
TASK: rmsnorm_matmul
BEFORE: on 064c209, before issue 18: pass, latency_us 150.803 (emulator-estimate, trn2), speedup 3.6118x over the baseline

out = diag(1/rms) · (x · diag(weight)) · w. Per 128-row tile: ScalarE's activation(square)
with its row reduction gives Σx², then rstd = rsqrt(Σx²/D + eps). Each [128, 128] block of x
is transposed on TensorE (fp32, exact) and, on its way out of PSUM, multiplied by the weight
column of its 128 features (a per-partition scalar now that D is on partitions) and rounded
to bf16. The products accumulate over D in one PSUM bank per 512 output columns and are
multiplied by rstd straight from PSUM. w is loaded once as [128, D/128, F] bf16 (a w too large
to stay resident — none of the task's shapes — is streamed per 512-column block instead).
"""
from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl

P = 128
NB = 512
EPS = 1e-6
RESIDENT_BYTES = 96 * 1024  # per partition; a larger w (none of the task's shapes) is streamed per column block


def _f32(shape: tuple[int, ...], buffer=nl.sbuf):
    return nl.ndarray(shape, dtype=nl.float32, buffer=buffer)


def _row_rstd(xt, d: int):
    sq = _f32(tuple(xt.shape))
    ss = _f32((P, 1))
    nisa.activation(dst=sq, op=nl.square, data=xt, reduce_op=nl.add, reduce_res=ss)
    ms = _f32((P, 1))
    nisa.tensor_scalar(dst=ms, data=ss, op0=nl.multiply, operand0=1.0 / d, op1=nl.add, operand1=EPS)
    rstd = _f32((P, 1))
    nisa.activation(dst=rstd, op=nl.rsqrt, data=ms)
    return rstd


@nki.jit
def kernel(x, weight, w):
    n_dim, d_dim = x.shape
    f_dim = w.shape[1]
    nd = d_dim // P
    out = nl.ndarray((n_dim, f_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    resident = nd * f_dim * 2 <= RESIDENT_BYTES
    if resident:
        w_res = nl.ndarray((P, nd, f_dim), dtype=w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=w_res, src=w.reshape((nd, P, f_dim)).permute((1, 0, 2)))
    w_cols = _f32((P, nd))  # w_cols[p, kk] = weight[kk·128 + p]
    nisa.dma_copy(dst=w_cols, src=weight.reshape((nd, P)).permute((1, 0)))
    for i in nl.affine_range(n_dim // P):
        rows = nl.ds(i * P, P)
        xt = _f32((P, d_dim))
        nisa.dma_copy(dst=xt, src=x[rows, :])
        rstd = _row_rstd(xt, d_dim)
        xw_t = nl.ndarray((P, nd, P), dtype=nl.bfloat16, buffer=nl.sbuf)
        for kk in nl.affine_range(nd):
            tp = _f32((P, P), nl.psum)
            nisa.nc_transpose(dst=tp, data=xt[:, kk * P : (kk + 1) * P])
            nisa.tensor_scalar(dst=xw_t[:, kk, :], data=tp, op0=nl.multiply, operand0=w_cols[:, kk : kk + 1])
        for f in nl.affine_range(f_dim // NB):
            cols = nl.ds(f * NB, NB)
            if resident:
                w_blk = w_res[:, :, cols]
            else:
                w_blk = nl.ndarray((P, nd, NB), dtype=w.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=w_blk, src=w[:, cols].reshape((nd, P, NB)).permute((1, 0, 2)))
            acc = _f32((P, NB), nl.psum)
            for kk in nl.affine_range(nd):
                nisa.nc_matmul(dst=acc, stationary=xw_t[:, kk, :], moving=w_blk[:, kk, :])
            res = _f32((P, NB))
            nisa.tensor_scalar(dst=res, data=acc, op0=nl.multiply, operand0=rstd)
            nisa.dma_copy(dst=out[rows, cols], src=res)
    return out
