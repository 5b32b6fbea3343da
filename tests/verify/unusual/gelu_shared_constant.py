"""HONEST: gelu (tanh form) as x·sigmoid(x·(c1 + c2·x²)) with the coefficients in an nl.shared_constant table, typed helpers
STYLE: 5, 8, 11
TASK: gelu
BEFORE: on 064c209, before issue 18: rejected, latency_us n/a, speedup n/a; first reason: static gate [host-compute] gelu_shared_constant.py:31: `numpy.tile` inside a function builds or reads host arrays; a kernel's data lives in tiles: use nl.ndarray, NKI loads, ops and stores

0.5·x·(1 + tanh(u)) = x·sigmoid(2u) with u = √(2/π)·(x + 0.044715·x³), so
gelu(x) = x·sigmoid(x·(c1 + c2·x²)), c1 = 2√(2/π), c2 = 2√(2/π)·0.044715.
The two coefficients are a [128, 2] fp32 constant table placed in HBM with
nl.shared_constant and loaded once; its columns are the per-partition operands of a
tensor_scalar. ScalarE squares x and takes the sigmoid, VectorE forms the polynomial and
the final product, GpSimd multiplies the polynomial by x. fp32 intermediates, bf16 out.
"""
from __future__ import annotations

import math

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl

P = 128
TILE_F = 512
C1 = 2.0 * math.sqrt(2.0 / math.pi)
C2 = C1 * 0.044715


def _coefficient_table() -> np.ndarray:
    """[P, 2] fp32: column 0 is c1, column 1 is c2, the same on every partition."""
    return np.tile(np.array([[C1, C2]], dtype=np.float32), (P, 1))


def _f32(shape: tuple[int, int]):
    return nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)


def _gelu_tile(xt, coef, out_dtype) -> object:
    shape = tuple(xt.shape)
    sq = _f32(shape)
    nisa.activation(dst=sq, op=nl.square, data=xt)
    poly = _f32(shape)
    nisa.tensor_scalar(dst=poly, data=sq, op0=nl.multiply, operand0=coef[:, 1:2], op1=nl.add, operand1=coef[:, 0:1])
    z = _f32(shape)
    nisa.tensor_tensor(dst=z, data1=poly, data2=xt, op=nl.multiply, engine=nisa.engine.gpsimd)
    sig = _f32(shape)
    nisa.activation(dst=sig, op=nl.sigmoid, data=z)
    yt = nl.ndarray(shape, dtype=out_dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=yt, data1=sig, data2=xt, op=nl.multiply)
    return yt


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    table = nl.shared_constant(_coefficient_table(), dtype=nl.float32)
    coef = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=coef, src=table)
    for i in nl.affine_range(n // P):
        for j in nl.affine_range(d // TILE_F):
            rows, cols = nl.ds(i * P, P), nl.ds(j * TILE_F, TILE_F)
            xt = nl.ndarray((P, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt, src=x[rows, cols])
            nisa.dma_copy(dst=out[rows, cols], src=_gelu_tile(xt, coef, x.dtype))
    return out


# WHY THIS IS LEGITIMATE NKI (appended after the code so the reason line numbers stay valid):
# nl.shared_constant's documented argument is a trace-time NumPy array (or an nki.tensor constant);
# the table here depends only on two module-level float constants, never on kernel inputs, and NumPy
# is used only to build that compile-time constant. gelu_shared_constant_module builds the identical
# array at module level instead of in a helper and passes, so the rule rejects where, not what.
