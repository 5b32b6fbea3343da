"""Baseline for gelu: the tanh formula written out op by op on 128 × 512 fp32 tiles.

inner = x·(1 + 0.044715·x²); t = tanh(√(2/π)·inner) on ScalarE; out = 0.5·x·(1 + t).
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl

TILE_F = 512  #: columns per tile  # nkiagent: tune [128, 256, 512]
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        for j in nl.affine_range(d // TILE_F):
            rows, cols = nl.ds(i * 128, 128), nl.ds(j * TILE_F, TILE_F)
            xt = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt, src=x[rows, cols])
            sq = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=sq, data1=xt, data2=xt, op=nl.multiply)
            poly = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=poly, data=sq, op0=nl.multiply, operand0=0.044715, op1=nl.add, operand1=1.0)
            inner = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=inner, data1=poly, data2=xt, op=nl.multiply)
            th = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=th, op=nl.tanh, data=inner, scale=SQRT_2_OVER_PI)
            half = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=half, data=th, op0=nl.add, operand0=1.0, op1=nl.multiply, operand1=0.5)
            yt = nl.ndarray((128, TILE_F), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=yt, data1=half, data2=xt, op=nl.multiply)
            nisa.dma_copy(dst=out[rows, cols], src=yt)
    return out
