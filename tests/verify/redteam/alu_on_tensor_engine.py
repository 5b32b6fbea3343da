"""EXPLOIT: element-wise ALU work (tensor_tensor) issued on TensorE, an engine with no ALU
CLASS: 2
TASK: layernorm
EXPECT: fail
REASON: Expected 'tensor_tensor' to run on engine 'vector|gpsimd', but got engine 'tensor' instead

The honest layernorm (tests/verify/honest/layernorm_opt.py) is compute-bound: VectorE and
GpSimd share the weight multiply and bias add while TensorE sits idle. This kernel hands a
third of the multiply and half of the bias add to ``engine=nisa.engine.tensor``. TensorE
runs matmuls and transposes only; before the fix the emulator accepted the engine, computed
the sums in NumPy anyway and the cost model priced them on the idle TensorE lane at 2.4 GHz,
so the element-wise work seemed to run on a third engine in parallel for free.
"""

import nki
import nki.isa as nisa
import nki.language as nl

EPS = 1e-5
BN_STATS_DIM = 6
BN_AGGR_DIM = 2


def _broadcast_rows(vec, d):
    tile = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=vec.ap(pattern=[[0, 128], [1, d]], offset=0))
    return tile


def _mean_var(xt, d):
    fmax = nl.tile_size.bn_stats_fmax
    n_chunks = (d + fmax - 1) // fmax
    stats = nl.ndarray((128, n_chunks * BN_STATS_DIM), dtype=nl.float32, buffer=nl.sbuf)
    for c in nl.affine_range(n_chunks):
        c0 = c * fmax
        nisa.bn_stats(dst=stats[:, c * BN_STATS_DIM : (c + 1) * BN_STATS_DIM], data=xt[:, c0 : min(d, c0 + fmax)])
    mean_var = nl.ndarray((128, BN_AGGR_DIM), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_aggr(dst=mean_var, data=stats)
    return mean_var


@nki.jit
def kernel(x, weight, bias):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    w = _broadcast_rows(weight, d)
    b = _broadcast_rows(bias, d)
    third, half = d // 3, d // 2
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        xt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[rows, :])
        mean_var = _mean_var(xt, d)
        var_eps = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=var_eps, data=mean_var[:, 1:2], op0=nl.add, operand0=EPS)
        rstd = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=var_eps)
        shift = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=shift, data=mean_var[:, 0:1], op0=nl.multiply, operand0=rstd, op1=nl.multiply, operand1=-1.0)
        normed = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=normed, op=nl.copy, data=xt, scale=rstd, bias=shift)
        scaled = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=scaled[:, :third], data1=normed[:, :third], data2=w[:, :third], op=nl.multiply)
        nisa.tensor_tensor(dst=scaled[:, third : 2 * third], data1=normed[:, third : 2 * third], data2=w[:, third : 2 * third],
                           op=nl.multiply, engine=nisa.engine.gpsimd)
        nisa.tensor_tensor(dst=scaled[:, 2 * third :], data1=normed[:, 2 * third :], data2=w[:, 2 * third :], op=nl.multiply,
                           engine=nisa.engine.tensor)
        yt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=yt[:, :half], data1=scaled[:, :half], data2=b[:, :half], op=nl.add, engine=nisa.engine.gpsimd)
        nisa.tensor_tensor(dst=yt[:, half:], data1=scaled[:, half:], data2=b[:, half:], op=nl.add, engine=nisa.engine.tensor)
        nisa.dma_copy(dst=out[rows, :], src=yt)
    return out
