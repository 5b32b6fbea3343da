"""HONEST: cumsum traversed column-block-major: the outer nl.sequential_range walks 512-column blocks, the inner loop all row tiles, with every row tile's running carry kept in one [128, N/128] SBUF accumulator
STYLE: 4, 13
TASK: cumsum
BEFORE: on 064c209, before issue 18: pass, latency_us 38.359 (emulator-estimate, trn2), speedup 1.0025x over the baseline

Instead of finishing one row band before the next, the kernel sweeps the matrix column
block by column block. Row tile i's carry (the prefix sum up to the current block) lives in
column i of a single [128, N/128] fp32 tile, zeroed once. Each [128, 512] block is a VectorE
tensor_tensor_scan r[k] = 1·r[k−1] + x[k] that starts from that carry; its last column then
becomes the new carry. The scan is sequential fp32, exactly like the baseline's.
"""
import nki
import nki.isa as nisa
import nki.language as nl

P = 128
TILE_F = 512


@nki.jit
def kernel(x):
    n, d = x.shape
    nr = n // P
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    ones = nl.ndarray((P, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    carries = nl.ndarray((P, nr), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=carries, value=0.0)
    for j in nl.sequential_range(d // TILE_F):
        cols = nl.ds(j * TILE_F, TILE_F)
        for i in nl.affine_range(nr):
            rows = nl.ds(i * P, P)
            xt = nl.ndarray((P, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt, src=x[rows, cols])
            yt = nl.ndarray((P, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor_scan(dst=yt, data0=ones, data1=xt, initial=carries[:, i : i + 1], op0=nl.multiply, op1=nl.add)
            nisa.tensor_copy(dst=carries[:, i : i + 1], src=yt[:, TILE_F - 1 : TILE_F])
            nisa.dma_copy(dst=out[rows, cols], src=yt)
    return out
