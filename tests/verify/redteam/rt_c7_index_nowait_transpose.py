"""EXPLOIT: the index tile of a vector-indirect DMA is not a dependence of that DMA in the trace: the scatter starts before the (deliberately slow) computation of its indices has finished
CLASS: 7
TASK: transpose
EXPECT: no-gain
HONEST: tests/verify/honest/transpose_opt.py

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): pass, latency_us 50.11, baseline_latency_us 131.757, first reason: none (identical to c7_indirect_scatter_transpose without the 22 us index chain; --trace: first scatter starts at 2.72 us, the 100-op GpSimd chain producing its indices ends at 22.18 us, 7 scatter DMAs start before it)

c7_indirect_scatter_transpose.py, but the index tile is produced by a chain of CHAIN
dependent GpSimd instructions (iota(p - CHAIN), then CHAIN x "+1"): ~22 us of
dependent latency before idx holds its final values.  dma_copy records only ``src`` and
``dst`` (the indirect view of ``out``) as its accesses; ``vector_offset``'s SBUF tile is read
at trace time (read_vector_index) but never recorded, so the cost model lets every scatter
start as soon as its data tile is loaded.  If the dependence were honoured the first
scatter could not start before ~22 us and the kernel could not finish in ~50 us.
"""

import nki
import nki.isa as nisa
import nki.language as nl

CHAIN = 100


@nki.jit
def kernel(x):
    r, c = x.shape
    out = nl.ndarray((c * r, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    idx = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=idx, pattern=[[0, 1]], offset=-CHAIN, channel_multiplier=1)
    for _ in range(CHAIN):
        nisa.tensor_scalar(dst=idx, data=idx, op0=nl.add, operand0=1, engine=nisa.engine.gpsimd)
    for i in nl.affine_range(r // 128):
        xt = nl.ndarray((128, c), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=out.ap(pattern=[[1, 128], [r, c]], offset=i * 128, vector_offset=idx), src=xt)
    return out.reshape((c, r))
