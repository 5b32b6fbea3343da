"""HONEST: rmsnorm with the weight broadcast to all partitions by a ones-row matmul and left parked in PSUM, read from PSUM by every row tile's fused scale
STYLE: 9, 11
TASK: rmsnorm
BEFORE: on 064c209, before issue 18: pass, latency_us 100.051 (emulator-estimate, trn2), speedup 2.3496x over the baseline

The weight row [1, D] is multiplied by a [1, 128] row of ones on TensorE (K = 1), which
writes weight to all 128 partitions of a [128, D] PSUM tile, 512 columns (one bank) per
matmul. That tile is never copied out: each row tile's single VectorE pass
scalar_tensor_tensor((x · rstd) · weight) takes weight straight from PSUM. The sum of squares
comes from ScalarE's activation(square) with its free row reduction, rstd from rsqrt.
(Rows wider than 2048 — none of the task's shapes — fall back to an SBUF broadcast.)
"""
from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl

P = 128
BANK = 512
EPS = 1e-6
PSUM_PARK_MAX = 2048  # columns of fp32 weight parked in PSUM (4 of its 8 banks); wider rows use SBUF


def _broadcast_weight_psum(weight, d: int):
    """[P, d] fp32 PSUM tile whose every partition holds weight."""
    w_row = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_row, src=weight.reshape((1, d)))
    ones = nl.ndarray((1, P), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    w_psum = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.psum)
    for c in nl.affine_range(d // BANK):
        cols = nl.ds(c * BANK, BANK)
        nisa.nc_matmul(dst=w_psum[:, cols], stationary=ones, moving=w_row[:, cols])
    return w_psum


def _broadcast_weight_sbuf(weight, d: int):
    """Fallback for rows too wide for PSUM: a stride-0 broadcast DMA into SBUF."""
    w_sb = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_sb, src=weight.ap(pattern=[[0, P], [1, d]], offset=0))
    return w_sb


@nki.jit
def kernel(x, weight):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    w_b = _broadcast_weight_psum(weight, d) if d <= PSUM_PARK_MAX else _broadcast_weight_sbuf(weight, d)
    for i in nl.affine_range(n // P):
        rows = nl.ds(i * P, P)
        xt = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[rows, :])
        sq = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        ss = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=sq, op=nl.square, data=xt, reduce_op=nl.add, reduce_res=ss)
        ms = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=ms, data=ss, op0=nl.multiply, operand0=1.0 / d, op1=nl.add, operand1=EPS)
        rstd = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=ms)
        yt = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=yt, data=xt, op0=nl.multiply, operand0=rstd, op1=nl.multiply, operand1=w_b)
        nisa.dma_copy(dst=out[rows, :], src=yt)
    return out
