"""Baseline for bmm: per batch and 128-row tile, transpose a's blocks on TensorE, then one
[128, 512] output tile at a time with the b tiles re-loaded inside the K loop."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
    n_batch, m_dim, k_dim = a.shape
    n_dim = b.shape[2]
    n_k = k_dim // 128
    out = nl.ndarray((n_batch, m_dim, n_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    for bi in nl.affine_range(n_batch):
        for m in nl.affine_range(m_dim // 128):
            rows = nl.ds(m * 128, 128)
            a_tile = nl.ndarray((128, k_dim), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_tile, src=a[bi, rows, :])
            a_t = nl.ndarray((128, n_k, 128), dtype=a.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(n_k):
                t_psum = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.psum)
                nisa.nc_transpose(dst=t_psum, data=a_tile[:, k * 128 : (k + 1) * 128])
                nisa.tensor_copy(dst=a_t[:, k, :], src=t_psum)
            for n in nl.affine_range(n_dim // 512):
                acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
                for k in nl.affine_range(n_k):
                    b_tile = nl.ndarray((128, 512), dtype=b.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=b_tile, src=b[bi, k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
                    nisa.nc_matmul(dst=acc, stationary=a_t[:, k, :], moving=b_tile)
                res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=res, src=acc)
                nisa.dma_copy(dst=out[bi, rows, n * 512 : (n + 1) * 512], src=res)
    return out
