"""Optimized vector_add: whole rows per DMA, several rows per partition, one add per tile.

The baseline's 128 × 512 fp32 tiles move 2 KiB per partition per DMA, where the DMA engine
runs at ~70% of its bandwidth; here each partition receives ``k`` consecutive rows (the HBM
view ``[N/k, k·D]`` keeps them contiguous), so every DMA moves runs of ≥ 4 KiB at full
bandwidth with k× fewer fixed DMA costs. Addition is element-wise, so which rows
share a partition does not matter.
"""

import nki
import nki.isa as nisa
import nki.language as nl

#: bytes per partition per DMA to aim for: runs of ≥ 4 KiB saturate the DMA engine, and larger
#: tiles only lengthen the pipeline's fill and drain
TARGET_BYTES = 4096


def _rows_per_partition(n, row_bytes):
    """Smallest power-of-two row group reaching TARGET_BYTES per partition, as far as 128-partition tiles of ``n`` rows allow."""
    k = 1
    while k * row_bytes < TARGET_BYTES and n % (128 * k * 2) == 0:
        k *= 2
    return k


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    k = _rows_per_partition(n, d * 4)  # fp32 rows
    width = k * d
    a_v, b_v, out_v = a.reshape((n // k, width)), b.reshape((n // k, width)), out.reshape((n // k, width))
    for i in nl.affine_range(n // (128 * k)):
        rows = nl.ds(i * 128, 128)
        ta = nl.ndarray((128, width), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, width), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a_v[rows, :])
        nisa.dma_copy(dst=tb, src=b_v[rows, :])
        tc = nl.ndarray((128, width), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out_v[rows, :], src=tc)
    return out
