"""RMSNorm, fp32, trn2 (DMA-bound: 16 MiB in + 16 MiB out), at ~98% of its DMA bound; written by a model in a second
model-in-the-loop trial (2026-12-02). DMA is 99% busy, so the tail after the last compute is queued stores, not a ramp a
smaller tile would shorten: no advice may send it to split them.

- weight: one [1, d] load, broadcast to 128 partitions on TensorE (K=1 matmul with ones) -> no 1 MiB re-read.
- rows: 2 consecutive rows per partition per DMA (2 MiB DMAs: fewer DMAs, less per-DMA overhead),
  the last two 128-row blocks 1 row per partition so the pipeline drains quickly.
- per row: ScalarE squares + row-sums in one activation, ScalarE rsqrt(sum/d + eps) -> [P,1] scale;
  output columns split: first half VectorE scalar_tensor_tensor (x*scale*w), second half ScalarE
  activation (x*scale) + GpSimd tensor_tensor (*w), so every engine stays well under the DMA time.
"""

import nki
import nki.isa as nisa
import nki.language as nl

EPS = 1e-6


@nki.jit
def kernel(x, weight):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    w_row = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_row, src=weight.reshape((1, d)), dge_mode=nisa.dge_mode.hwdge)
    ones = nl.ndarray((1, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    w = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
    for c in range(d // 512):
        cols = nl.ds(c * 512, 512)
        ps = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=ones, moving=w_row[:, cols])
        nisa.tensor_copy(dst=w[:, cols], src=ps)
    eps_t = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=eps_t, value=EPS)

    blocks = n // 128
    k_big = 2 if d <= 4096 else 1
    sched = []
    b = 0
    while b < blocks:
        k = k_big if blocks - b >= 2 * k_big + 2 else 1
        sched.append((b * 128, k))
        b += k
    h = d // 2  # column split between the VectorE path and the ScalarE+GpSimd path
    lo, hi = nl.ds(0, h), nl.ds(h, d - h)

    for r0, k in sched:
        x_v = x[r0:r0 + 128 * k, :].reshape((128, k, d))
        o_v = out[r0:r0 + 128 * k, :].reshape((128, k, d))
        xt = nl.ndarray((128, k, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x_v, dge_mode=nisa.dge_mode.hwdge)
        yt = nl.ndarray((128, k, d), dtype=nl.float32, buffer=nl.sbuf)
        for r in range(k):
            row = xt[:, r, :]
            sum_sq = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation_reduce(dst=yt[:, r, :], op=nl.square, data=row, reduce_op=nl.add, reduce_res=sum_sq)
            scale = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=scale, op=nl.rsqrt, data=sum_sq, scale=1.0 / d, bias=eps_t)
            nisa.scalar_tensor_tensor(dst=yt[:, r, lo], data=xt[:, r, lo], op0=nl.multiply, operand0=scale,
                                      op1=nl.multiply, operand1=w[:, lo])
            normed = nl.ndarray((128, d - h), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=normed, op=nl.copy, data=xt[:, r, hi], scale=scale)
            nisa.tensor_tensor(dst=yt[:, r, hi], data1=normed, data2=w[:, hi], op=nl.multiply,
                               engine=nisa.gpsimd_engine)
        nisa.dma_copy(dst=o_v, src=yt, dge_mode=nisa.dge_mode.hwdge)
    return out
