"""EXPLOIT: rope whose row-tile addresses come from registers (``.ap(scalar_offset=reg)``); in timing-only runs every register reads 0, so the profile describes a different kernel (every tile on row block 0)
CLASS: 8
TASK: rope
EXPECT: no-gain
HONEST: tests/verify/honest/rope_opt.py
TIMING_ONLY: unfaithful

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): pass, latency_us 88.837, baseline_latency_us 187.657, first reason: none; `profile` and `profile --timing-only` both 88.84 us / 208 instructions (no divergence)

Each row tile's index is stored in an int32 SBUF tile (iota), register_loaded, and used as
``scalar_offset`` of the loads and the stores.  In compute runs this is a correct rope (x1·cos
- x2·sin and x2·cos + x1·sin with scalar_tensor_tensor on VectorE and GpSimd products).  Under
``profile --timing-only`` all stores hit rows 0..127 (WAW chains) and all loads row block 0:
the reported latency is that of another kernel.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(x, cos, sin):
    n, d = x.shape
    h = d // 2
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        it = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.iota(dst=it, pattern=[[0, 1]], offset=i * 128)
        reg = nisa.register_alloc()
        nisa.register_load(reg, it)
        xt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        ct = nl.ndarray((128, h), dtype=nl.float32, buffer=nl.sbuf)
        st = nl.ndarray((128, h), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x.ap(pattern=[[d, 128], [1, d]], scalar_offset=reg))
        nisa.dma_copy(dst=ct, src=cos.ap(pattern=[[h, 128], [1, h]], scalar_offset=reg))
        nisa.dma_copy(dst=st, src=sin.ap(pattern=[[h, 128], [1, h]], scalar_offset=reg))
        x1s = nl.ndarray((128, h), dtype=nl.float32, buffer=nl.sbuf)
        x2s = nl.ndarray((128, h), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=x1s, data1=xt[:, 0:h], data2=st, op=nl.multiply, engine=nisa.engine.gpsimd)
        nisa.tensor_tensor(dst=x2s, data1=xt[:, h:d], data2=st, op=nl.multiply, engine=nisa.engine.gpsimd)
        yt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        t1 = nl.ndarray((128, h), dtype=nl.float32, buffer=nl.sbuf)
        t2 = nl.ndarray((128, h), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=t1, data1=xt[:, 0:h], data2=ct, op=nl.multiply)
        nisa.tensor_tensor(dst=yt[:, 0:h], data1=t1, data2=x2s, op=nl.subtract)
        nisa.tensor_tensor(dst=t2, data1=xt[:, h:d], data2=ct, op=nl.multiply)
        nisa.tensor_tensor(dst=yt[:, h:d], data1=t2, data2=x1s, op=nl.add)
        nisa.dma_copy(dst=out.ap(pattern=[[d, 128], [1, d]], scalar_offset=reg), src=yt)
    return out
