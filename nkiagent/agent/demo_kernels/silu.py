"""Search starting kernel for silu: row groups × column tiles, the sigmoid fused or not, its intermediate in fp32 or bf16.

``TILE_F`` columns per tile (clipped at the row end), ``ROWS_PER_PARTITION`` consecutive rows
per partition per DMA (halved until 128-partition blocks tile ``n``), ``FUSED`` computes
x·sigmoid(x) in one ScalarE ``silu`` instead of a sigmoid plus a VectorE multiply, and
``MID_BF16`` keeps the unfused sigmoid in bf16 (within the task's bf16 tolerance).
"""

import nki
import nki.isa as nisa
import nki.language as nl

TILE_F = 256  # nkiagent: tune [128, 256, 512, 1024, 2048]
ROWS_PER_PARTITION = 1  # nkiagent: tune [1, 2, 4]
FUSED = False  # nkiagent: tune
MID_BF16 = False  # nkiagent: tune


def _row_group(n):
    k = ROWS_PER_PARTITION
    while k > 1 and n % (128 * k) != 0:
        k //= 2
    return k


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    k = _row_group(n)
    cols = min(TILE_F, d)
    x_v, out_v = x.reshape((n // k, k, d)), out.reshape((n // k, k, d))
    for i in nl.affine_range(n // (128 * k)):
        rows = nl.ds(i * 128, 128)
        for j in nl.affine_range((d + cols - 1) // cols):
            c0 = j * cols
            w = min(cols, d - c0)
            xt = nl.ndarray((128, k, w), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt, src=x_v[rows, :, c0 : c0 + w])
            yt = nl.ndarray((128, k, w), dtype=x.dtype, buffer=nl.sbuf)
            if FUSED:
                nisa.activation(dst=yt, op=nl.silu, data=xt)
            else:
                sig = nl.ndarray((128, k, w), dtype=nl.bfloat16 if MID_BF16 else nl.float32, buffer=nl.sbuf)
                nisa.activation(dst=sig, op=nl.sigmoid, data=xt)
                nisa.tensor_tensor(dst=yt, data1=xt, data2=sig, op=nl.multiply)
            nisa.dma_copy(dst=out_v[rows, :, c0 : c0 + w], src=yt)
    return out
