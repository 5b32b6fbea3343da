"""Legacy-style (NKI 0.1) kernels, one or more per construct of the 0.1 API, matched against NumPy.

Every kernel here is written for this test suite in the style of the public 0.1 tutorials:
``nl.arange``/``nl.mgrid`` index grids, ``mask=`` predicates, ISA calls that return their
result, ``psum += ...`` accumulation, block dimensions, ``nl.loop_reduce``, SPMD grids with
``nl.nc``, NumPy ufuncs as ops. ``tests/conftest.py`` installed the emulator, so
``import neuronxcc.nki`` resolves to it.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np
import pytest
from neuronxcc import nki
from neuronxcc.nki.language import par_dim

from nkiagent import emu

BF16 = np.dtype(ml_dtypes.bfloat16)


def _randn(*shape: int, seed: int = 0, dtype: Any = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# --------------------------------------------------------------------------------------------
# Index grids, masks, SPMD
# --------------------------------------------------------------------------------------------
@nki.jit
def tensor_add(a, b):
    """``a + b`` over a 2-D SPMD grid of [128, 512] tiles; ragged edge tiles are masked."""
    c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows, cols = a.shape
    ix = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    iy = nl.program_id(1) * 512 + nl.arange(512)[None, :]
    inside = (ix < rows) & (iy < cols)
    a_tile = nl.load(a[ix, iy], mask=inside)
    b_tile = nl.load(b[ix, iy], mask=inside)
    c_tile = a_tile + b_tile  # computed only where its masked operands hold values
    nl.store(c[ix, iy], value=c_tile, mask=inside)
    return c


def test_tensor_add_spmd_with_masks() -> None:
    a, b = _randn(300, 700), _randn(300, 700, seed=1)
    out = nki.simulate_kernel(tensor_add[3, 2], a, b)
    np.testing.assert_array_equal(out, a + b)


@nki.jit
def spmd_copy(a):
    """Each instance of a 2-D grid doubles one ``[1, 1]`` element; ``program_ndim`` must be 2."""
    b = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    assert nl.program_ndim() == 2 and nl.num_programs() == a.shape[0] * a.shape[1]
    i, j = nl.program_id(0), nl.program_id(1)
    nl.store(b[i, j], value=nl.load(a[i, j]) * 2.0)
    return b


@pytest.mark.parametrize("grid", ["plain", "nc_sugar", "spmd_dim", "nc_first"])
def test_spmd_grids_with_neuron_core_dims(grid: str) -> None:
    src = np.random.default_rng(0).random((4, 2, 1, 1)).astype(np.float32)
    kernel = {
        "plain": spmd_copy[4, 2],
        "nc_sugar": spmd_copy[nl.nc(2) * 2, 2],
        "spmd_dim": spmd_copy[nl.spmd_dim(nl.nc(2), 2), 2],
        "nc_first": spmd_copy[2 * nl.nc(2), 2],
    }[grid]
    np.testing.assert_array_equal(kernel(src), 2 * src)


@nki.jit
def rmsnorm(a_tensor, g_tensor):
    """RMSNorm over rows, 128 rows per iteration, the last block masked (the 0.1 tutorial's shape)."""
    out_tensor = nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    ix = nl.arange(128)[:, None]
    iw = nl.arange(1)[:, None]
    iy = nl.arange(a_tensor.shape[1])[None, :]
    num_rows = a_tensor.shape[0]
    g_tile = nl.load(g_tensor.reshape((1, g_tensor.shape[0]))[iw, iy])
    for i in nl.affine_range((num_rows + 127) // 128):
        a_tile = nl.load(a_tensor[i * 128 + ix, iy], mask=(i * 128 + ix < num_rows))
        square_sum = nl.sum(nl.square(a_tile), axis=[1])
        mean = square_sum / a_tensor.shape[1]
        rms_reciprocal = nl.rsqrt(mean)
        out_tile = nl.multiply(a_tile, rms_reciprocal)
        g_bcast = g_tile.broadcast_to((128, g_tensor.shape[0]))
        out_tile[...] = nl.multiply(out_tile, g_bcast, mask=(i * 128 + ix < num_rows))
        nl.store(out_tensor[i * 128 + ix, iy], value=out_tile, mask=(i * 128 + ix < num_rows))
    return out_tensor


def test_rmsnorm_with_row_masks_and_broadcast_to() -> None:
    a, g = _randn(300, 256), _randn(256, seed=1)
    out = nki.simulate_kernel(rmsnorm, a, g)
    ref = a / np.sqrt(np.mean(a.astype(np.float64) ** 2, axis=1, keepdims=True)) * g
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@nki.jit
def softmax(a):
    """Row softmax with keepdims reductions, masked rows and tile operators."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows, cols = a.shape
    ix = nl.arange(128)[:, None]
    iy = nl.arange(cols)[None, :]
    for i in nl.affine_range((rows + 127) // 128):
        inside = i * 128 + ix < rows
        a_tile = nl.load(a[i * 128 + ix, iy], mask=inside)
        max_vals = nl.max(a_tile, axis=[1], keepdims=True, mask=inside)
        shifted = nl.subtract(a_tile, max_vals, mask=inside)
        exps = nl.exp(shifted, mask=inside)
        total = nl.sum(exps, axis=[1], keepdims=True, mask=inside)
        nl.store(out[i * 128 + ix, iy], value=exps * nl.reciprocal(total, mask=inside), mask=inside)
    return out


def test_softmax_with_masked_reductions() -> None:
    a = _randn(200, 96)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    np.testing.assert_allclose(nki.simulate_kernel(softmax, a), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


@nki.jit
def layernorm(x, eps):
    """LayerNorm with bn_stats over 512-wide chunks (the last one masked) and bn_aggr; ``eps`` is a float64 ``(1,)`` array."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows, cols = x.shape
    fmax = nl.tile_size.bn_stats_fmax
    chunks = (cols + fmax - 1) // fmax
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(cols)[None, :]
    i_bn = nl.arange(fmax)[None, :]
    i_stat = nl.arange(6)[None, :]
    for i in nl.affine_range(rows // 128):
        tile = nl.load(x[i * 128 + i_p, i_f])
        stats = nl.ndarray((128, 6 * chunks), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(chunks):
            stats[i_p, j * 6 + i_stat] = nisa.bn_stats(tile[i_p, j * fmax + i_bn], mask=(j * fmax + i_bn < cols), dtype=nl.float32)
        mv = nisa.bn_aggr(stats)
        mean = mv[i_p, 0]
        rstd = nl.rsqrt(nl.add(mv[i_p, 1], eps))
        shifted = nisa.tensor_scalar(tile, np.subtract, mean, op1=np.multiply, operand1=rstd)
        nl.store(out[i * 128 + i_p, i_f], value=shifted)
    return out


def test_layernorm_bn_stats_with_free_dim_masks_and_float64_epsilon() -> None:
    x = _randn(256, 1100)
    eps = np.array([1e-5])  # float64, as NKIBench passes it
    out = nki.simulate_kernel(layernorm, x, eps)
    x64 = x.astype(np.float64)
    ref = (x64 - x64.mean(axis=1, keepdims=True)) / np.sqrt(x64.var(axis=1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@nki.jit
def average_pool(in_tensor, pool):
    """2-D average pooling with a 5-D ``nl.mgrid`` and a sum over axes [2, 4] (the 0.1 tutorial's indexing)."""
    c, h, w = in_tensor.shape
    out = nl.ndarray((c, h // pool, w // pool), dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    i0, i1, i2, i3, i4 = nl.mgrid[0:c, 0:h // pool, 0:pool, 0:w // pool, 0:pool]
    in_tile = nl.load(in_tensor[i0, pool * i1 + i2, pool * i3 + i4])
    out_tile = nl.sum(in_tile, axis=[2, 4]) / (pool * pool)
    nl.store(out, value=out_tile)
    return out


def test_average_pool_with_five_dim_mgrid() -> None:
    x = _randn(64, 16, 24)
    ref = x.reshape(64, 8, 2, 12, 2).mean(axis=(2, 4))
    np.testing.assert_allclose(nki.simulate_kernel(average_pool, x, 2), ref, rtol=1e-6, atol=1e-6)


@nki.jit
def ds_slices(a):
    """``nl.ds`` with loop-dependent starts, in loads and stores."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 64):
        t = nl.load(a[nl.ds(i * 64, 64), :])
        nl.store(out[nl.ds(i * 64, 64), :], value=nl.negative(t))
    return out


def test_ds_dynamic_slices() -> None:
    a = _randn(256, 32)
    np.testing.assert_array_equal(nki.simulate_kernel(ds_slices, a), -a)


# --------------------------------------------------------------------------------------------
# Matmul: psum += ..., block dims, operand masks
# --------------------------------------------------------------------------------------------
@nki.jit
def matmul_nl(lhsT, rhs):
    """The tutorial's tiled matmul: ``res_psum += nl.matmul(..., transpose_x=True)`` onto ``nl.zeros`` PSUM."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            res_psum = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                lhsT_tile = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                lhsT_tile[...] = nl.load(lhsT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                rhs_tile[...] = nl.load(rhs[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                res_psum += nl.matmul(lhsT_tile[...], rhs_tile[...], transpose_x=True)
            res_sb = nl.copy(res_psum, dtype=result.dtype)
            nl.store(result[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], value=res_sb)
    return result


@nki.jit
def matmul_blocks(lhsT, rhs):
    """Block dims: K tiles of both operands loaded into ``(KT, par_dim(128), F)`` tensors, ``psum[...] += nisa.nc_matmul``."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    KT = K // 128
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    i_lhsT = nl.mgrid[0:128, 0:128]
    i_rhs = nl.mgrid[0:128, 0:512]
    for m in nl.affine_range(M // 128):
        lhsT_tiles = nl.ndarray((KT, par_dim(128), 128), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(KT):
            lhsT_tiles[k, i_lhsT.p, i_lhsT.x] = nl.load(lhsT[k * 128 + i_lhsT.p, m * 128 + i_lhsT.x])
        for n in nl.affine_range(N // 512):
            rhs_tiles = nl.ndarray((KT, par_dim(128), 512), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(KT):
                rhs_tiles[k, i_rhs.p, i_rhs.x] = nl.load(rhs[k * 128 + i_rhs.p, n * 512 + i_rhs.x])
            res_psum = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(KT):
                res_psum[...] += nisa.nc_matmul(lhsT_tiles[k, i_lhsT.p, i_lhsT.x], rhs_tiles[k, i_rhs.p, i_rhs.x])
            res_sb = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            res_sb[...] = nisa.tensor_copy(res_psum)
            nl.store(result[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], value=res_sb)
    return result


@nki.jit
def matmul_untransposed(x, y):
    """``nl.matmul(x, y)`` without ``transpose_x``: ``x`` is ``[M, K]`` and the emulator transposes it on TensorE."""
    out = nl.ndarray((x.shape[0], y.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.matmul(nl.load(x), nl.load(y))
    nl.store(out, value=nl.copy(res))
    return out


@pytest.mark.parametrize("kernel", [matmul_nl, matmul_blocks])
@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_tiled_matmuls_accumulate_in_psum(kernel: Any, dtype: Any) -> None:
    lhsT, rhs = _randn(384, 256, dtype=dtype), _randn(384, 1024, seed=1, dtype=dtype)
    ref = lhsT.astype(np.float64).T @ rhs.astype(np.float64)
    np.testing.assert_allclose(kernel(lhsT, rhs), ref, rtol=1e-4, atol=1e-3)


def test_matmul_without_transpose_x() -> None:
    x, y = _randn(64, 128), _randn(128, 256, seed=1)
    np.testing.assert_allclose(matmul_untransposed(x, y), x.astype(np.float64) @ y, rtol=1e-5, atol=1e-4)


@nki.jit
def attention_nl(q, k, v):
    """Single-tile attention with language ops only: ``nl.transpose``'s PSUM result feeds ``nl.matmul`` directly."""
    d, n = q.shape
    out = nl.ndarray((n, d), dtype=q.dtype, buffer=nl.shared_hbm)
    qk = nl.matmul(x=nl.load(q), y=nl.load(k), transpose_x=True)
    e = nl.exp(nl.subtract(qk, nl.max(qk, axis=1)))
    scores = nl.divide(e, nl.sum(e, axis=1))
    v_t = nl.transpose(nl.load(v))  # in PSUM: the compiler stages it through SBUF for the matmul
    nl.store(out, value=nl.matmul(scores, v_t, transpose_x=False))
    return out


def test_language_matmul_takes_psum_operands() -> None:
    q, k, v = (_randn(128, 128, seed=s) for s in range(3))
    qk = q.T.astype(np.float64) @ k
    e = np.exp(qk - qk.max(axis=1, keepdims=True))
    trace = emu.Trace()
    out = emu.run_kernel(attention_nl, (q, k, v), trace=trace, api="0.1").outputs
    np.testing.assert_allclose(out, (e / e.sum(axis=1, keepdims=True)) @ v.T, rtol=1e-4, atol=1e-5)
    assert trace.counts()["nc_matmul"] == 2


@nki.jit
def matmul_operand_masks(lhsT, rhs, k_valid, m_valid, n_valid):
    """A [128, 128]ᵀ·[128, 512] matmul restricted by operand masks on K, M and N; the rest of the result stays 0."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    i_k, i_m = nl.mgrid[0:128, 0:128]
    j_k, j_n = nl.mgrid[0:128, 0:512]
    a = nl.load(lhsT[i_k, i_m])
    b = nl.load(rhs[j_k, j_n])
    res = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    res[...] += nisa.nc_matmul(a[i_k, i_m], b[j_k, j_n], mask=(i_k < k_valid) & (i_m < m_valid) & (j_n < n_valid))
    nl.store(out, value=nl.copy(res))
    return out


def test_matmul_operand_masks_restrict_k_m_and_n() -> None:
    lhsT, rhs = _randn(128, 128), _randn(128, 512, seed=1)
    out = nki.simulate_kernel(matmul_operand_masks, lhsT, rhs, 96, 100, 300)
    ref = np.zeros((128, 512))
    ref[:100, :300] = lhsT[:96, :100].astype(np.float64).T @ rhs[:96, :300]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)


# --------------------------------------------------------------------------------------------
# ISA calls returning results, NumPy ufuncs as ops, operators, casts
# --------------------------------------------------------------------------------------------
@nki.jit
def mamba_step(delta, u, a, b):
    """A fused-Mamba-style scan: ``exp(delta·A)`` via activation with a per-partition scale, an associative scan
    with NumPy ufuncs, and ``+=`` accumulation into a block-dim SBUF tensor across an affine state loop."""
    channels, seq = delta.shape
    states = a.shape[1]
    out = nl.ndarray((channels, seq), dtype=delta.dtype, buffer=nl.shared_hbm)
    tiles = channels // 128
    acc = nl.zeros((tiles, par_dim(128), seq), dtype=nl.float32)
    for s in nl.affine_range(states):
        for t in nl.affine_range(tiles):
            delta_i = nl.load(delta[t * 128:(t + 1) * 128, 0:seq])
            a_i = nl.load(a[t * 128:(t + 1) * 128, s])
            delta_a = nisa.activation(op=nl.exp, data=delta_i, scale=a_i)
            u_i = nl.load(u[t * 128:(t + 1) * 128, 0:seq])
            b_i = nl.load(b[s:s + 1, 0:seq]).broadcast_to((128, seq))
            delta_bu = nisa.tensor_tensor(nisa.tensor_tensor(delta_i, u_i, op=nl.multiply), b_i, op=np.multiply)
            scan = nisa.tensor_tensor_scan(delta_a, delta_bu, initial=0, op0=np.multiply, op1=np.add)
            acc[t, 0:128, 0:seq] += scan
    for t in nl.affine_range(tiles):
        nl.store(out[t * 128:(t + 1) * 128, 0:seq], value=acc[t])
    return out


def test_mamba_style_scan_with_block_accumulation() -> None:
    delta = np.abs(_randn(256, 64)) * 0.1
    u, a, b = _randn(256, 64, seed=1), -np.abs(_randn(256, 4, seed=2)), _randn(4, 64, seed=3)
    ref = np.zeros((256, 64))
    for s in range(4):
        da = np.exp(delta * a[:, s:s + 1])
        dbu = delta * u * b[s]
        h = np.zeros(256)
        for j in range(64):
            h = da[:, j] * h + dbu[:, j]
            ref[:, j] += h
    np.testing.assert_allclose(nki.simulate_kernel(mamba_step, delta, u, a, b), ref, rtol=1e-4, atol=1e-4)


@nki.jit
def ufunc_ops(x):
    """NumPy ufuncs (``np.add``, ``np.max``, ``np.multiply``, ``np.subtract``) passed as ``op=`` of 0.1 ISA calls."""
    out = nl.ndarray((128, 3), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    row_max = nisa.tensor_reduce(np.max, t, axis=(1,))
    row_sum = nisa.tensor_reduce(np.add, t, axis=[1], negate=True)
    scaled = nisa.tensor_scalar(t, np.multiply, 2.0, op1=np.subtract, operand1=1.0)
    res = nl.ndarray((128, 3), dtype=nl.float32, buffer=nl.sbuf)
    res[:, 0:1] = row_max
    res[:, 1:2] = row_sum
    res[:, 2:3] = nisa.tensor_reduce(np.add, scaled, axis=1)
    nl.store(out, value=res)
    return out


def test_numpy_ufuncs_as_ops() -> None:
    x = _randn(128, 40)
    ref = np.stack([x.max(1), -x.sum(1), (2 * x - 1).sum(1)], axis=1)
    np.testing.assert_allclose(nki.simulate_kernel(ufunc_ops, x), ref, rtol=1e-5, atol=1e-5)


@nki.jit
def operators_and_casts(a, b):
    """Tile operators and ``x[...] = y`` with a dtype cast into a bf16 tile."""
    out = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    z = (x + y) * 2.0 - x / (nl.abs(y) + 1.0)
    z = -z + (x > y)  # a comparison gives a bool tile; arithmetic promotes it
    low = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    low[...] = z
    nl.store(out, value=low)
    return out


def test_tile_operators_and_assignment_casts() -> None:
    a, b = _randn(128, 64), _randn(128, 64, seed=1)
    z = (a + b) * 2.0 - a / (np.abs(b) + 1.0)
    ref = (-z + (a > b)).astype(BF16)
    out = nki.simulate_kernel(operators_and_casts, a, b)
    assert out.dtype == BF16
    np.testing.assert_allclose(out.astype(np.float32), ref.astype(np.float32), rtol=1e-2, atol=1e-2)


@nki.jit
def causal_select(x):
    """``nisa.affine_select`` with an affine predicate of two aranges, and ``nisa.iota`` of an affine expression."""
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(128)[None, :]
    tile = nl.load(x)
    masked = nisa.affine_select(pred=(i_p >= i_f), on_true_tile=tile, on_false_value=-9984.0, dtype=nl.float32)
    index = nisa.iota(i_p * 128 + i_f, dtype=nl.float32)
    nl.store(out, value=masked + index)
    return out


def test_affine_select_and_iota() -> None:
    x = _randn(128, 128)
    ii, jj = np.mgrid[0:128, 0:128]
    ref = np.where(ii >= jj, x, -9984.0) + ii * 128 + jj
    np.testing.assert_allclose(nki.simulate_kernel(causal_select, x), ref, rtol=1e-6, atol=1e-3)


@nki.jit
def transpose2d(x):
    """Transposes: ``nl.transpose`` (TensorE, via PSUM), ``nisa.nc_transpose`` on VectorE, ``nisa.dma_transpose``."""
    out = nl.ndarray((3, 128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out[0], value=nl.copy(nl.transpose(t)))
    small = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        for j in nl.affine_range(4):
            small[i * 32:(i + 1) * 32, j * 32:(j + 1) * 32] = nisa.nc_transpose(t[j * 32:(j + 1) * 32, i * 32:(i + 1) * 32],
                                                                                 engine=nisa.vector_engine)
    nl.store(out[1], value=small)
    nl.store(out[2], value=nisa.dma_transpose(x))
    return out


def test_transposes_on_three_engines() -> None:
    x = _randn(128, 128)
    out = nki.simulate_kernel(transpose2d, x)
    for k in range(3):
        np.testing.assert_array_equal(out[k], x.T)


# --------------------------------------------------------------------------------------------
# Loops
# --------------------------------------------------------------------------------------------
@nki.jit
def loop_reductions(x):
    """``nl.loop_reduce`` into a subscripted target (initialized by its first iteration) and into a rebound name."""
    out = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    running_max = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)  # uninitialized: the first iteration fills it
    for i in nl.affine_range(x.shape[0]):
        running_max[...] = nl.loop_reduce(nl.load(x[i]), op=np.max, loop_indices=[i])
    total = nl.zeros((128, 64), dtype=nl.float32)
    for i in nl.affine_range(x.shape[0]):
        total = nl.loop_reduce(nl.load(x[i]), op=np.add, loop_indices=[i])
    nl.store(out[0], value=running_max)
    nl.store(out[1], value=total)
    return out


def test_loop_reduce_both_forms() -> None:
    x = _randn(5, 128, 64)
    out = nki.simulate_kernel(loop_reductions, x)
    np.testing.assert_array_equal(out[0], x.max(axis=0))
    np.testing.assert_allclose(out[1], x.sum(axis=0), rtol=1e-5, atol=1e-5)


@nki.jit
def loop_kinds(x):
    """A running sum in a ``sequential_range``, ``static_range`` and a plain Python ``range`` (all ordered)."""
    out = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 32), dtype=nl.float32)
    for i in nl.sequential_range(2):
        acc[...] = nl.add(acc, nl.load(x[i]))
    for i in nl.static_range(2, 4):
        acc[...] = acc + nl.load(x[i])
    for i in range(4, x.shape[0]):
        acc[...] = acc + nl.load(x[i])
    nl.store(out, value=acc)
    return out


def test_sequential_static_and_python_loops() -> None:
    x = _randn(6, 128, 32)
    np.testing.assert_allclose(nki.simulate_kernel(loop_kinds, x), x.sum(axis=0), rtol=1e-5, atol=1e-5)


@nki.jit
def printing(x):
    """``nl.device_print`` prints a tile's values during simulation."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.device_print("tile=", t)
    nl.store(out, value=t)
    return out


def test_device_print(capsys: pytest.CaptureFixture[str]) -> None:
    nki.simulate_kernel(printing, np.full((2, 3), 7.0, dtype=np.float32))
    assert "tile= [[7. 7. 7.]" in capsys.readouterr().out


@nki.jit
def mutable_update(x: nt.mutable_tensor):
    """A mutable parameter updated in place and returned."""
    nl.store(x, value=nl.load(x) + 1.0)
    return x


def test_mutable_parameter_updates_the_caller_array() -> None:
    x = _randn(128, 8)
    before = x.copy()
    out = nki.simulate_kernel(mutable_update, x)
    np.testing.assert_array_equal(out, before + 1)
    np.testing.assert_array_equal(x, before + 1)  # inputs are updated in place, as the legacy simulator did


def test_shape_placeholders_run_timing_only() -> None:
    out = nki.simulate_kernel(matmul_nl, nt.tensor[[256, 128], nl.bfloat16], nt.tensor[[256, 512], nl.bfloat16])
    assert out == emu.ShapeSpec((128, 512), "float32")


@nki.jit
def masked_isa_ops(x):
    """ISA calls with ``mask=`` write only their sub-rectangle of the target; the rest keeps its values."""
    out = nl.ndarray((6, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    t = nl.load(x)
    m = (i_p < 96) & (i_f >= 8)
    results = [
        nisa.activation(op=np.exp, data=t, mask=m),
        nisa.tensor_scalar(t, np.multiply, 3.0, op1=np.add, operand1=1.0, mask=m),
        nisa.tensor_tensor(t, t, op=np.multiply, mask=m),
        nisa.tensor_copy(t, mask=m, dtype=nl.float32),
        nisa.memset((128, 64), 5.0, nl.float32, mask=m),
        nisa.iota(i_p * 64 + i_f, dtype=nl.float32, mask=m),
    ]
    for k in nl.static_range(6):
        dst = nl.zeros((128, 64), dtype=nl.float32)
        dst[i_p, i_f] = results[k]
        nl.store(out[k], value=dst)
    return out


def test_masked_isa_calls_update_only_their_rectangle() -> None:
    x = _randn(128, 64)
    out = nki.simulate_kernel(masked_isa_ops, x)
    ii, jj = np.mgrid[0:128, 0:64]
    values = [np.exp(x), 3 * x + 1, x * x, x, np.full_like(x, 5.0), (ii * 64 + jj).astype(np.float32)]
    inside = (ii < 96) & (jj >= 8)
    for k, v in enumerate(values):
        np.testing.assert_allclose(out[k], np.where(inside, v, 0.0), rtol=1e-6, atol=1e-6)


@nki.jit
def non_affine_gather(a):
    """A non-affine index (``i_f // 2``) reads through explicit element addresses."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:a.shape[0], 0:a.shape[1]]
    nl.store(out, value=nl.load(a[i_p, i_f // 2]))
    return out


def test_non_affine_index_expressions_gather() -> None:
    a = _randn(128, 64)
    np.testing.assert_array_equal(nki.simulate_kernel(non_affine_gather, a), a[:, np.arange(64) // 2])


@nki.jit
def ragged_row_sums(x, masked: bool):
    """Row sums of ``[N, H, W]`` in 128-row tiles; the last tile's slices reach past ``N`` and the mask cuts them off."""
    n, h, w = x.shape
    out = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    tiles = nl.ndarray(((n + 127) // 128, par_dim(128), h, w), dtype=x.dtype, buffer=nl.sbuf)
    for t in nl.affine_range((n + 127) // 128):
        i_p = t * 128 + nl.arange(128)[:, None, None]
        nisa.dma_copy(src=x[t * 128:(t + 1) * 128, 0:h, 0:w], dst=tiles[t], mask=(i_p < n) if masked else None)
        sums = nl.sum(tiles[t], axis=[-2, -1], mask=(i_p < n))
        nl.store(out[t * 128:(t + 1) * 128, 0:1], value=sums, mask=(t * 128 + nl.arange(128)[:, None] < n))
    return out


def test_slices_past_the_tensor_are_bounded_by_the_mask() -> None:
    x = _randn(288, 3, 4)
    np.testing.assert_allclose(ragged_row_sums(x, True)[:, 0], x.sum(axis=(1, 2)), rtol=1e-5, atol=1e-5)
    with pytest.raises(emu.NkiOutOfBoundsError) as info:
        ragged_row_sums(x, False)
    assert info.value.code == "err_tensor_access_out_of_bound"
    assert "index range [256, 383] exceed dimension size of 288" in info.value.message


@nki.jit(mode="trace")
def _row_sums_into(dst, src, n_tiles):
    """Sub-kernel writing block ``i`` of the block tensor it was given (``dst[i, :, 0]``)."""
    for i in nl.affine_range(n_tiles):
        dst[i, :, 0] = nisa.tensor_reduce(np.add, data=nl.load(src[nl.ds(i * 128, 128), :]), axis=(1,))


@nki.jit
def per_head_row_sums(x):
    """``sums[h]`` of a ``(H, T, par_dim(128), 1)`` tensor is the ``(T, par_dim(128), 1)`` block tensor of head ``h``."""
    heads, n, _ = x.shape
    out = nl.ndarray((heads, n, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    sums = nl.ndarray((heads, n // 128, par_dim(128), 1), dtype=nl.float32)
    for h in nl.affine_range(heads):
        _row_sums_into(sums[h], x[h], n // 128)
    for h in nl.affine_range(heads):
        for i in nl.affine_range(n // 128):
            nl.store(out[h, nl.ds(i * 128, 128), :], value=sums[h, i])
    return out


def test_partial_block_index_is_a_sub_block_tensor() -> None:
    x = _randn(2, 256, 64)
    np.testing.assert_allclose(per_head_row_sums(x), x.sum(axis=2, keepdims=True), rtol=1e-5, atol=1e-5)


@nki.jit
def causal_scores(q, k):
    """``nisa.affine_select`` straight from the matmul's PSUM tile (flash attention's causal mask)."""
    n = q.shape[1]
    out = nl.ndarray((n, n), dtype=nl.float32, buffer=nl.shared_hbm)
    qk = nisa.nc_matmul(nl.load(q), nl.load(k))
    iq, ik = nl.mgrid[0:n, 0:n]
    nl.store(out, value=nisa.affine_select(pred=(iq >= ik), on_true_tile=qk, on_false_value=-9984.0, dtype=nl.float32))
    return out


def test_affine_select_reads_a_psum_tile() -> None:
    q, k = _randn(64, 128), _randn(64, 128, seed=1)
    trace = emu.Trace()
    out = emu.run_kernel(causal_scores, (q, k), trace=trace, api="0.1").outputs
    np.testing.assert_allclose(out, np.where(np.tri(128, dtype=bool), q.T.astype(np.float64) @ k, -9984.0), rtol=1e-5, atol=1e-4)
    assert [(i.op, i.engine) for i in trace if i.op in ("tensor_copy", "affine_select")] == [("tensor_copy", "vector"), ("affine_select", "gpsimd")]


@nki.jit
def gram_of_transposed(x):
    """``nisa.nc_matmul`` fed ``nisa.nc_transpose``'s PSUM result directly (flash attention bwd's ``trans_dy``)."""
    n = x.shape[0]
    out = nl.ndarray((n, n), dtype=nl.float32, buffer=nl.shared_hbm)
    x_t = nisa.nc_transpose(nl.load(x))  # [d, n] in PSUM
    acc = nl.zeros((n, n), dtype=nl.float32, buffer=nl.psum)
    acc += nisa.nc_matmul(x_t, x_t)  # contraction over the d partitions: x · xᵀ
    nl.store(out, value=nl.copy(acc))
    return out


def test_nc_matmul_takes_psum_operands() -> None:
    x = _randn(64, 128)
    trace = emu.Trace()
    out = emu.run_kernel(gram_of_transposed, (x,), trace=trace, api="0.1").outputs
    np.testing.assert_allclose(out, x.astype(np.float64) @ x.T, rtol=1e-5, atol=1e-3)
    ops = [(i.op, i.engine) for i in trace]
    staged = ops.index(("tensor_copy", "vector"))
    assert ops[staged + 1:].count(("nc_matmul", "tensor")) == 1 and staged < ops.index(("nc_matmul", "tensor"))


@nki.jit
def max_pool_windows(x):
    """2x2/stride-2 max pooling through a 4-D ``nl.mgrid`` window (``.p``, ``.x``, ``.y``, ``.z``), as select_and_scatter does."""
    p, h, w = x.shape
    out = nl.ndarray((p, h // 2, w // 2), dtype=x.dtype, buffer=nl.shared_hbm)
    src = nl.load(x)
    for r in nl.affine_range(h // 2):
        win = nl.mgrid[0:p, 0:w // 2, 0:2, 0:2]
        sw = nl.copy(src[win.p, 2 * r + win.y, 2 * win.x + win.z])
        nl.store(out[:, r, :], value=nl.max(sw, axis=[2, 3]))
    return out


def test_four_dim_mgrid_windows() -> None:
    x = _randn(16, 8, 6)
    np.testing.assert_array_equal(max_pool_windows(x), x.reshape(16, 4, 2, 3, 2).max(axis=(2, 4)))


@nki.jit
def gather_rows(table, rows):
    """``table[idx_tile, i_f]`` with an SBUF tile of row indices (a DMA gather); the ragged last tile is masked."""
    n = rows.shape[0]
    out = nl.ndarray((n, table.shape[1]), dtype=table.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(table.shape[1])[None, :]
    for t in nl.affine_range((n + 127) // 128):
        valid = t * 128 + i_p < n
        idx = nl.load(rows[t * 128 + i_p, 0], mask=valid)
        got = nl.load(table[idx, i_f], mask=valid)
        nl.store(out[t * 128 + i_p, i_f], value=got, mask=valid)
    return out


def test_gather_with_an_index_tile() -> None:
    table = _randn(50, 16)
    rows = np.random.default_rng(2).integers(0, 50, size=(200, 1)).astype(np.int32)
    np.testing.assert_array_equal(gather_rows(table, rows), table[rows[:, 0]])
    rows[7, 0] = 50  # an unmasked row past the table
    with pytest.raises(emu.NkiOutOfBoundsError) as info:
        gather_rows(table, rows)
    assert info.value.message.endswith("on dimension 0: index range [1, 50] exceed dimension size of 50")


@nki.jit
def window_argmax_mask(x):
    """``nl.equal`` of a ``[P, W, 1, 1]`` window maximum with the ``[P, W, 2, 2]`` windows: free dims broadcast as in NumPy."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    win = nl.load(x)
    best = nl.max(win, axis=[2, 3], keepdims=True)
    nl.store(out, value=nl.equal(win, best, dtype=nl.float32))
    return out


def test_binary_ops_broadcast_size_one_free_dims() -> None:
    x = _randn(16, 5, 2, 2)
    np.testing.assert_array_equal(window_argmax_mask(x), (x == x.max(axis=(2, 3), keepdims=True)).astype(np.float32))


@nki.jit
def row_and_column_of(n_cols):
    """``iota / width`` of int32 positions is a true division (float), so ``nl.floor`` gives the row, as in NumPy."""
    out = nl.ndarray((128, 2), dtype=nl.int32, buffer=nl.shared_hbm)
    pos = nisa.iota(nl.arange(128)[:, None] + 2100, dtype=nl.int32)
    row = nl.floor(pos / n_cols, dtype=nl.int32)
    col = nl.mod(pos, n_cols, dtype=nl.int32)
    nl.store(out[:, 0:1], value=row)
    nl.store(out[:, 1:2], value=col)
    return out


def test_integer_tiles_divide_truly() -> None:
    pos = np.arange(2100, 2228)
    np.testing.assert_array_equal(row_and_column_of(38), np.stack([pos // 38, pos % 38], axis=1))


@nki.jit
def double_row_matmul(lhsT, rhs):
    """FP8 double-row matmul: ``[K, 2, M]`` x ``[K, 2, N]`` contracts over K and the row pair (nki-samples' quantized matmul)."""
    k2, m = lhsT.shape
    n = rhs.shape[1]
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    i_k, i_t, i_m = nl.mgrid[0:k2 // 2, 0:2, 0:m]
    j_k, j_t, j_n = nl.mgrid[0:k2 // 2, 0:2, 0:n]
    res = nl.zeros((m, n), dtype=nl.float32, buffer=nl.psum)
    res[...] += nisa.nc_matmul(nl.load(lhsT[i_t * (k2 // 2) + i_k, i_m]), nl.load(rhs[j_t * (k2 // 2) + j_k, j_n]), perf_mode="double_row_gen3")
    nl.store(out, value=nl.copy(res))
    return out


def test_double_row_matmul_contracts_both_rows() -> None:
    rng = np.random.default_rng(0)
    lhsT = rng.integers(-4, 5, size=(256, 128)).astype(nl.float8_e4m3)
    rhs = rng.integers(-4, 5, size=(256, 512)).astype(nl.float8_e4m3)
    trace = emu.Trace()
    out = emu.run_kernel(double_row_matmul, (lhsT, rhs), trace=trace, api="0.1").outputs
    np.testing.assert_array_equal(out, lhsT.astype(np.float32).T @ rhs.astype(np.float32))
    assert sum(i.op == "nc_matmul" for i in trace) >= 2


@nki.jit
def scale_rows(x, scale, column_first: bool):
    """``nisa.tensor_tensor`` of a ``[P, F]`` tile with a ``[P, 1]`` column, in either operand position."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t, s = nl.load(x), nl.load(scale)
    res = nisa.tensor_tensor(s, t, np.subtract) if column_first else nisa.tensor_tensor(t, s, np.subtract)
    nl.store(out, value=res)
    return out


@pytest.mark.parametrize("column_first", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_tensor_tensor_broadcasts_a_column(column_first: bool, dtype: Any) -> None:
    x, scale = _randn(128, 64, dtype=dtype), _randn(128, 1, seed=1, dtype=dtype)
    x64, s64 = x.astype(np.float64), scale.astype(np.float64)
    want = (s64 - x64) if column_first else (x64 - s64)
    np.testing.assert_allclose(scale_rows(x, scale, column_first), want, rtol=1e-2 if dtype is BF16 else 1e-6, atol=1e-6)
