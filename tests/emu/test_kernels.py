"""Whole kernels in the public NKI 0.3+ style run through the emulator and match NumPy.

Each kernel family in ``tests/emu/kernels/`` is checked two ways: through ``nki.simulate``
(what a user calls) against a float64 NumPy reference, and through ``emu.run_kernel`` on
every target with a trace, checking that the instruction stream has the shape the kernel's
structure implies (how many DMAs, matmuls of which K/M/N, which engines). The trace checks
are what catch an emulator that gets the numbers right by doing the wrong thing.
Shapes are modest so the whole file runs in seconds; big shapes live in the benchmark.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import ml_dtypes
import nki  # the emulator: tests/conftest.py installed it
import numpy as np
import pytest

from nkiagent import emu
from tests.emu.kernels import attention, layernorm, matmul, rmsnorm, softmax, spmd, transpose, vector_add

BF16 = np.dtype(ml_dtypes.bfloat16)
TARGETS = ("trn1", "trn2", "trn3")
P = 128  # partitions per tile, the same on every target


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _randn(shape: tuple[int, ...], dtype: Any = np.float32, seed: int = 0) -> np.ndarray:
    return _rng(seed).standard_normal(shape).astype(dtype)


def _f64(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64)


def _tol(dtype: Any) -> dict[str, float]:
    """Tolerances for a result stored in ``dtype`` and computed in fp32 on the engines.

    fp32 results differ from a float64 reference only by fp32 rounding and summation order;
    bf16 results carry the 8-bit mantissa's 2^-9 relative rounding (plus that of bf16 inputs).
    """
    return {"rtol": 1e-2, "atol": 1e-2} if np.dtype(dtype) == BF16 else {"rtol": 1e-5, "atol": 1e-5}


def _traced(kernel: Any, args: tuple[Any, ...], target: str, kwargs: dict[str, Any] | None = None) -> tuple[Any, emu.Trace]:
    trace = emu.Trace()
    result = emu.run_kernel(kernel, args, kwargs, target=target, trace=trace)
    assert trace.target == target
    assert result.instructions == len(trace)
    return result.outputs, trace


def _ops(trace: emu.Trace, op: str) -> list[emu.Instruction]:
    return [ins for ins in trace.instructions if ins.op == op]


def _dma_loads(trace: emu.Trace) -> list[emu.Instruction]:
    """DMAs that bring data from HBM into SBUF."""
    return [ins for ins in _ops(trace, "dma_copy") if ins.reads[0].memory in ("hbm", "shared_hbm") and ins.writes[0].memory == "sbuf"]


def _dma_stores(trace: emu.Trace) -> list[emu.Instruction]:
    return [ins for ins in _ops(trace, "dma_copy") if ins.writes[0].memory == "shared_hbm"]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ---------------------------------------------------------------------------------------------
# 1. tiled vector add
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(512, 256), (300, 700)], ids=["whole-tiles", "ragged"])
@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["f32", "bf16"])
def test_vector_add_matches_numpy(shape: tuple[int, int], dtype: Any) -> None:
    a, b = _randn(shape, dtype, 1), _randn(shape, dtype, 2)
    got = nki.simulate(vector_add.vector_add)(a, b)
    assert got.dtype == np.dtype(dtype) and got.shape == shape
    # VectorE adds in fp32 and rounds once to the output dtype: bit-exact against NumPy doing the same.
    np.testing.assert_array_equal(got, (a.astype(np.float32) + b.astype(np.float32)).astype(dtype))


@pytest.mark.parametrize("target", TARGETS)
def test_vector_add_trace(target: str) -> None:
    rows, cols = 300, 700
    a, b = _randn((rows, cols), seed=1), _randn((rows, cols), seed=2)
    out, trace = _traced(vector_add.vector_add, (a, b), target)
    np.testing.assert_array_equal(out, a + b)
    tiles = _cdiv(rows, P) * _cdiv(cols, vector_add.FREE_TILE)
    assert trace.counts() == {"dma_copy": 3 * tiles, "tensor_tensor": tiles}
    adds = _ops(trace, "tensor_tensor")
    assert all(ins.engine == "vector" and ins.attrs["alu"] == "add" for ins in adds)
    # The last row tile is ragged: 300 = 2·128 + 44 partitions.
    assert sorted({ins.writes[0].partitions for ins in adds}) == [44, 128]
    assert sum(ins.writes[0].nbytes for ins in _dma_stores(trace)) == a.nbytes


def test_records_of_equal_views_of_different_tiles_name_each_tile() -> None:
    """Trace records share what they know about a view's place across allocations of one shape;
    each record must still name its own allocation, and its rows and bytes."""
    import nki.isa as nisa
    import nki.language as nl

    trace = emu.Trace()

    @nki.jit
    def k(a: Any) -> Any:
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        for _ in nl.sequential_range(2):
            t = nl.ndarray((128, 2, 8), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[0:64, 1, :], src=a[0:64, :])
        u = nl.ndarray((128, 2, 8), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=u[64:128, 0, :], src=a[64:128, :])
        nisa.dma_copy(dst=out, src=a)
        return out

    emu.run_kernel(k, (np.ones((128, 8), np.float32),), trace=trace)
    tiles = [r["uid"] for r in trace.allocations if r["memory"] == "sbuf"]
    dsts = [ins.writes[0].region for ins in trace.instructions[:3]]
    assert [r.alloc for r in dsts] == tiles and len(set(tiles)) == 3
    assert dsts[0][1:] == dsts[1][1:] == (0, 63, 32, 64)  # rows 0–63, bytes 32–64 of each partition
    assert dsts[2][1:] == (64, 127, 0, 32)


# ---------------------------------------------------------------------------------------------
# 2. softmax over the last axis
# ---------------------------------------------------------------------------------------------
def _softmax_ref(x: np.ndarray) -> np.ndarray:
    x = _f64(x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["f32", "bf16"])
def test_softmax_matches_numpy(dtype: Any) -> None:
    x = (_randn((300, 1000), np.float32, 3) * 4).astype(dtype)
    got = nki.simulate(softmax.softmax)(x)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(_f64(got), _softmax_ref(x), **_tol(dtype))
    np.testing.assert_allclose(_f64(got).sum(axis=-1), 1.0, rtol=_tol(dtype)["rtol"])


@pytest.mark.parametrize("target", TARGETS)
def test_softmax_trace(target: str) -> None:
    x = _randn((256, 512), seed=4)
    out, trace = _traced(softmax.softmax, (x,), target)
    np.testing.assert_allclose(_f64(out), _softmax_ref(x), **_tol(np.float32))
    tiles = 2
    assert trace.counts() == {"dma_copy": 2 * tiles, "tensor_reduce": tiles, "activation": tiles, "reciprocal": tiles, "tensor_scalar": tiles}
    for ins in _ops(trace, "activation"):
        assert ins.engine == "scalar" and ins.attrs["func"] == "exp" and ins.attrs["reduce"]
        assert [r.role for r in ins.reads] == ["data", "bias"]


# ---------------------------------------------------------------------------------------------
# 3. RMSNorm
# ---------------------------------------------------------------------------------------------
def _rmsnorm_ref(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    x = _f64(x)
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * _f64(w)


@pytest.mark.parametrize("shape", [(256, 512), (300, 1000)], ids=["whole-tiles", "ragged"])
def test_rmsnorm_matches_numpy(shape: tuple[int, int]) -> None:
    x, w = _randn(shape, seed=5), _randn(shape[1:], seed=6)
    got = nki.simulate(rmsnorm.rmsnorm)(x, w)
    np.testing.assert_allclose(_f64(got), _rmsnorm_ref(x, w, 1e-6), **_tol(np.float32))


@pytest.mark.parametrize("target", TARGETS)
def test_rmsnorm_trace(target: str) -> None:
    rows, cols = 300, 256
    x, w = _randn((rows, cols), seed=5), _randn((cols,), seed=6)
    out, trace = _traced(rmsnorm.rmsnorm, (x, w), target, {"eps": 1e-3})
    np.testing.assert_allclose(_f64(out), _rmsnorm_ref(x, w, 1e-3), **_tol(np.float32))
    tiles = _cdiv(rows, P)
    assert trace.counts() == {
        "dma_copy": 1 + 2 * tiles,
        "activation": 2 * tiles,
        "tensor_scalar": tiles,
        "scalar_tensor_tensor": tiles,
    }
    # The weight is loaded once, broadcast to all partitions by a stride-0 access pattern.
    w_load = trace.instructions[0]
    assert w_load.op == "dma_copy" and w_load.reads[0].strides == (0, 1) and w_load.writes[0].shape == (P, cols)
    assert [ins.attrs["func"] for ins in _ops(trace, "activation")] == ["square", "rsqrt"] * tiles


# ---------------------------------------------------------------------------------------------
# 4. LayerNorm, plain and with bn_stats / bn_aggr
# ---------------------------------------------------------------------------------------------
def _layernorm_ref(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    x = _f64(x)
    return (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(x.var(axis=-1, keepdims=True) + eps) * _f64(g) + _f64(b)


def _layernorm_args(rows: int, cols: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # A non-zero mean makes a one-pass E[x²] - E[x]² variance visibly worse than a centred one.
    x = _randn((rows, cols), seed=7) * 2 + 3
    return x.astype(np.float32), _randn((cols,), seed=8), _randn((cols,), seed=9)


@pytest.mark.parametrize("kernel", [layernorm.layernorm, layernorm.layernorm_bn], ids=["plain", "bn_stats"])
@pytest.mark.parametrize("shape", [(256, 1024), (300, 1000)], ids=["whole-chunks", "ragged"])
def test_layernorm_matches_numpy(kernel: Any, shape: tuple[int, int]) -> None:
    x, g, b = _layernorm_args(*shape)
    got = nki.simulate(kernel)(x, g, b)
    np.testing.assert_allclose(_f64(got), _layernorm_ref(x, g, b, 1e-5), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_layernorm_plain_trace(target: str) -> None:
    x, g, b = _layernorm_args(200, 384)
    out, trace = _traced(layernorm.layernorm, (x, g, b), target)
    np.testing.assert_allclose(_f64(out), _layernorm_ref(x, g, b, 1e-5), rtol=1e-4, atol=1e-4)
    tiles = 2
    counts = trace.counts()
    assert counts["dma_copy"] == 2 + 2 * tiles
    assert counts["tensor_reduce"] == tiles
    assert counts["activation"] == 2 * tiles  # square with fused row sum, rsqrt
    assert "bn_stats" not in counts


@pytest.mark.parametrize("target", TARGETS)
def test_layernorm_bn_trace(target: str) -> None:
    rows, cols = 200, 1000
    x, g, b = _layernorm_args(rows, cols)
    out, trace = _traced(layernorm.layernorm_bn, (x, g, b), target)
    np.testing.assert_allclose(_f64(out), _layernorm_ref(x, g, b, 1e-5), rtol=1e-4, atol=1e-4)
    tiles, chunks = _cdiv(rows, P), _cdiv(cols, 512)
    counts = trace.counts()
    assert counts["bn_stats"] == tiles * chunks and counts["bn_aggr"] == tiles
    assert "tensor_reduce" not in counts
    # Each bn_stats reads at most bn_stats_fmax columns; the last chunk is ragged (1000 = 512 + 488).
    assert sorted({ins.reads[0].elems_per_partition for ins in _ops(trace, "bn_stats")}) == [488, 512]


# ---------------------------------------------------------------------------------------------
# 5. the four steps of the matmul tutorial (bf16 in, fp32 out)
# ---------------------------------------------------------------------------------------------
MM_K, MM_M, MM_N = 512, 512, 1024
MATMUL_STEPS = [matmul.matmul_tiled, matmul.matmul_hoisted, matmul.matmul_block_free, matmul.matmul_fully_optimized]
SMALL_BLOCKS = {"tiles_in_block_m": 2, "tiles_in_block_n": 1, "tiles_in_block_k": 2}


def _matmul_args(k: int = MM_K, m: int = MM_M, n: int = MM_N) -> tuple[np.ndarray, np.ndarray]:
    return _randn((k, m), BF16, 10), _randn((k, n), BF16, 11)


def _check_matmul(out: np.ndarray, lhsT: np.ndarray, rhs: np.ndarray) -> None:
    assert out.dtype == np.float32 and out.shape == (lhsT.shape[1], rhs.shape[1])
    # bf16 products are exact in fp32; only fp32 accumulation order separates us from float64.
    np.testing.assert_allclose(_f64(out), _f64(lhsT).T @ _f64(rhs), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("kernel", MATMUL_STEPS, ids=lambda k: k.__name__)
def test_matmul_matches_numpy(kernel: Any) -> None:
    lhsT, rhs = _matmul_args()
    _check_matmul(nki.simulate(kernel)(lhsT, rhs), lhsT, rhs)


def test_matmul_fully_optimized_with_several_blocks_per_dim() -> None:
    """Small blocks force 2 blocks along M, N and K, so K blocks really accumulate in SBUF."""
    lhsT, rhs = _matmul_args()
    _check_matmul(nki.simulate(matmul.matmul_fully_optimized)(lhsT, rhs, **SMALL_BLOCKS), lhsT, rhs)


def _expected_matmul_dmas(name: str, k: int, m: int, n: int, blocks: dict[str, int] | None = None) -> tuple[int, int]:
    """``(HBM→SBUF loads, SBUF→HBM stores)`` each tutorial step issues for ``[K, M] × [K, N]``."""
    kt, mt, nt = k // 128, m // 128, n // 512
    if name == "matmul_tiled":
        return 2 * mt * nt * kt, mt * nt
    if name == "matmul_hoisted":
        return mt * kt + mt * nt * kt, mt * nt
    if name == "matmul_block_free":
        bm, bn = min(matmul.FREE_BLOCK_TILES_M, mt), min(matmul.FREE_BLOCK_TILES_N, nt)
        return mt * kt + (mt // bm) * nt * kt, mt * nt
    b = blocks or {}
    bm = min(b.get("tiles_in_block_m", matmul.TILES_IN_BLOCK_M), mt)
    bn = min(b.get("tiles_in_block_n", matmul.TILES_IN_BLOCK_N), nt)
    bk = min(b.get("tiles_in_block_k", matmul.TILES_IN_BLOCK_K), kt)
    n_blocks, k_blocks, m_blocks = nt // bn, kt // bk, mt // bm
    return n_blocks * k_blocks * bk * (1 + m_blocks), n_blocks * mt


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kernel", MATMUL_STEPS, ids=lambda k: k.__name__)
def test_matmul_trace(kernel: Any, target: str) -> None:
    lhsT, rhs = _matmul_args()
    out, trace = _traced(kernel, (lhsT, rhs), target)
    _check_matmul(out, lhsT, rhs)
    mms = _ops(trace, "nc_matmul")
    assert len(mms) == (MM_K // 128) * (MM_M // 128) * (MM_N // 512)
    for ins in mms:
        assert (ins.attrs["K"], ins.attrs["M"], ins.attrs["N"]) == (128, 128, 512)
        assert ins.engine == "tensor" and ins.writes[0].memory == "psum"
        assert [(r.memory, r.dtype) for r in ins.reads] == [("sbuf", "bfloat16"), ("sbuf", "bfloat16")]
    loads, stores = _expected_matmul_dmas(kernel.__name__, MM_K, MM_M, MM_N)
    assert (len(_dma_loads(trace)), len(_dma_stores(trace))) == (loads, stores)
    assert sum(ins.reads[0].nbytes for ins in _dma_stores(trace)) == MM_M * MM_N * 4


def test_matmul_steps_differ_the_way_the_tutorial_says() -> None:
    """HBM traffic falls step by step; only the last step accumulates K blocks in SBUF with wide DMAs."""
    lhsT, rhs = _matmul_args()
    traces = {k.__name__: _traced(k, (lhsT, rhs), "trn2")[1] for k in MATMUL_STEPS}
    load_bytes = [sum(ins.reads[0].nbytes for ins in _dma_loads(traces[k.__name__])) for k in MATMUL_STEPS]
    assert load_bytes == sorted(load_bytes, reverse=True) and len(set(load_bytes)) == 4, load_bytes
    # The fully optimized kernel reads each operand from HBM exactly once at this size.
    assert load_bytes[-1] == lhsT.nbytes + rhs.nbytes
    for name, trace in traces.items():
        counts = Counter(ins.op for ins in trace.instructions)
        evacuations = counts["tensor_copy"]
        sbuf_adds = [ins for ins in _ops(trace, "tensor_tensor") if ins.writes[0].memory == "sbuf" and ins.reads[1].memory == "psum"]
        widest_load = max(ins.reads[0].nbytes for ins in _dma_loads(trace))
        if name == "matmul_fully_optimized":
            assert evacuations == 0 and len(sbuf_adds) == (MM_M // 128) * (MM_N // 512)
            assert widest_load == 128 * 1024 * 2  # one DMA brings a whole [128, BLOCK_N] rhs row of tiles
            assert {ins.loops[1][1] for ins in sbuf_adds} == {"sequential"}  # the K-block loop
        else:
            assert evacuations == (MM_M // 128) * (MM_N // 512) and not sbuf_adds
            assert widest_load == 128 * 512 * 2  # one [128, 512] bf16 tile


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_fully_optimized_small_blocks_trace(target: str) -> None:
    lhsT, rhs = _matmul_args()
    out, trace = _traced(matmul.matmul_fully_optimized, (lhsT, rhs), target, SMALL_BLOCKS)
    _check_matmul(out, lhsT, rhs)
    loads, stores = _expected_matmul_dmas("matmul_fully_optimized", MM_K, MM_M, MM_N, SMALL_BLOCKS)
    assert (len(_dma_loads(trace)), len(_dma_stores(trace))) == (loads, stores)
    k_blocks = MM_K // (128 * SMALL_BLOCKS["tiles_in_block_k"])
    n_blocks = MM_N // (512 * SMALL_BLOCKS["tiles_in_block_n"])
    counts = trace.counts()
    assert counts["tensor_tensor"] == (MM_M // 128) * (MM_N // 512) * k_blocks
    assert counts["memset"] == n_blocks  # one zeroed accumulator stripe per N block
    assert counts["nc_matmul"] == (MM_K // 128) * (MM_M // 128) * (MM_N // 512)


# ---------------------------------------------------------------------------------------------
# 6. 2-D transpose
# ---------------------------------------------------------------------------------------------
TRANSPOSES = [transpose.transpose_pe, transpose.transpose_dma]


@pytest.mark.parametrize("kernel", TRANSPOSES, ids=lambda k: k.__name__)
@pytest.mark.parametrize(("shape", "dtype"), [((300, 200), np.float32), ((256, 384), BF16)], ids=["ragged-f32", "bf16"])
def test_transpose_matches_numpy(kernel: Any, shape: tuple[int, int], dtype: Any) -> None:
    x = _randn(shape, dtype, 12)
    got = nki.simulate(kernel)(x)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, x.T)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kernel", TRANSPOSES, ids=lambda k: k.__name__)
def test_transpose_trace(kernel: Any, target: str) -> None:
    rows, cols = 300, 200
    x = _randn((rows, cols), seed=12)
    out, trace = _traced(kernel, (x,), target)
    np.testing.assert_array_equal(out, x.T)
    tiles = _cdiv(rows, P) * _cdiv(cols, P)
    if kernel is transpose.transpose_pe:
        assert trace.counts() == {"dma_copy": 2 * tiles, "nc_transpose": tiles, "tensor_copy": tiles}
        pe = _ops(trace, "nc_transpose")
        assert all(ins.engine == "tensor" and ins.writes[0].memory == "psum" for ins in pe)
        assert sorted({(ins.attrs["P"], ins.attrs["F"]) for ins in pe}) == [(44, 72), (44, 128), (128, 72), (128, 128)]
    else:
        assert trace.counts() == {"dma_transpose": tiles, "dma_copy": tiles}
        assert all(ins.reads[0].memory == "hbm" and ins.writes[0].memory == "sbuf" for ins in _ops(trace, "dma_transpose"))


# ---------------------------------------------------------------------------------------------
# 7. single-head attention softmax(QᵀK)·V
# ---------------------------------------------------------------------------------------------
def _attention_args(d: int, seq_q: int, seq_k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # The 1/sqrt(d) scale is folded into q on the host, as the kernel's docstring suggests.
    q = (_randn((d, seq_q), seed=13) / math.sqrt(d)).astype(BF16)
    return q, _randn((d, seq_k), BF16, 14), _randn((seq_k, d), BF16, 15)


def _attention_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    return _softmax_ref(_f64(q).T @ _f64(k)) @ _f64(v)


def _check_attention(out: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    assert out.dtype == np.float32 and out.shape == (q.shape[1], v.shape[1])
    # The probabilities are rounded to bf16 before P·V (TensorE takes bf16), ~2^-9 relative each.
    np.testing.assert_allclose(_f64(out), _attention_ref(q, k, v), rtol=1e-2, atol=2e-3)


@pytest.mark.parametrize(("seq_q", "seq_k"), [(512, 512), (256, 1024)])
def test_attention_matches_numpy(seq_q: int, seq_k: int) -> None:
    q, k, v = _attention_args(128, seq_q, seq_k)
    _check_attention(nki.simulate(attention.attention)(q, k, v), q, k, v)


@pytest.mark.parametrize("target", TARGETS)
def test_attention_trace(target: str) -> None:
    d, seq_q, seq_k = 128, 256, 1024
    q, k, v = _attention_args(d, seq_q, seq_k)
    out, trace = _traced(attention.attention, (q, k, v), target)
    _check_attention(out, q, k, v)
    q_tiles, key_banks, key_tiles = seq_q // 128, seq_k // 512, seq_k // 128
    shapes = Counter((ins.attrs["K"], ins.attrs["M"], ins.attrs["N"]) for ins in _ops(trace, "nc_matmul"))
    assert shapes == {(d, 128, 512): q_tiles * key_banks, (128, 128, d): q_tiles * key_tiles}
    counts = trace.counts()
    assert counts["nc_transpose"] == q_tiles * key_tiles
    assert counts["activation"] == q_tiles and counts["tensor_reduce"] == q_tiles
    # Q, K and V are each read from HBM once.
    assert sum(ins.reads[0].nbytes for ins in _dma_loads(trace)) == q.nbytes + k.nbytes + v.nbytes
    # Softmax reads the scores straight from PSUM.
    assert all(ins.reads[0].memory == "psum" for ins in _ops(trace, "tensor_reduce") + _ops(trace, "activation"))


# ---------------------------------------------------------------------------------------------
# 8. SPMD launch kernel[grid]
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("grid", [1, 2, 4])
def test_spmd_vector_add_matches_numpy(grid: int) -> None:
    a, b = _randn((512, 384), seed=16), _randn((512, 384), seed=17)
    np.testing.assert_array_equal(nki.simulate(spmd.vector_add_spmd[grid])(a, b), a + b)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("grid", [2, 4])
def test_spmd_instances_write_disjoint_slices(grid: int, target: str) -> None:
    rows, cols = 1024, 256
    a, b = _randn((rows, cols), seed=16), _randn((rows, cols), seed=17)
    out, trace = _traced(spmd.vector_add_spmd[grid], (a, b), target)
    np.testing.assert_array_equal(out, a + b)
    per_program: dict[tuple[int, ...], list[emu.Region]] = {}
    for ins in _dma_stores(trace):
        per_program.setdefault(ins.program_id, []).append(ins.writes[0].region)
    assert sorted(per_program) == [(g,) for g in range(grid)]
    assert {len(regions) for regions in per_program.values()} == {rows // grid // P}
    # No instance writes where another one does...
    for g, mine in per_program.items():
        others = [r for h, theirs in per_program.items() if h != g for r in theirs]
        assert not any(r.overlaps(o) for r in mine for o in others)
    # ...and instance g covers exactly its block of rows (an HBM region row is one output row).
    for (g,), regions in per_program.items():
        block = rows // grid
        assert (min(r.p_lo for r in regions), max(r.p_hi for r in regions)) == (g * block, (g + 1) * block - 1)
        assert {(r.b_lo, r.b_hi) for r in regions} == {(0, cols * 4)}
