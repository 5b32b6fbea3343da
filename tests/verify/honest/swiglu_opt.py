"""Optimized swiglu: resident bf16 weights, hidden activations computed transposed, one store.

x is loaded partition-major (partition p holds tokens p·T … p·T + T - 1, one contiguous
run per descriptor) and transposed once on TensorE; the tokens stay in that permuted order
through the whole block and the final partition-major store puts them back. For each
128-feature slice, gate and up products accumulate over D in PSUM with 512 tokens per
matmul; ScalarE applies SiLU straight out of PSUM and VectorE multiplies by the up product,
also read from PSUM, writing bf16 hᵀ — features on partitions, exactly the stationary
operand the down projection needs. The down projection accumulates over F in PSUM.
"""

import nki
import nki.isa as nisa
import nki.language as nl

P = 128
TILE_N = 512


def _load_rows(dst, src, n_blk):
    """``dst[:, j, :] = src[j·128 : (j+1)·128, :]``: 128-row blocks, one DMA each, so products can start on early blocks."""
    for j in nl.affine_range(n_blk):
        nisa.dma_copy(dst=dst[:, j, :], src=src[nl.ds(j * P, P), :])


@nki.jit
def kernel(x, w_gate, w_up, w_down):
    n_dim, d_dim = x.shape
    f_dim = w_gate.shape[1]
    n_t, n_d, n_f = n_dim // P, d_dim // P, f_dim // P
    tile_n = min(TILE_N, n_dim)
    out = nl.ndarray((n_dim, d_dim), dtype=nl.float32, buffer=nl.shared_hbm)

    tokens = (P, n_t, d_dim)
    x_sb = nl.ndarray(tokens, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_sb, src=x.reshape(tokens))
    wg_sb = nl.ndarray((P, n_d, f_dim), dtype=w_gate.dtype, buffer=nl.sbuf)
    _load_rows(wg_sb, w_gate, n_d)
    wu_sb = nl.ndarray((P, n_d, f_dim), dtype=w_up.dtype, buffer=nl.sbuf)
    _load_rows(wu_sb, w_up, n_d)
    wd_sb = nl.ndarray((P, n_f, d_dim), dtype=w_down.dtype, buffer=nl.sbuf)
    _load_rows(wd_sb, w_down, n_f)

    # x_t[:, d, t·128 + p] = x[p·n_t + t, d-block]: hidden dim on partitions, tokens permuted
    x_t = nl.ndarray((P, n_d, n_dim), dtype=x.dtype, buffer=nl.sbuf)
    for t in nl.affine_range(n_t):
        for d in nl.affine_range(n_d):
            t_psum = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=t_psum, data=x_sb[:, t, nl.ds(d * P, P)])
            nisa.tensor_copy(dst=x_t[:, d, nl.ds(t * P, P)], src=t_psum)

    h_t = nl.ndarray((P, n_f, n_dim), dtype=nl.bfloat16, buffer=nl.sbuf)
    for f in nl.affine_range(n_f):
        feats = nl.ds(f * P, P)
        for c in nl.affine_range((n_dim + tile_n - 1) // tile_n):
            width = min(tile_n, n_dim - c * tile_n)  # the last token block may be narrower (N % 128 == 0 only)
            cols = nl.ds(c * tile_n, width)
            gate = nl.ndarray((P, width), dtype=nl.float32, buffer=nl.psum)
            up = nl.ndarray((P, width), dtype=nl.float32, buffer=nl.psum)
            for d in nl.affine_range(n_d):
                nisa.nc_matmul(dst=gate, stationary=wg_sb[:, d, feats], moving=x_t[:, d, cols])
                nisa.nc_matmul(dst=up, stationary=wu_sb[:, d, feats], moving=x_t[:, d, cols])
            act = nl.ndarray((P, width), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.activation(dst=act, op=nl.silu, data=gate)
            nisa.tensor_tensor(dst=h_t[:, f, cols], data1=act, data2=up, op=nl.multiply)

    res = nl.ndarray(tokens, dtype=nl.float32, buffer=nl.sbuf)
    for t in nl.affine_range(n_t):
        for c in nl.affine_range(d_dim // TILE_N):
            cols = nl.ds(c * TILE_N, TILE_N)
            acc = nl.ndarray((P, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for f in nl.affine_range(n_f):
                nisa.nc_matmul(dst=acc, stationary=h_t[:, f, nl.ds(t * P, P)], moving=wd_sb[:, f, cols])
            nisa.activation(dst=res[:, t, cols], op=nl.copy, data=acc)
    nisa.dma_copy(dst=out.reshape(tokens), src=res)
    return out
