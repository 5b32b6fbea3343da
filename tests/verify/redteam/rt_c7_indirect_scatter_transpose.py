"""EXPLOIT: transpose by one contiguous load + one vector-indirect scatter store per 128-row band; the scatter writes 4-byte elements R floats apart but is priced as a contiguous 4·C-byte run per partition
CLASS: 7
TASK: transpose
EXPECT: no-gain
HONEST: tests/verify/honest/transpose_opt.py

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): pass, latency_us 50.11, baseline_latency_us 131.757, first reason: none (honest twin with the same DMAs described as strided: 3674.536 us; an honest TensorE transpose, honest_c7_tensore_transpose.py: 50.974 us)

The output is allocated flat, (C·R, 1), and returned as ``out.reshape((C, R))`` (the
emulator hands the whole storage back, so the verifier sees a [C, R] array).  With a flat
base, ``.ap(pattern=[[1, 128], [R, C]], offset=i*128, vector_offset=idx)`` addresses
``i*128 + idx[p] + j*R`` — with idx = iota(p) that is exactly out[j, i*128 + p], i.e. the
transposed position of x[i*128 + p, j].  So each row band is one DMA in (4·C bytes per
partition, contiguous) and one indirect DMA out.  On the DMA side the store really is a
4-byte scatter with stride R·4 bytes, the worst case for descriptors; but
``cost.contiguous_run_bytes`` returns ``itemsize * shape[-1]`` for ANY indirect access
(``if a.indirect or not a.strides``), so it is priced as 4·C-byte chunks at full DMA
efficiency.  No TensorE, no VectorE.  Honest twin: honest_c7_strided_transpose.py, the same
two DMAs with the store written as the plain strided access pattern it really is (no
vector_offset), which the cost model prices with 4-byte chunks.
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
        nisa.dma_copy(dst=xt, src=x[i * 128:(i + 1) * 128, :])
        if INDIRECT:
            dst = out.ap(pattern=[[1, 128], [r, c]], offset=i * 128, vector_offset=idx)
        else:
            dst = out.ap(pattern=[[1, 128], [r, c]], offset=i * 128)
        nisa.dma_copy(dst=dst, src=xt)
    return out.reshape((c, r))
