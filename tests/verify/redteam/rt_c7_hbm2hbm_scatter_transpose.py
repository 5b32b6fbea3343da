"""EXPLOIT: transpose as one HBM->HBM vector-indirect scatter per 128-row band (x rows straight into the flat output): the copy both reads and writes HBM but its transfer time is charged once (nbytes = max(src, dst)), and the scatter is priced as contiguous
CLASS: 7
TASK: transpose
EXPECT: no-gain
HONEST: tests/verify/honest/transpose_opt.py

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): rejected, latency_us 43.595, baseline_latency_us None, first reason: "integrity: latency estimate 43.595 µs is below the task's speed of light 46.346 µs on trn2"

Like c7_indirect_scatter_transpose.py but without the SBUF hop: ``dma_copy(dst=out.ap(...,
vector_offset=idx), src=x[rows, :])``.  _dma_cost uses ``nbytes = max(a.nbytes for a in
sides)`` and, with no on-chip side, ``rows = nbytes / chunk`` → 16 queues, so 8 MiB in + 8
MiB out are billed as 8 MiB of queue time: about half of what the HBM traffic needs.  The
verifier's speed-of-light floor (46.346 us from 16 MiB of HBM traffic) is what catches it.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(x):
    r, c = x.shape
    out = nl.ndarray((c * r, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    idx = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=idx, pattern=[[0, 1]], offset=0, channel_multiplier=1)
    for i in nl.affine_range(r // 128):
        nisa.dma_copy(dst=out.ap(pattern=[[1, 128], [r, c]], offset=i * 128, vector_offset=idx), src=x[i * 128:(i + 1) * 128, :])
    return out.reshape((c, r))
