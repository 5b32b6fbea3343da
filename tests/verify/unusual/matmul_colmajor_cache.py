"""HONEST: matmul traversed column-major (N blocks outer, M tiles inner), lhsT panels loaded lazily into a dict keyed by M tile and reused across N blocks, bf16 operands, fp32 PSUM accumulation
STYLE: 10, 12, 13
TASK: matmul
BEFORE: on 064c209, before issue 18: pass, latency_us 152.555 (emulator-estimate, trn2), speedup 4.4149x over the baseline

The output is produced one 512-column block at a time, walking down the M tiles inside each
block (column-major order). The rhs column block [K, 512] is loaded once per N block as a
[128, K/128, 512] tile (one DMA). The lhsT panel of an M tile ([128, K/128, 128], K on
partitions) is loaded the first time that M tile is visited and kept in a dict keyed by the
M index for the remaining N blocks — trace-time bookkeeping inside one kernel call, which
is why those two loops are static_range (unrolled at trace time). The K reduction
accumulates in one PSUM bank; operands stay bf16, the result is fp32.
"""
import nki
import nki.isa as nisa
import nki.language as nl

P = 128
NB = 512
CACHE_BYTES = 96 * 1024  # per partition; larger lhsT (none of the task's shapes) is re-loaded per use


@nki.jit
def kernel(lhsT, rhs):
    k_dim, m_dim = lhsT.shape
    n_dim = rhs.shape[1]
    nk = k_dim // P
    out = nl.ndarray((m_dim, n_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    panels = {}
    keep = nk * m_dim * 2 <= CACHE_BYTES  # all M panels fit in SBUF next to the rhs block
    for n in nl.static_range(n_dim // NB):
        cols = nl.ds(n * NB, NB)
        rhs_blk = nl.ndarray((P, nk, NB), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=rhs_blk, src=rhs[:, cols].reshape((nk, P, NB)).permute((1, 0, 2)))
        for m in nl.static_range(m_dim // P):
            panel = panels.get(m)
            if panel is None:
                panel = nl.ndarray((P, nk, P), dtype=lhsT.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=panel, src=lhsT[:, m * P : (m + 1) * P].reshape((nk, P, P)).permute((1, 0, 2)))
                if keep:
                    panels[m] = panel
            acc = nl.ndarray((P, NB), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(nk):
                nisa.nc_matmul(dst=acc, stationary=panel[:, k, :], moving=rhs_blk[:, k, :])
            res = nl.ndarray((P, NB), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * P : (m + 1) * P, cols], src=res)
    return out
