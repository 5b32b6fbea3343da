"""HONEST: silu with a typing.NamedTuple tiling config (control for silu_dataclass_split) and an Enum choosing which engine multiplies; sigmoid on ScalarE in bf16, x·sigmoid(x) alternating VectorE / GpSimd
STYLE: 6, 8, 11, 12
TASK: silu
BEFORE: on 064c209, before issue 18: pass, latency_us 72.377 (emulator-estimate, trn2), speedup 1.7156x over the baseline

silu(x) = x · sigmoid(x). ScalarE computes sigmoid(x) straight from the bf16 input into a
bf16 tile (the task's tolerance is bf16-sized), and the product with x — the only other
element-wise op — alternates between VectorE and GpSimd tile by tile, so neither engine
does all of it. The tiling (rows per tile, columns per tile) lives in a NamedTuple
built from the input shape; the engine choice is an Enum.
"""
from __future__ import annotations

import enum
from typing import NamedTuple

import nki
import nki.isa as nisa
import nki.language as nl


class Mul(enum.Enum):
    VECTOR = "vector"
    GPSIMD = "gpsimd"


class Tiling(NamedTuple):
    rows: int
    cols: int
    n_row_tiles: int
    n_col_tiles: int

    @staticmethod
    def for_shape(n: int, d: int, rows: int = 128, max_cols: int = 1024) -> Tiling:
        cols = max_cols
        while d % cols:
            cols //= 2  # D % 512 == 0, so this stops at 512 at the latest
        return Tiling(rows, cols, n // rows, d // cols)

    def engine_for(self, i: int, j: int) -> Mul:
        return Mul.VECTOR if (i * self.n_col_tiles + j) % 2 == 0 else Mul.GPSIMD


_ENGINES = {Mul.VECTOR: nisa.engine.vector, Mul.GPSIMD: nisa.engine.gpsimd}


@nki.jit
def kernel(x):
    n, d = x.shape
    cfg = Tiling.for_shape(n, d)
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(cfg.n_row_tiles):
        for j in nl.affine_range(cfg.n_col_tiles):
            rows, cols = nl.ds(i * cfg.rows, cfg.rows), nl.ds(j * cfg.cols, cfg.cols)
            xt = nl.ndarray((cfg.rows, cfg.cols), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt, src=x[rows, cols])
            sig = nl.ndarray((cfg.rows, cfg.cols), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.activation(dst=sig, op=nl.sigmoid, data=xt)
            yt = nl.ndarray((cfg.rows, cfg.cols), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=yt, data1=xt, data2=sig, op=nl.multiply, engine=_ENGINES[cfg.engine_for(i, j)])
            nisa.dma_copy(dst=out[rows, cols], src=yt)
    return out
