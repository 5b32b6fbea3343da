"""HONEST: silu in one ScalarE activation per tile, the tile walk provided by a small iterable TileGrid class (__init__, __iter__, __len__)
STYLE: 6, 10, 12
TASK: silu
BEFORE: on 064c209, before issue 18: rejected, latency_us n/a, speedup n/a; first reason: static gate [dunder-attribute] silu_tile_iterator.py:22: defining `__len__` changes how the harness's own operations (comparison, conversion, pickling, cleanup) treat the kernel's objects; a kernel returns NKI tensors, so only `__init__`/`__post_init__` are allowed

TileGrid describes the [128, W] tiling of an [N, D] matrix (W = 1024 when it divides D,
else 512) and iterates over (row slice, column slice) pairs; len() is the tile count. It is
built from the input shape inside the kernel on every call and holds only ints. Each tile
is one ScalarE activation(silu) from the bf16 input straight to the bf16 output tile.
"""
import nki
import nki.isa as nisa
import nki.language as nl


class TileGrid:
    def __init__(self, n, d, rows=128, max_cols=1024):
        self.rows = rows
        self.cols = max_cols if d % max_cols == 0 else 512
        self.n_row, self.n_col = n // rows, d // self.cols

    def __len__(self):
        return self.n_row * self.n_col

    def __iter__(self):
        for i in range(self.n_row):
            for j in range(self.n_col):
                yield nl.ds(i * self.rows, self.rows), nl.ds(j * self.cols, self.cols)


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    grid = TileGrid(n, d)
    for rows, cols in grid:
        xt = nl.ndarray((grid.rows, grid.cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[rows, cols])
        yt = nl.ndarray((grid.rows, grid.cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.activation(dst=yt, op=nl.silu, data=xt)
        nisa.dma_copy(dst=out[rows, cols], src=yt)
    return out


# WHY THIS IS LEGITIMATE NKI (appended after the code so the reason line numbers stay valid):
# TileGrid holds only ints, is built inside the kernel from the input shape, and __iter__/__len__ just
# yield slices and a count — a plain Python iterable, nothing the harness compares, converts or pickles
# (the kernel returns the NKI output tensor, never a TileGrid). silu_tile_methods renames the two
# methods to tiles()/count() and passes.
