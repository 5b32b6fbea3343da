"""Tests of ``nki.language``: allocation, data movement, math, reductions, loops, SPMD, promotion.

Every function is run inside a kernel and checked against NumPy; where the lowering matters
to the cost model (which ISA instruction an ``nl`` call or an operator becomes), the
trace is checked too.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkiagent import emu
from nkiagent.emu.tensor import DynSlice
from tests.emu.test_isa_core import _ACT_REF

BF16 = ml_dtypes.bfloat16


def run(fn: Callable[..., Any], *args: Any, target: str = "trn2", trace: emu.Trace | None = None) -> Any:
    return emu.run_kernel(fn if isinstance(fn, emu.Kernel) else nki.jit(fn), args, target=target, trace=trace).outputs


def randn(shape: tuple[int, ...], seed: int = 0, dtype: Any = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def to_hbm(t: Any) -> Any:
    """Kernel helper: store an on-chip tile into a fresh shared_hbm output of the same shape and dtype."""
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


# --------------------------------------------------------------------------------------------
# Allocation
# --------------------------------------------------------------------------------------------
def test_ndarray_zeros_ones_full_and_zeros_like() -> None:
    def k() -> Any:
        z = nl.zeros((4, 3), nl.float32)
        o = nl.ones((4, 3), nl.int32)
        f = nl.full((4, 3), 2.5, nl.bfloat16)
        zl = nl.zeros_like(f)
        fresh = nl.ndarray((4, 3), nl.float16, buffer=nl.sbuf)
        info = (z.buffer, zl.dtype, zl.shape, fresh.shape, fresh.dtype)
        return to_hbm(z), to_hbm(o), to_hbm(f), to_hbm(zl), info

    z, o, f, zl, info = run(k)
    np.testing.assert_array_equal(z, np.zeros((4, 3), np.float32))
    np.testing.assert_array_equal(o, np.ones((4, 3), np.int32))
    assert o.dtype == np.int32 and f.dtype == BF16 and zl.dtype == BF16
    np.testing.assert_array_equal(f.astype(np.float32), np.full((4, 3), 2.5))
    np.testing.assert_array_equal(zl.astype(np.float32), np.zeros((4, 3)))
    assert info == (nl.sbuf, BF16, (4, 3), (4, 3), np.float16)


def test_zeros_in_psum_and_uninitialized_memory_reads_nan_and_four() -> None:
    def k() -> Any:
        p = nl.zeros((8, 16), nl.float32, buffer=nl.psum)
        f = nl.ndarray((8, 16), nl.float32, buffer=nl.sbuf)
        i = nl.ndarray((8, 16), nl.int32, buffer=nl.sbuf)
        return to_hbm(nl.copy(p)), to_hbm(f), to_hbm(i), p.buffer

    p, f, i, buf = run(k)
    np.testing.assert_array_equal(p, np.zeros((8, 16)))
    assert np.isnan(f).all()
    np.testing.assert_array_equal(i, np.full((8, 16), 4))
    assert buf is nl.psum


def test_uninitialized_elements_stay_visible_around_partial_and_whole_writes() -> None:
    """Fresh memory is filled lazily: a store covering a whole tile skips the fill, a partial one must not."""
    x = randn((8, 16), seed=3)

    def k(a: Any) -> Any:
        part = nl.ndarray((8, 16), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=part[:, 4:12], src=a[:, 4:12])  # the columns outside stay uninitialized
        ints = nl.ndarray((8, 16), nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=ints[0:4, :], value=7)
        whole = nl.ndarray((8, 16), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=whole, src=a)
        nisa.dma_copy(dst=whole[:, 0:2], src=part[:, 0:2])  # a later partial write of unwritten data
        psum = nl.ndarray((8, 16), nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=psum[0:8, 8:16], src=whole[:, 8:16])
        return to_hbm(part), to_hbm(ints), to_hbm(whole), to_hbm(nl.copy(psum))

    part, ints, whole, psum = run(k, x)
    assert np.isnan(part[:, :4]).all() and np.isnan(part[:, 12:]).all()
    np.testing.assert_array_equal(part[:, 4:12], x[:, 4:12])
    np.testing.assert_array_equal(ints, np.where(np.arange(8)[:, None] < 4, 7, 4) * np.ones((1, 16), np.int32))
    assert np.isnan(whole[:, :2]).all()
    np.testing.assert_array_equal(whole[:, 2:], x[:, 2:])
    assert np.isnan(psum[:, :8]).all()
    np.testing.assert_array_equal(psum[:, 8:], x[:, 8:])


def test_tiles_filled_by_slice_writes_show_exactly_the_unwritten_parts() -> None:
    """Slice stores into a fresh tile are tracked in whole units until the first read fills the rest."""
    x = randn((128, 512), seed=4)

    def k(a: Any) -> Any:
        full = nl.ndarray((128, 2, 256), nl.float32, buffer=nl.sbuf)
        half = nl.ndarray((128, 2, 256), nl.float32, buffer=nl.sbuf)
        mixed = nl.ndarray((128, 2, 256), nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(2):
            nisa.dma_copy(dst=full[:, j, :], src=a[:, j * 256 : (j + 1) * 256])
        nisa.dma_copy(dst=half[:, 1, :], src=a[:, 256:512])
        nisa.dma_copy(dst=mixed[:, 0, 0:128], src=a[:, 0:128])
        nisa.dma_copy(dst=mixed[:, 1, 8:40], src=a[:, 8:40])  # finer than the tracked unit: fills at once
        return to_hbm(full), to_hbm(half), to_hbm(mixed)

    full, half, mixed = run(k, x)
    np.testing.assert_array_equal(full.reshape(128, 512), x)
    assert np.isnan(half[:, 0]).all()
    np.testing.assert_array_equal(half[:, 1], x[:, 256:])
    np.testing.assert_array_equal(mixed[:, 0, :128], x[:, :128])
    np.testing.assert_array_equal(mixed[:, 1, 8:40], x[:, 8:40])
    assert np.isnan(mixed[:, 0, 128:]).all() and np.isnan(mixed[:, 1, :8]).all() and np.isnan(mixed[:, 1, 40:]).all()


# --------------------------------------------------------------------------------------------
# Data movement
# --------------------------------------------------------------------------------------------
def test_load_with_cast_store_copy_and_load_transpose2d() -> None:
    x = randn((32, 48), seed=1)
    trace = emu.Trace()

    def k(a: Any) -> Any:
        t = nl.load(a)
        b = nl.load(a, dtype=nl.bfloat16)
        c = nl.copy(t)
        tt = nl.load_transpose2d(a)
        return to_hbm(c), to_hbm(b), to_hbm(tt)

    c, b, tt = run(k, x, trace=trace)
    np.testing.assert_array_equal(c, x)
    np.testing.assert_array_equal(b, x.astype(BF16))
    np.testing.assert_array_equal(tt, x.T)
    assert [i.op for i in trace] == ["dma_copy", "dma_copy", "activation", "dma_transpose", "dma_copy", "dma_copy", "dma_copy"]


def test_load_of_a_1d_hbm_tensor_gives_a_one_partition_tile() -> None:
    v = np.arange(10, dtype=np.float32)

    def k(a: Any) -> Any:
        t = nl.load(a)
        out = nl.ndarray((10,), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out, t.shape

    out, shape = run(k, v)
    assert shape == (1, 10)
    np.testing.assert_array_equal(out, v)


def test_store_from_psum_stages_through_sbuf_and_copy_of_psum_uses_tensor_copy() -> None:
    x = randn((16, 16), seed=2)
    trace = emu.Trace()

    def k(a: Any) -> Any:
        p = nl.ndarray((16, 16), nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=nl.load(a))
        out = nl.ndarray((16, 16), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, p)
        c = nl.copy(p)
        return out, to_hbm(c)

    out, c = run(k, x, trace=trace)
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(c, x)
    assert [i.op for i in trace] == ["dma_copy", "tensor_copy", "tensor_copy", "dma_copy", "tensor_copy", "dma_copy"]


# --------------------------------------------------------------------------------------------
# Element-wise math
# --------------------------------------------------------------------------------------------
_FLOAT_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "abs_max": lambda a, b: np.maximum(np.abs(a), np.abs(b)),
    "abs_min": lambda a, b: np.minimum(np.abs(a), np.abs(b)),
    "power": np.power,
    "equal": lambda a, b: (a == b) * 1.0,
    "not_equal": lambda a, b: (a != b) * 1.0,
    "greater": lambda a, b: (a > b) * 1.0,
    "greater_equal": lambda a, b: (a >= b) * 1.0,
    "less": lambda a, b: (a < b) * 1.0,
    "less_equal": lambda a, b: (a <= b) * 1.0,
    "logical_and": lambda a, b: ((a != 0) & (b != 0)) * 1.0,
    "logical_or": lambda a, b: ((a != 0) | (b != 0)) * 1.0,
    "logical_xor": lambda a, b: ((a != 0) ^ (b != 0)) * 1.0,
}
_INT_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift,
    "right_shift": np.right_shift,
}


def _float_operands(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = (rng.integers(1, 9, (16, 24)) * 0.5).astype(np.float32)  # positive: power stays real
    b = (rng.integers(1, 5, (16, 24)) * 0.5).astype(np.float32)
    b[:, :4] = a[:, :4]  # ties for the comparisons
    a[:, 4:6] = 0.0  # zeros for the logical ops
    return a, b


@pytest.mark.parametrize("name", sorted(_FLOAT_BINARY))
def test_binary_tile_tile(name: str) -> None:
    a, b = _float_operands(3)
    trace = emu.Trace()

    def k(x: Any, y: Any) -> Any:
        return to_hbm(getattr(nl, name)(nl.load(x), nl.load(y)))

    np.testing.assert_allclose(run(k, a, b, trace=trace), _FLOAT_BINARY[name](a, b), rtol=1e-6)
    assert [(i.op, i.attrs["alu"]) for i in trace if i.op == "tensor_tensor"] == [("tensor_tensor", name)]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("name", sorted(set(_FLOAT_BINARY) - {"power"}))  # nl.power(tile, scalar) is refused: test_not_on_hardware
def test_binary_tile_scalar_and_scalar_tile(name: str, reverse: bool) -> None:
    a, _ = _float_operands(4)
    s = 1.5
    trace = emu.Trace()

    def k(x: Any) -> Any:
        t = nl.load(x)
        return to_hbm(getattr(nl, name)(s, t) if reverse else getattr(nl, name)(t, s))

    scal = np.full_like(a, s)
    expect = _FLOAT_BINARY[name](scal, a) if reverse else _FLOAT_BINARY[name](a, scal)
    np.testing.assert_allclose(run(k, a, trace=trace), expect, rtol=1e-6)
    (ins,) = [i for i in trace if i.op == "tensor_scalar"]
    assert ins.attrs["alu"] == (name, None)


@pytest.mark.parametrize("name", sorted(_INT_BINARY))
def test_bitwise_binary_on_int_tiles_and_int_scalars(name: str) -> None:
    rng = np.random.default_rng(5)
    a = rng.integers(0, 2**20, (16, 8)).astype(np.int32)
    b = rng.integers(0, 12, (16, 8)).astype(np.int32)

    def k(x: Any, y: Any) -> Any:
        tx, ty = nl.load(x), nl.load(y)
        return to_hbm(getattr(nl, name)(tx, ty)), to_hbm(getattr(nl, name)(tx, 3))

    tile_tile, tile_scalar = run(k, a, b)
    np.testing.assert_array_equal(tile_tile, _INT_BINARY[name](a, b))
    np.testing.assert_array_equal(tile_scalar, _INT_BINARY[name](a, np.int32(3)))
    assert tile_tile.dtype == np.int32 and tile_scalar.dtype == np.int32


_UNARY = sorted(n for n in _ACT_REF if n not in ("copy", "identity")) + ["invert"]


@pytest.mark.parametrize("name", _UNARY)
def test_unary_function(name: str) -> None:
    if name == "invert":
        a = np.random.default_rng(6).integers(-1000, 1000, (16, 20)).astype(np.int32)
        expect: np.ndarray = ~a
    else:
        ref, (lo, hi) = _ACT_REF[name]
        a = np.random.default_rng(6).uniform(lo, hi, (16, 20)).astype(np.float32)
        expect = ref(a.astype(np.float64))

    def k(x: Any) -> Any:
        return to_hbm(getattr(nl, name)(nl.load(x)))

    with warnings.catch_warnings():
        warnings.simplefilter("error", emu.NkiWarning)
        got = run(k, a)
    assert got.dtype == a.dtype
    np.testing.assert_allclose(got, expect, rtol=2e-6, atol=2e-6)


def test_unary_function_with_dtype_casts_the_result() -> None:
    a = randn((8, 8), seed=7)

    def k(x: Any) -> Any:
        return to_hbm(nl.exp(nl.load(x), dtype=nl.bfloat16))

    got = run(k, a)
    assert got.dtype == BF16
    np.testing.assert_array_equal(got, np.exp(a).astype(BF16))


# --------------------------------------------------------------------------------------------
# Reductions and composites
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "ref"),
    [
        ("sum", lambda x, ax, kd: np.sum(x, axis=ax, keepdims=kd)),
        ("max", lambda x, ax, kd: np.max(x, axis=ax, keepdims=kd)),
        ("min", lambda x, ax, kd: np.min(x, axis=ax, keepdims=kd)),
        ("mean", lambda x, ax, kd: np.mean(x, axis=ax, keepdims=kd)),
        ("prod", lambda x, ax, kd: np.prod(x, axis=ax, keepdims=kd)),
        ("var", lambda x, ax, kd: np.var(x, axis=ax, keepdims=kd)),
        ("all", lambda x, ax, kd: np.all(x != 0, axis=ax, keepdims=kd) * 1.0),
    ],
)
@pytest.mark.parametrize(("axis", "keepdims"), [(1, False), (1, True), ((1, 2), False), (2, True), (-1, False)])
def test_reductions(name: str, ref: Callable[..., np.ndarray], axis: Any, keepdims: bool) -> None:
    x = np.random.default_rng(8).uniform(0.5, 1.5, (16, 4, 6)).astype(np.float32)
    x[3, 1, 2] = 0.0  # `all` sees one zero
    if axis == 1:  # reducing the middle axis alone is not a trailing reduction: use a 2-D tile
        x = x[:, :, 0].copy()
    expect = ref(x.astype(np.float64), axis, keepdims)
    shape = expect.shape if expect.ndim >= 2 else (16, 1)

    def k(a: Any) -> Any:
        return to_hbm(getattr(nl, name)(nl.load(a), axis=axis, keepdims=keepdims))

    got = run(k, x)
    assert got.shape == shape
    np.testing.assert_allclose(got, expect.reshape(shape), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [1, -1])
def test_softmax_along_the_last_axis(axis: int) -> None:
    x = randn((64, 100), seed=9) * 4

    def k(a: Any) -> Any:
        return to_hbm(nl.softmax(nl.load(a), axis=axis))

    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(run(k, x), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_matmul_with_transpose_x_returns_a_psum_tile() -> None:
    a, b = randn((128, 64), seed=10), randn((128, 200), seed=11)

    def k(x: Any, y: Any) -> Any:
        r = nl.matmul(nl.load(x), nl.load(y), transpose_x=True)
        return to_hbm(r), r.buffer, r.dtype

    got, buf, dtype = run(k, a, b)
    assert buf is nl.psum and dtype == np.float32
    np.testing.assert_allclose(got, a.astype(np.float64).T @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("shape", "engine", "buffer"), [((32, 20), "vector", "sbuf"), ((100, 64), "tensor", "psum")])
def test_transpose_small_on_vector_engine_large_on_tensor_engine(shape: tuple[int, int], engine: str, buffer: str) -> None:
    x = randn(shape, seed=12)
    trace = emu.Trace()

    def k(a: Any) -> Any:
        r = nl.transpose(nl.load(a))
        return to_hbm(r), r.buffer

    got, buf = run(k, x, trace=trace)
    np.testing.assert_array_equal(got, x.T)
    assert buf is getattr(nl, buffer)
    assert [i.engine for i in trace if i.op == "nc_transpose"] == [engine]


def test_where_with_tiles_and_scalars() -> None:
    x, y = randn((16, 16), seed=13), randn((16, 16), seed=14)

    def k(a: Any, b: Any) -> Any:
        ta, tb = nl.load(a), nl.load(b)
        cond = nl.greater(ta, 0.0)
        return to_hbm(nl.where(cond, ta, tb)), to_hbm(nl.where(cond, ta, 0.5)), to_hbm(nl.where(cond, -1.0, tb))

    both, x_or_half, neg_or_y = run(k, x, y)
    np.testing.assert_array_equal(both, np.where(x > 0, x, y))
    np.testing.assert_array_equal(x_or_half, np.where(x > 0, x, np.float32(0.5)))
    np.testing.assert_array_equal(neg_or_y, np.where(x > 0, np.float32(-1.0), y))


def test_broadcast_to_a_column_and_a_row() -> None:
    x = randn((16, 32), seed=15)

    def k(a: Any) -> Any:
        t = nl.load(a)
        return to_hbm(nl.broadcast_to(t[:, 3:4], (16, 32))), to_hbm(nl.broadcast_to(t[5:6, :], (16, 32)))

    col, row = run(k, x)
    np.testing.assert_array_equal(col, np.broadcast_to(x[:, 3:4], (16, 32)))
    np.testing.assert_array_equal(row, np.broadcast_to(x[5:6, :], (16, 32)))


def test_rms_norm() -> None:
    x, w = randn((32, 64), seed=16), randn((32, 64), seed=17)

    def k(a: Any, b: Any) -> Any:
        return to_hbm(nl.rms_norm(nl.load(a), nl.load(b), axis=1, n=64, epsilon=1e-5))

    x64 = x.astype(np.float64)
    expect = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(run(k, x, w), expect, rtol=1e-5, atol=1e-6)


def test_expand_dims_is_a_view_with_a_new_unit_axis() -> None:
    x = randn((8, 6), seed=18)

    def k(a: Any) -> Any:
        t = nl.load(a)
        e = nl.expand_dims(t, 1)
        out = nl.ndarray((8, 1, 6), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=e)
        return out, e.shape

    out, shape = run(k, x)
    assert shape == (8, 1, 6)
    np.testing.assert_array_equal(out, x[:, None, :])


# --------------------------------------------------------------------------------------------
# tile_size, SPMD, loops
# --------------------------------------------------------------------------------------------
_TILE_SIZE_COMMON = {
    "pmax": 128,
    "psum_fmax": 512,
    "gemm_stationary_fmax": 128,
    "gemm_moving_fmax": 512,
    "bn_stats_fmax": 512,
    "psum_min_align": 4,
    "sbuf_min_align": 1,
    "psum_bank_fmax": 512,
    "psum_bank_fmax_bytes": 2048,
    "psum_num_banks": 8,
}


@pytest.mark.parametrize(("target", "sbuf"), [("trn1", 180224), ("trn2", 212984), ("trn3", 245752)])
def test_tile_size_per_target(target: str, sbuf: int, monkeypatch: pytest.MonkeyPatch) -> None:
    def k() -> Any:
        return {name: getattr(nl.tile_size, name) for name in [*_TILE_SIZE_COMMON, "total_available_sbuf_size", "sbuf_size_bytes"]}

    assert run(k, target=target) == {**_TILE_SIZE_COMMON, "total_available_sbuf_size": sbuf, "sbuf_size_bytes": sbuf}
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", target)
    assert nl.tile_size.total_available_sbuf_size == sbuf  # outside a kernel: the env's target


def test_spmd_grid_program_ids_and_counts() -> None:
    @nki.jit
    def k(a: Any) -> Any:
        out = nl.ndarray((2, 3, 6), nl.int32, buffer=nl.shared_hbm)
        i, j = nl.program_id(0), nl.program_id(1)
        facts = [10 * i + j, nl.num_programs(), nl.num_programs(0), nl.num_programs(1), nl.num_programs((0, 1)), nl.program_ndim()]
        row = nl.ndarray((1, 6), nl.int32, buffer=nl.sbuf)
        for c, v in enumerate(facts):
            nisa.memset(row[:, c : c + 1], v)
        nisa.dma_copy(dst=out[i, j : j + 1, :], src=row)
        return out

    got = run(k[2, 3], np.zeros(1, np.float32))
    pid = np.arange(2)[:, None] * 10 + np.arange(3)[None, :]
    np.testing.assert_array_equal(got[:, :, 0], pid)
    np.testing.assert_array_equal(got[:, :, 1:], np.broadcast_to([6, 2, 3, 6, 2], (2, 3, 5)))


def test_spmd_program_ids_are_recorded_and_no_grid_means_one_program() -> None:
    trace = emu.Trace()

    @nki.jit
    def k(a: Any) -> Any:
        out = nl.ndarray((4, 8), nl.float32, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        nl.store(out[i : i + 1, :], nl.load(a[i : i + 1, :]))
        return out, (nl.program_id(0), nl.num_programs(), nl.program_ndim())

    x = randn((4, 8), seed=19)
    got, _ = run(k[4], x, trace=trace)
    np.testing.assert_array_equal(got, x)
    assert sorted({i.program_id for i in trace}) == [(0,), (1,), (2,), (3,)]
    partial, facts = run(k, x)
    assert facts == (0, 1, 0)
    np.testing.assert_array_equal(partial[0], x[0])


def test_loops_iterate_like_range_and_are_recorded_in_the_trace() -> None:
    trace = emu.Trace()
    seen: list[tuple[str, int]] = []

    def k() -> Any:
        acc = nl.zeros((1, 1), nl.float32)
        for i in nl.affine_range(3):
            seen.append(("affine", i))
            acc += 1.0
        for i in nl.sequential_range(1, 7, 3):
            seen.append(("sequential", i))
            acc += 10.0
        for i in nl.static_range(2):
            seen.append(("static", i))
            acc += 100.0
        for i in nl.dynamic_range(0, 4, 2):
            seen.append(("dynamic", i))
            acc += 1000.0

        def body(i: int) -> None:
            seen.append(("fori", i))
            nisa.tensor_scalar(acc, acc, nl.add, 10000.0)

        nl.fori_loop(2, 4, body)
        return to_hbm(acc)

    assert run(k, trace=trace)[0, 0] == 3 + 20 + 200 + 2000 + 20000
    assert seen == [("affine", 0), ("affine", 1), ("affine", 2), ("sequential", 1), ("sequential", 4), ("static", 0),
                    ("static", 1), ("dynamic", 0), ("dynamic", 2), ("fori", 2), ("fori", 3)]  # fmt: skip
    scalar_ops = [i for i in trace if i.op == "tensor_scalar"]
    assert [(ins.loops[0][1], ins.loops[0][2]) for ins in scalar_ops] == [
        ("affine", 0), ("affine", 1), ("affine", 2), ("sequential", 1), ("sequential", 4), ("static", 0), ("static", 1),
        ("dynamic", 0), ("dynamic", 2), ("dynamic", 2), ("dynamic", 3),
    ]  # fmt: skip
    assert all(len(ins.loops) == 1 for ins in scalar_ops)
    assert [i.loops for i in trace if i.op != "tensor_scalar"] == [(), ()]  # memset and the store are outside loops


def test_nested_loops_record_both_levels() -> None:
    trace = emu.Trace()

    def k() -> Any:
        acc = nl.zeros((1, 1), nl.float32)
        for i in nl.affine_range(2):
            for j in nl.sequential_range(2):
                acc += 1.0
        return to_hbm(acc)

    assert run(k, trace=trace)[0, 0] == 4
    kinds = [tuple((kind, it) for _, kind, it in i.loops) for i in trace if i.op == "tensor_scalar"]
    assert kinds == [
        (("affine", 0), ("sequential", 0)), (("affine", 0), ("sequential", 1)),
        (("affine", 1), ("sequential", 0)), (("affine", 1), ("sequential", 1)),
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------
# Operator overloads and type promotion
# --------------------------------------------------------------------------------------------
def test_operator_overloads_on_tiles() -> None:
    x, y = randn((16, 16), seed=20), randn((16, 16), seed=21)
    trace = emu.Trace()

    def k(a: Any, b: Any) -> Any:
        ta, tb = nl.load(a), nl.load(b)
        s = ta + tb
        m = ta * 2.0
        r = 2.0 - ta
        n = -ta
        cast = nl.ndarray((16, 16), nl.bfloat16, buffer=nl.sbuf)
        cast[...] = s
        acc = nl.load(a)
        acc += tb
        acc[0:8, :] *= 3.0
        return to_hbm(s), to_hbm(m), to_hbm(r), to_hbm(n), to_hbm(cast), to_hbm(acc)

    s, m, r, n, cast, acc = run(k, x, y, trace=trace)
    np.testing.assert_array_equal(s, x + y)
    np.testing.assert_array_equal(m, x * 2)
    np.testing.assert_array_equal(r, 2 - x)
    np.testing.assert_array_equal(n, -x)
    assert cast.dtype == BF16
    np.testing.assert_array_equal(cast, (x + y).astype(BF16))
    expect_acc = x + y
    expect_acc[:8] *= 3
    np.testing.assert_array_equal(acc, expect_acc)
    compute = [(i.op, i.attrs.get("alu")) for i in trace if i.op not in ("dma_copy",)]
    assert compute == [
        ("tensor_tensor", "add"),
        ("tensor_scalar", ("multiply", None)),
        ("tensor_scalar", ("subtract", None)),
        ("activation", None),
        ("tensor_copy", None),
        ("tensor_tensor", "add"),  # acc += tb is in place: no copy back
        ("tensor_scalar", ("multiply", None)),
    ]
    (rsub,) = [i for i in trace if i.op == "tensor_scalar" and i.attrs["alu"] == ("subtract", None)]
    assert rsub.writes[0].shape == (16, 16)


def test_assignment_of_a_number_is_a_memset_and_comparison_operators_give_masks() -> None:
    x = randn((8, 8), seed=22)

    def k(a: Any) -> Any:
        t = nl.load(a)
        filled = nl.ndarray((8, 8), nl.int32, buffer=nl.sbuf)
        filled[...] = 7
        same = nl.load(a)
        return to_hbm(filled), to_hbm(t > 0.0), to_hbm(t <= 0.0), to_hbm(t == same)

    filled, gt, le, eq = run(k, x)
    np.testing.assert_array_equal(filled, np.full((8, 8), 7))
    np.testing.assert_array_equal(gt, (x > 0) * 1.0)
    np.testing.assert_array_equal(le, (x <= 0) * 1.0)
    np.testing.assert_array_equal(eq, np.ones((8, 8)))


_F8E4, _F8E5 = ml_dtypes.float8_e4m3, ml_dtypes.float8_e5m2


@pytest.mark.parametrize(
    ("a_dtype", "b_dtype", "out_dtype"),
    [
        (np.float32, BF16, np.float32),
        (np.float16, BF16, np.float32),
        (_F8E4, np.float16, np.float16),
        (_F8E4, BF16, BF16),
        (_F8E4, _F8E5, BF16),
        (np.int8, np.uint8, np.int16),
        (np.int8, np.uint16, np.int32),
        (np.int32, np.uint32, np.float32),
        (BF16, np.int32, BF16),
        (np.uint8, np.float16, np.float16),
        (np.int16, np.int16, np.int16),
    ],
)
def test_type_promotion_of_tile_tile_ops(a_dtype: Any, b_dtype: Any, out_dtype: Any) -> None:
    a = np.full((4, 4), 3, dtype=a_dtype)
    b = np.full((4, 4), 2, dtype=b_dtype)

    def k(x: Any, y: Any) -> Any:
        return to_hbm(nl.add(nl.load(x), nl.load(y))), to_hbm(nl.load(y) * nl.load(x))

    total, product = run(k, a, b)
    assert total.dtype == np.dtype(out_dtype) and product.dtype == np.dtype(out_dtype)
    np.testing.assert_array_equal(total.astype(np.float32), np.full((4, 4), 5.0))
    np.testing.assert_array_equal(product.astype(np.float32), np.full((4, 4), 6.0))


@pytest.mark.parametrize(
    ("dtype", "scalar", "out_dtype"),
    [(np.float16, 1.25, np.float32), (BF16, 2, BF16), (np.int8, 1, np.int32), (np.int32, 1.5, np.float32), (np.uint8, True, np.uint8)],
)
def test_type_promotion_with_weak_scalars(dtype: Any, scalar: Any, out_dtype: Any) -> None:
    a = np.full((4, 4), 3, dtype=dtype)

    def k(x: Any) -> Any:
        return to_hbm(nl.load(x) + scalar)

    got = run(k, a)
    assert got.dtype == np.dtype(out_dtype)
    np.testing.assert_array_equal(got.astype(np.float32), np.full((4, 4), 3 + float(scalar)))


def test_explicit_dtype_overrides_promotion() -> None:
    a, b = np.full((4, 4), 1.5, np.float32), np.full((4, 4), 2.0, np.float32)

    def k(x: Any, y: Any) -> Any:
        return to_hbm(nl.multiply(nl.load(x), nl.load(y), dtype=nl.int32))

    got = run(k, a, b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.full((4, 4), 3))


def test_outputs_are_handed_over_without_aliasing_inputs_or_each_other() -> None:
    """A whole output buffer is returned as is (no copy); a second mention of it and a returned input are copies."""
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out, out, a

    first, again, same_input = nki.simulate(k)(x)
    for got in (first, again, same_input):
        np.testing.assert_array_equal(got, x)
    first[0, 0] = -1.0
    same_input[0, 1] = -2.0
    assert again[0, 0] == 0.0 and x[0, 1] == 1.0  # three independent arrays, the caller's input untouched


def test_repeated_indexing_reuses_views_but_still_rejects_bad_indices() -> None:
    """Indexing a tile again with the same simple index returns the same immutable view; anything
    else still gets checked, also where a remembered index compares equal to it (``True == 1.0 == 1``)."""
    seen: dict[str, Any] = {}

    @nki.jit
    def k(a):
        t = nl.ndarray((128, 2, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[:, 0, :], src=a[:, 0:64])
        seen["same"] = t[:, 0, nl.ds(0, 32)] is t[:, 0, nl.ds(0, 32)] and t[0:128, 1, 0:8] is t[0:128, 1, 0:8]
        seen["distinct"] = t[:, 0, nl.ds(0, 32)] is not t[:, 0, 0:32]
        try:
            t[(DynSlice, 0, 32), 0]  # a tuple that looks like a remembered key is not an index
        except emu.NkiTypeError as e:
            seen["error"] = str(e)
        fresh = nl.ndarray((128, 2, 64), nl.float32, buffer=nl.sbuf)  # t's geometry: its views come from a shared cache
        for tile in (t, fresh):
            tile[:, 1, :]
            for bad in (True, 1.0):  # equal to 1 as dict keys, but no indices
                try:
                    tile[:, bad, :]
                except emu.NkiTypeError as e:
                    seen.setdefault("bad", []).append(str(e))
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t[:, 0, :])
        return out

    x = randn((128, 64), seed=5)
    np.testing.assert_array_equal(nki.simulate(k)(x), x)
    assert seen["same"] and seen["distinct"]
    assert "invalid index" in seen["error"] and "err_invalid_index" in seen["error"]
    assert [e.split(" for tensor")[0].split(": ")[-1] for e in seen["bad"]] == ["invalid index True", "invalid index 1.0"] * 2
    assert all("err_invalid_index" in e for e in seen["bad"])


def test_trace_records_name_their_enclosing_loop_iterations_even_after_a_break() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            for j in nl.sequential_range(3):
                t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=a[:, 0:64])
                if j == 1:
                    break
            nisa.dma_copy(dst=out[:, 0:64], src=t)
        nisa.dma_copy(dst=out[:, 64:128], src=a[:, 64:128])
        return out

    trace = emu.Trace()
    emu.run_kernel(k, (np.ones((128, 128), np.float32),), trace=trace)
    assert [ins.loops for ins in trace] == [
        ((1, "affine", 0), (2, "sequential", 0)),
        ((1, "affine", 0), (2, "sequential", 1)),
        ((1, "affine", 0),),
        ((1, "affine", 1), (3, "sequential", 0)),
        ((1, "affine", 1), (3, "sequential", 1)),
        ((1, "affine", 1),),
        (),
    ]
