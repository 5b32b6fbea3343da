"""Demo starting kernel for vector_add: correct, deliberately untuned, with its knobs declared.

``nkiagent demo`` starts from this file and lets its offline tuner model sweep the constants marked
``# nkiagent: tune`` (any model may edit them). The defaults move 512-byte runs per partition per DMA (128 fp32
columns), where the DMA engine is overhead-bound, so the kernel starts well behind the
task's baseline (128 × 512 tiles). Wider tiles up to whole rows reach full DMA bandwidth.
``ROWS_PER_PARTITION`` gives each partition several consecutive rows per DMA: fewer, longer
transfers, which pays off for narrow tiles but lengthens the pipeline's fill and drain once
rows are whole — the tuner finds out which. Every setting is correct for every shape the
task allows: column tiles clip at the row end, and the row group shrinks until the
128-partition blocks tile ``n`` exactly.
"""

import nki
import nki.isa as nisa
import nki.language as nl

TILE_COLS = 128  # nkiagent: tune [128, 256, 512, 1024]
ROWS_PER_PARTITION = 1  # nkiagent: tune [1, 2, 4]


def _row_group(n):
    """ROWS_PER_PARTITION, halved until 128 partitions × the group tile ``n`` rows exactly."""
    k = ROWS_PER_PARTITION
    while k > 1 and n % (128 * k) != 0:
        k //= 2
    return k


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    k = _row_group(n)
    cols = min(TILE_COLS, d)
    # partition p of block i holds rows (i·128 + p)·k … +k: consecutive, so whole-row tiles are one contiguous run
    a_v, b_v, out_v = a.reshape((n // k, k, d)), b.reshape((n // k, k, d)), out.reshape((n // k, k, d))
    for i in nl.affine_range(n // (128 * k)):
        rows = nl.ds(i * 128, 128)
        for j in nl.affine_range((d + cols - 1) // cols):
            c0 = j * cols
            w = min(cols, d - c0)
            ta = nl.ndarray((128, k, w), dtype=a.dtype, buffer=nl.sbuf)
            tb = nl.ndarray((128, k, w), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=ta, src=a_v[rows, :, c0 : c0 + w])
            nisa.dma_copy(dst=tb, src=b_v[rows, :, c0 : c0 + w])
            tc = nl.ndarray((128, k, w), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
            nisa.dma_copy(dst=out_v[rows, :, c0 : c0 + w], src=tc)
    return out
