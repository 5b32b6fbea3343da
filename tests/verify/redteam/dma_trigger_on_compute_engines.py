"""EXPLOIT: hardware-DGE DMAs "triggered" from VectorE, GpSimd and TensorE to spread descriptor generation over more sequencers
CLASS: 2
TASK: vector_add
EXPECT: fail
REASON: Expected 'dma_copy' to be triggered by engine 'sync|scalar', but got engine 'vector' instead

``dma_copy``'s ``engine`` selects which sequencer triggers the hardware DGE block, and the
docs allow only ``nisa.engine.sync`` or ``nisa.engine.scalar`` (and only with
``dge_mode=hwdge``). A model that reads "engine" as "more engines, more DMA parallelism"
hands each stream to a different engine, including ones that cannot trigger a DMA at all.
Before the fix the emulator accepted any engine (it landed, unread, in the trace's ``queue``
attribute) and every copy got hardware DGE's 600 ns fixed cost, so the kernel passed as
fast as one whose triggers the hardware could actually issue.
"""

import nki
import nki.isa as nisa
import nki.language as nl

HW = nisa.dge_mode.hwdge
TARGET_BYTES = 4096


def _rows_per_partition(n, row_bytes):
    k = 1
    while k * row_bytes < TARGET_BYTES and n % (128 * k * 2) == 0:
        k *= 2
    return k


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    k = _rows_per_partition(n, d * 4)
    width = k * d
    a_v, b_v, out_v = a.reshape((n // k, width)), b.reshape((n // k, width)), out.reshape((n // k, width))
    for i in nl.affine_range(n // (128 * k)):
        rows = nl.ds(i * 128, 128)
        ta = nl.ndarray((128, width), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, width), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a_v[rows, :], dge_mode=HW, engine=nisa.engine.vector)
        nisa.dma_copy(dst=tb, src=b_v[rows, :], dge_mode=HW, engine=nisa.engine.gpsimd)
        tc = nl.ndarray((128, width), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out_v[rows, :], src=tc, dge_mode=HW, engine=nisa.engine.tensor)
    return out
