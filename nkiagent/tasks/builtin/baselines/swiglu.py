"""Baseline for swiglu: per 128-token tile and 128-feature slice, gate and up columns loaded
with narrow strided DMAs, the gated activations kept in fp32, and an fp32 down projection
against w_down rows re-loaded and widened for every token tile."""

import nki
import nki.isa as nisa
import nki.language as nl


def _column_product(w, x_t, f, n_d):
    """PSUM ``[128 features, 128 tokens]`` = ``w[:, f-slice]ᵀ · xᵀ`` with w's columns loaded per call."""
    w_cols = nl.ndarray((128, n_d, 128), dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_cols, src=w[:, f * 128 : (f + 1) * 128].reshape((n_d, 128, 128)).permute((1, 0, 2)))
    acc = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    for d in nl.affine_range(n_d):
        nisa.nc_matmul(dst=acc, stationary=w_cols[:, d, :], moving=x_t[:, d, :])
    return acc


@nki.jit
def kernel(x, w_gate, w_up, w_down):
    n_dim, d_dim = x.shape
    f_dim = w_gate.shape[1]
    n_d = d_dim // 128
    out = nl.ndarray((n_dim, d_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(n_dim // 128):
        rows = nl.ds(i * 128, 128)
        x_tile = nl.ndarray((128, d_dim), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_tile, src=x[rows, :])
        x_t = nl.ndarray((128, n_d, 128), dtype=x.dtype, buffer=nl.sbuf)
        for d in nl.affine_range(n_d):
            t_psum = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=t_psum, data=x_tile[:, d * 128 : (d + 1) * 128])
            nisa.tensor_copy(dst=x_t[:, d, :], src=t_psum)
        out_psum = nl.ndarray((128, d_dim), dtype=nl.float32, buffer=nl.psum)
        for f in nl.affine_range(f_dim // 128):
            act = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=act, op=nl.silu, data=_column_product(w_gate, x_t, f, n_d))
            h_t = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=h_t, data1=act, data2=_column_product(w_up, x_t, f, n_d), op=nl.multiply)
            wd_bf = nl.ndarray((128, d_dim), dtype=w_down.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=wd_bf, src=w_down[f * 128 : (f + 1) * 128, :])
            wd = nl.ndarray((128, d_dim), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=wd, src=wd_bf)
            for c in nl.affine_range(d_dim // 512):
                nisa.nc_matmul(dst=out_psum[:, c * 512 : (c + 1) * 512], stationary=h_t, moving=wd[:, c * 512 : (c + 1) * 512])
        res = nl.ndarray((128, d_dim), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=out_psum)
        nisa.dma_copy(dst=out[rows, :], src=res)
    return out
