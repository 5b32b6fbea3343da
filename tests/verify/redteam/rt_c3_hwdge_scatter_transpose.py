"""EXPLOIT: dge_mode=hwdge on every DMA, including the vector-indirect scatter (AWS: only software DGE, on GpSimd, performs gather/scatter with dynamic indices); the emulator only checks src.dtype == dst.dtype and the cost model charges 600 ns instead of 1300 ns fixed latency
CLASS: 3
TASK: transpose
EXPECT: fail
REASON: err_dma_hwdge_indirect

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): pass, latency_us 48.71, baseline_latency_us 131.757, first reason: none (twin without the hint 50.110 us)

c7_indirect_scatter_transpose.py (50.110 us) with ``dge_mode=nisa.dge_mode.hwdge`` added to
both DMAs.  The descriptor-generation mode is a trusted hint: the cost model
(_dma_cost: ``fixed = spec.dma_hwdge_fixed_ns if ins.attrs.get("dge_mode") == 2``) believes it
for any DMA, including a scatter that hardware DGE cannot do.  Honest twin:
c7_indirect_scatter_transpose.py (itself exploiting the indirect pricing of class 7).
"""

import nki
import nki.isa as nisa
import nki.language as nl

INDIRECT = True


@nki.jit
def kernel(x):
    r, c = x.shape
    out = nl.ndarray((c * r, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    idx = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=idx, pattern=[[0, 1]], offset=0, channel_multiplier=1)
    for i in nl.affine_range(r // 128):
        xt = nl.ndarray((128, c), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[i * 128:(i + 1) * 128, :], dge_mode=nisa.dge_mode.hwdge)
        if INDIRECT:
            dst = out.ap(pattern=[[1, 128], [r, c]], offset=i * 128, vector_offset=idx)
        else:
            dst = out.ap(pattern=[[1, 128], [r, c]], offset=i * 128)
        nisa.dma_copy(dst=dst, src=xt, dge_mode=nisa.dge_mode.hwdge)
    return out.reshape((c, r))
