"""Baseline for rmsnorm_matmul: fp32 throughout, weights re-read for every row tile.

Per 128-row tile: x·weight on VectorE, and for each 128-column block a TensorE transpose
(fp32) followed by fp32 matmuls against w tiles that are loaded and widened to fp32 inside
the loop — four times TensorE's bf16 cost and the whole of w read from HBM once per row
tile. The whole result row accumulates in PSUM (F ≤ 4096) and leaves it multiplied by the
row's 1/rms, computed with separate square (ScalarE), sum, scale and power passes.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(x, weight, w):
    n_dim, d_dim = x.shape
    f_dim = w.shape[1]
    out = nl.ndarray((n_dim, f_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    weight_sb = nl.ndarray((128, d_dim), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=weight_sb, src=weight.reshape((1, d_dim)).broadcast(0, 128))
    for i in nl.affine_range(n_dim // 128):
        rows = nl.ds(i * 128, 128)
        xt = nl.ndarray((128, d_dim), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[rows, :])
        x_sq = nl.ndarray((128, d_dim), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=x_sq, op=nl.square, data=xt)
        sum_sq = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=sum_sq, op=nl.add, data=x_sq, axis=1, keepdims=True)
        rstd = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=rstd, data=sum_sq, op0=nl.multiply, operand0=1.0 / d_dim, op1=nl.add, operand1=1e-6)
        nisa.tensor_scalar(dst=rstd, data=rstd, op0=nl.power, operand0=-0.5)
        xw = nl.ndarray((128, d_dim), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=xw, data1=xt, data2=weight_sb, op=nl.multiply)

        acc = nl.ndarray((128, f_dim), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(d_dim // 128):
            xw_t_psum = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=xw_t_psum, data=xw[:, k * 128 : (k + 1) * 128])
            xw_t = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=xw_t, src=xw_t_psum)
            for f in nl.affine_range(f_dim // 512):
                w_bf = nl.ndarray((128, 512), dtype=w.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=w_bf, src=w[k * 128 : (k + 1) * 128, f * 512 : (f + 1) * 512])
                w_f32 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=w_f32, src=w_bf)
                nisa.nc_matmul(dst=acc[:, f * 512 : (f + 1) * 512], stationary=xw_t, moving=w_f32)
        res = nl.ndarray((128, f_dim), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=res, data=acc, op0=nl.multiply, operand0=rstd)
        nisa.dma_copy(dst=out[rows, :], src=res)
    return out
