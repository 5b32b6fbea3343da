"""Per-op unit tests of the core ``nki.isa`` instructions, each checked against NumPy.

Kernels are small closures run through :func:`nkiagent.emu.run_kernel`; inputs come from
HBM, results go back through ``dma_copy``. References are written independently of the
emulator's own tables (``alu.ALU`` / ``alu.ACT``) so a wrong table entry is caught.
"""

from __future__ import annotations

import math
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
from nkiagent.emu import alu

BF16 = ml_dtypes.bfloat16
TARGETS = ("trn1", "trn2", "trn3")


def run(fn: Callable[..., Any], *args: Any, target: str = "trn2", trace: emu.Trace | None = None) -> Any:
    return emu.run_kernel(nki.jit(fn), args, target=target, trace=trace).outputs


def randn(shape: tuple[int, ...], seed: int = 0, dtype: Any = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def uniform(shape: tuple[int, ...], lo: float, hi: float, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def out_of(src: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """Kernel helper: an HBM output holding a copy of the on-chip tile ``src``."""
    out = nl.ndarray(shape, dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=src)
    return out


_erf = np.vectorize(math.erf, otypes=[np.float64])


# --------------------------------------------------------------------------------------------
# dma_copy
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("src_dtype", "dst_dtype"),
    [(np.float32, BF16), (BF16, np.float32), (np.float32, np.float16), (np.float32, np.float32), (np.int32, np.int32)],
)
def test_dma_copy_casts_through_fp32(src_dtype: Any, dst_dtype: Any) -> None:
    x = (randn((64, 48), seed=1) * 100).astype(src_dtype)

    def k(a: Any) -> Any:
        t = nl.ndarray(a.shape, dst_dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        return out_of(t, a.shape, dst_dtype)

    got = run(k, x)
    assert got.dtype == np.dtype(dst_dtype)
    np.testing.assert_array_equal(got, x.astype(np.float32).astype(dst_dtype))


def test_dma_copy_float_to_int_rounds_to_nearest_and_saturates() -> None:
    x = np.array([[0.4, 0.6, -1.6, 1e12, -1e12, 2.5]], dtype=np.float32)

    def k(a: Any) -> Any:
        t = nl.ndarray(a.shape, nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        return out_of(t, a.shape, nl.int32)

    np.testing.assert_array_equal(run(k, x), [[0, 1, -2, 2**31 - 1, -(2**31), 2]])


def test_dma_copy_between_shapes_with_the_same_element_count() -> None:
    x = randn((128, 64), seed=2)

    def k(a: Any) -> Any:
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        out = nl.ndarray((64, 2, 64), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    np.testing.assert_array_equal(run(k, x), x.reshape(64, 2, 64))


def test_dma_copy_hbm_to_hbm_and_sbuf_to_sbuf_slices() -> None:
    x = randn((32, 40), seed=3)

    def k(a: Any) -> Any:
        out = nl.ndarray((32, 40), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[:, 0:20], src=a[:, 20:40])  # HBM → HBM
        t = nl.ndarray((32, 20), nl.float32, buffer=nl.sbuf)
        u = nl.ndarray((32, 20), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, 0:20])
        nisa.dma_copy(dst=u, src=t)  # SBUF → SBUF
        nisa.dma_copy(dst=out[:, 20:40], src=u)
        return out

    np.testing.assert_array_equal(run(k, x), np.concatenate([x[:, 20:], x[:, :20]], axis=1))


def _gather_kernel(mode: Any) -> Callable[..., Any]:
    def k(table: Any, idx: Any) -> Any:
        rows, cols = idx.shape[0], table.shape[1]
        it = nl.load(idx)
        g = nl.full((rows, cols), -1.0, nl.float32)
        src = table.ap([[cols, rows], [1, cols]], offset=0, vector_offset=it, indirect_dim=0)
        nisa.dma_copy(dst=g, src=src, oob_mode=mode)
        return out_of(g, (rows, cols), nl.float32)

    return k


def test_dma_copy_indirect_gather_by_vector_offset() -> None:
    table = np.arange(200 * 8, dtype=np.float32).reshape(200, 8)
    idx = np.random.default_rng(4).integers(0, 200, (128, 1)).astype(np.int32)
    np.testing.assert_array_equal(run(_gather_kernel(nisa.oob_mode.error), table, idx), table[idx[:, 0]])


def test_dma_copy_indirect_out_of_bounds_raises_with_oob_mode_error() -> None:
    table = np.arange(200 * 8, dtype=np.float32).reshape(200, 8)
    idx = np.zeros((128, 1), dtype=np.int32)
    idx[5, 0] = 200
    with pytest.raises(emu.NkiOutOfBoundsError) as ei:
        run(_gather_kernel(nisa.oob_mode.error), table, idx)
    assert ei.value.code == "err_dynamic_out_of_bound"
    assert ei.value.message == (
        "dynamic access to `table` at element 1600 is outside its 1600 elements (pass oob_mode=nisa.oob_mode.skip to skip such rows)"
    )


def test_dma_copy_indirect_out_of_bounds_rows_are_skipped_with_oob_mode_skip() -> None:
    table = np.arange(200 * 8, dtype=np.float32).reshape(200, 8)
    idx = np.arange(128, dtype=np.int32).reshape(128, 1)
    idx[[5, 77], 0] = [200, -1]
    got = run(_gather_kernel(nisa.oob_mode.skip), table, idx)
    expect = table[np.clip(idx[:, 0], 0, 199)]
    expect[[5, 77]] = -1.0  # skipped rows keep what dst held
    np.testing.assert_array_equal(got, expect)


# --------------------------------------------------------------------------------------------
# dma_transpose
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("shape", "axes"), [((64, 96), None), ((64, 96), (1, 0)), ((4, 8, 16), (2, 1, 0)), ((2, 3, 4, 5), (3, 1, 2, 0))])
def test_dma_transpose_matches_numpy_transpose(shape: tuple[int, ...], axes: tuple[int, ...] | None) -> None:
    x = randn(shape, seed=5)
    expect = np.transpose(x, axes)

    def k(a: Any) -> Any:
        t = nl.ndarray(expect.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=a, axes=axes)
        return out_of(t, expect.shape, nl.float32)

    np.testing.assert_array_equal(run(k, x), expect)


# --------------------------------------------------------------------------------------------
# tensor_copy / memset / iota / affine_select
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("engine", "target"), [("vector", "trn1"), ("gpsimd", "trn2"), ("scalar", "trn2"), ("unknown", "trn3")])
def test_tensor_copy_casts_on_each_engine(engine: str, target: str) -> None:
    x = randn((64, 96), seed=6)
    trace = emu.Trace()

    def k(a: Any) -> Any:
        t = nl.load(a)
        b = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=b, src=t, engine=getattr(nisa.engine, engine))
        return out_of(b, a.shape, nl.bfloat16)

    np.testing.assert_array_equal(run(k, x, target=target, trace=trace), x.astype(BF16))
    (ins,) = [i for i in trace if i.op == "tensor_copy"]
    assert ins.engine == ("vector" if engine == "unknown" else engine)


def test_tensor_copy_keeps_the_0_2_dtype_keyword_as_an_output_rounding() -> None:
    x = randn((32, 64), seed=8)

    def k(a: Any, dtype: Any) -> Any:
        t = nl.load(a)
        b = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=b, src=t, dtype=dtype)  # nki-samples HEAD's matmul tutorial spells it so
        return out_of(b, a.shape, nl.float32)

    with pytest.warns(emu.NkiWarning, match=r"tensor_copy\(dtype=bfloat16\) is NKI 0\.2 API, removed in 0\.3: "
                      r"values are rounded to it, then stored as dst's float32"):
        got = run(lambda a: k(a, nl.bfloat16), x)
    assert got.dtype == np.float32 and not np.array_equal(got, x)
    np.testing.assert_array_equal(got, x.astype(BF16).astype(np.float32))
    with pytest.warns(emu.NkiWarning, match=r"tensor_copy\(dtype=float32\)"):
        np.testing.assert_array_equal(run(lambda a: k(a, nl.float32), x), x)


def test_tensor_copy_through_psum_and_reshaped_views() -> None:
    x = randn((32, 64), seed=7)

    def k(a: Any) -> Any:
        t = nl.load(a)
        p = nl.ndarray((32, 64), nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=t)
        s = nl.ndarray((32, 2, 32), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=p)  # same partitions and elements per partition, different free shape
        return out_of(s, (32, 2, 32), nl.float32)

    np.testing.assert_array_equal(run(k, x), x.reshape(32, 2, 32))


@pytest.mark.parametrize(
    ("dtype", "value", "expect"),
    [(np.float32, 1.5, 1.5), (BF16, 1.00390625, 1.0), (np.int32, 7, 7), (np.uint8, 255, 255), (np.float16, -2.0, -2.0)],
)
def test_memset_fills_with_dst_rounding(dtype: Any, value: Any, expect: float) -> None:
    def k() -> Any:
        t = nl.ndarray((16, 10), dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=value)
        return out_of(t, (16, 10), dtype)

    got = run(k)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, np.full((16, 10), expect, dtype=dtype))


def test_memset_on_a_psum_view_leaves_the_rest_untouched() -> None:
    def k() -> Any:
        p = nl.ndarray((8, 16), nl.float32, buffer=nl.psum)
        nisa.memset(dst=p, value=0.0)
        nisa.memset(dst=p[:, 4:8], value=3.0, engine=nisa.engine.vector)
        s = nl.ndarray((8, 16), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=p)
        return out_of(s, (8, 16), nl.float32)

    expect = np.zeros((8, 16), np.float32)
    expect[:, 4:8] = 3.0
    np.testing.assert_array_equal(run(k), expect)


@pytest.mark.parametrize(("dtype", "value"), [(np.float32, -1.5), (BF16, 0.1)])
def test_a_memset_tile_added_into_slice_by_slice_reads_its_value_where_nothing_else_wrote(dtype: Any, value: float) -> None:
    x = randn((32, 64), seed=3)

    def k(x: Any) -> Any:
        t = nl.ndarray((32, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        acc = nl.ndarray((32, 4, 64), dtype, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=5.0)
        nisa.tensor_tensor(dst=acc[:, 1, :], data1=acc[:, 1, :], data2=t, op=nl.add)  # overwritten by the next memset
        nisa.memset(dst=acc, value=value)
        for i in (0, 2):
            nisa.tensor_tensor(dst=acc[:, i, :], data1=acc[:, i, :], data2=t, op=nl.add)
        nisa.tensor_tensor(dst=acc[:, 2, :], data1=t, data2=acc[:, 2, :], op=nl.multiply)
        return out_of(acc, (32, 4, 64), dtype)

    v = np.float32(np.asarray(value, dtype=dtype))
    added = (v + x).astype(dtype).astype(np.float32)
    expect = np.stack([added, np.full_like(x, v), (x * added).astype(dtype).astype(np.float32), np.full_like(x, v)], axis=1)
    np.testing.assert_array_equal(run(k, x).astype(np.float32), expect)


def test_scalar_ops_and_reductions_read_a_memset_tile_where_nothing_else_wrote() -> None:
    def k(x: Any) -> Any:
        t = nl.ndarray((32, 2, 64), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=2.0)
        nisa.dma_copy(dst=t[:, 0, :], src=x)
        out = nl.ndarray((32, 3, 64), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=out[:, 0, :], data=t[:, 1, :], op0=nl.multiply, operand0=3.0)
        nisa.tensor_scalar(dst=out[:, 1, :], data=t[:, 0, :], op0=nl.multiply, operand0=3.0)
        nisa.tensor_reduce(dst=out[:, 2, 0:1], op=nl.add, data=t[:, 1, :], axis=1)
        nisa.tensor_reduce(dst=out[:, 2, 1:2], op=nl.add, data=t, axis=(1, 2))
        return out_of(out, (32, 3, 64), nl.float32)

    x = randn((32, 64), seed=4)
    got = run(k, x)
    np.testing.assert_array_equal(got[:, 0], np.full((32, 64), 6.0, np.float32))
    np.testing.assert_array_equal(got[:, 1], x * 3)
    np.testing.assert_array_equal(got[:, 2, 0], np.full(32, 128.0, np.float32))
    np.testing.assert_allclose(got[:, 2, 1], x.sum(axis=1) + 128.0, rtol=1e-5)


def test_adding_into_a_tile_never_written_reads_the_uninitialized_pattern() -> None:
    def k(x: Any) -> Any:
        t = nl.ndarray((32, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        acc = nl.ndarray((32, 2, 64), nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=acc[:, 0, :], data1=acc[:, 0, :], data2=t, op=nl.add)
        return out_of(acc, (32, 2, 64), nl.float32)

    assert np.isnan(run(k, randn((32, 64)))).all()


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_iota_writes_the_affine_pattern(dtype: Any) -> None:
    def k() -> Any:
        t = nl.ndarray((6, 3, 4), dtype, buffer=nl.sbuf)
        nisa.iota(t, [[-10, 3], [2, 4]], offset=5, channel_multiplier=100)
        return out_of(t, (6, 3, 4), dtype)

    p, i, j = np.meshgrid(np.arange(6), np.arange(3), np.arange(4), indexing="ij")
    np.testing.assert_array_equal(run(k), (5 + 100 * p - 10 * i + 2 * j).astype(dtype))


@pytest.mark.parametrize(
    ("cmp_name", "np_cmp"), [("greater_equal", np.greater_equal), ("equal", np.equal), ("less", np.less), ("not_equal", np.not_equal)]
)
def test_affine_select_keeps_on_true_where_the_predicate_holds(cmp_name: str, np_cmp: Any) -> None:
    x = randn((16, 16), seed=8)

    def k(a: Any) -> Any:
        r = nl.ndarray((16, 16), nl.float32, buffer=nl.sbuf)
        nisa.affine_select(r, [[-1, 16]], 1, nl.load(a), -9.0, cmp_op=getattr(nl, cmp_name), offset=2)
        return out_of(r, (16, 16), nl.float32)

    p, f = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    np.testing.assert_array_equal(run(k, x), np.where(np_cmp(2 + p - f, 0), x, np.float32(-9.0)))


# --------------------------------------------------------------------------------------------
# tensor_tensor
# --------------------------------------------------------------------------------------------
def _ref_arith(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    table: dict[str, Callable[[], np.ndarray]] = {
        "add": lambda: a64 + b64,
        "subtract": lambda: a64 - b64,
        "multiply": lambda: a64 * b64,
        "maximum": lambda: np.maximum(a64, b64),
        "minimum": lambda: np.minimum(a64, b64),
        "abs_max": lambda: np.maximum(np.abs(a64), np.abs(b64)),
        "abs_min": lambda: np.minimum(np.abs(a64), np.abs(b64)),
        "power": lambda: np.abs(a64) ** b64,
        "equal": lambda: (a64 == b64) * 1.0,
        "not_equal": lambda: (a64 != b64) * 1.0,
        "greater": lambda: (a64 > b64) * 1.0,
        "greater_equal": lambda: (a64 >= b64) * 1.0,
        "less": lambda: (a64 < b64) * 1.0,
        "less_equal": lambda: (a64 <= b64) * 1.0,
        "logical_and": lambda: ((a64 != 0) & (b64 != 0)) * 1.0,
        "logical_or": lambda: ((a64 != 0) | (b64 != 0)) * 1.0,
        "logical_xor": lambda: ((a64 != 0) ^ (b64 != 0)) * 1.0,
    }
    return table[name]()


#: (divide, mod and fmod are in the table for numbers and the 0.1 front-end's lowering; ISA ops refuse them, see test_not_on_hardware)
_ARITH = sorted(n for n, op in alu.ALU.items() if op.kind != "bitvec" and n not in alu.NOT_ON_HARDWARE)
_BITVEC = sorted(n for n, op in alu.ALU.items() if op.kind == "bitvec")


def test_every_alu_op_has_a_reference_here() -> None:
    assert set(_ARITH) == {
        "add", "subtract", "multiply", "maximum", "minimum", "abs_max", "abs_min", "power",
        "equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_and", "logical_or", "logical_xor",
    }  # fmt: skip
    assert set(alu.NOT_ON_HARDWARE) == {"divide", "fmod", "mod"}
    assert set(_BITVEC) == {"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"}


@pytest.mark.parametrize("name", _ARITH)
def test_tensor_tensor_arithmetic_compare_and_logical_ops(name: str) -> None:
    rng = np.random.default_rng(9)
    a = (rng.integers(-4, 5, (32, 48)) + 0.5 * rng.integers(0, 2, (32, 48))).astype(np.float32)
    b = rng.integers(-4, 5, (32, 48)).astype(np.float32)
    a[:, :4] = 0.0  # zeros exercise the logical ops
    b[:, :2] = 0.0 if name.startswith("logical") else b[:, :2]
    b[:, 2:4] = a[:, 2:4] if name in ("equal", "not_equal", "greater_equal", "less_equal") else b[:, 2:4]
    if name == "power":
        a = np.abs(a) + np.float32(0.25)
    trace = emu.Trace()

    def k(x: Any, y: Any) -> Any:
        r = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=r, data1=nl.load(x), data2=nl.load(y), op=getattr(nl, name))
        return out_of(r, x.shape, nl.float32)

    got = run(k, a, b, trace=trace)
    np.testing.assert_allclose(got, _ref_arith(name, a, b).astype(np.float32), rtol=1e-6, atol=1e-6)
    (ins,) = [i for i in trace if i.op == "tensor_tensor"]
    assert ins.attrs["alu"] == name
    assert ins.engine == ("gpsimd" if name == "power" else "vector")


# A logical right shift of a negative narrow int depends on the width it is done in; int16 skips it.
_BITVEC_CASES = [(n, d) for n in _BITVEC for d in (np.int32, np.uint32, np.int16, np.uint8) if (n, d) != ("right_shift", np.int16)]


@pytest.mark.parametrize(("name", "dtype"), _BITVEC_CASES)
def test_tensor_tensor_bitwise_ops_on_integers(name: str, dtype: Any) -> None:
    rng = np.random.default_rng(10)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (16, 32), endpoint=True).astype(dtype)
    bits = 8 * np.dtype(dtype).itemsize
    b = rng.integers(0, bits, (16, 32)).astype(dtype) if "shift" in name else rng.integers(info.min, info.max, (16, 32)).astype(dtype)

    def k(x: Any, y: Any) -> Any:
        r = nl.ndarray(x.shape, dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=r, data1=nl.load(x), data2=nl.load(y), op=getattr(nl, name))
        return out_of(r, x.shape, dtype)

    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    ref = {
        "bitwise_and": lambda: a64 & b64,
        "bitwise_or": lambda: a64 | b64,
        "bitwise_xor": lambda: a64 ^ b64,
        "left_shift": lambda: a64 << b64,
        "right_shift": lambda: (a64 & 0xFFFFFFFF) >> b64,  # logical: zeros shift in, also for negative int32
    }[name]()
    np.testing.assert_array_equal(run(k, a, b), ref.astype(dtype))


def test_tensor_tensor_right_shift_is_logical_on_negative_int32() -> None:
    def k(x: Any, y: Any) -> Any:
        r = nl.ndarray(x.shape, nl.int32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=r, data1=nl.load(x), data2=nl.load(y), op=nl.right_shift)
        return out_of(r, x.shape, nl.int32)

    got = run(k, np.full((2, 2), -8, np.int32), np.ones((2, 2), np.int32))
    np.testing.assert_array_equal(got, np.full((2, 2), 0x7FFFFFFC, np.int32))


def test_tensor_tensor_int32_add_defaults_to_gpsimd_and_reads_psum_plus_sbuf() -> None:
    trace = emu.Trace()
    a, b = np.arange(64, dtype=np.int32).reshape(8, 8), np.full((8, 8), 3, np.int32)

    def k(x: Any, y: Any) -> Any:
        r = nl.ndarray(x.shape, nl.int32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=r, data1=nl.load(x), data2=nl.load(y), op=nl.add)
        f = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=f, src=r)
        p = nl.ndarray(x.shape, nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=f)
        s = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=s, data1=p, data2=f, op=nl.multiply)  # PSUM + SBUF is legal
        return out_of(s, x.shape, nl.float32)

    np.testing.assert_array_equal(run(k, a, b, trace=trace), ((a + b) ** 2).astype(np.float32))
    assert [i.engine for i in trace if i.op == "tensor_tensor"] == ["gpsimd", "vector"]


def test_tensor_tensor_writes_bf16_dst_with_rounding() -> None:
    a, b = randn((16, 16), seed=11), randn((16, 16), seed=12)

    def k(x: Any, y: Any) -> Any:
        r = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=r, data1=nl.load(x), data2=nl.load(y), op=nl.add)
        return out_of(r, x.shape, nl.bfloat16)

    np.testing.assert_array_equal(run(k, a, b), (a + b).astype(BF16))


# --------------------------------------------------------------------------------------------
# tensor_scalar / scalar_tensor_tensor
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("column", [False, True])
@pytest.mark.parametrize("reverse0", [False, True])
@pytest.mark.parametrize("reverse1", [False, True])
def test_tensor_scalar_two_ops_with_scalar_or_column_operands(column: bool, reverse0: bool, reverse1: bool) -> None:
    x = randn((32, 24), seed=13)
    col = randn((32, 1), seed=14)

    def k(a: Any, c: Any) -> Any:
        r = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        operand0 = nl.load(c) if column else 1.5
        nisa.tensor_scalar(
            dst=r, data=nl.load(a), op0=nl.subtract, operand0=operand0, reverse0=reverse0, op1=nl.subtract, operand1=4.0, reverse1=reverse1
        )
        return out_of(r, a.shape, nl.float32)

    s0 = col if column else np.float32(1.5)
    step0 = (s0 - x) if reverse0 else (x - s0)
    expect = (np.float32(4.0) - step0) if reverse1 else (step0 - np.float32(4.0))
    np.testing.assert_allclose(run(k, x, col), expect, rtol=1e-6)


def test_tensor_scalar_single_op_and_column_second_operand() -> None:
    x = randn((16, 8), seed=15)
    col = randn((16, 1), seed=16)

    def k(a: Any, c: Any) -> Any:
        r = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(r, nl.load(a), nl.maximum, 0.0)
        r2 = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(r2, r, nl.multiply, 2.0, op1=nl.add, operand1=nl.load(c))
        return out_of(r2, a.shape, nl.float32)

    np.testing.assert_allclose(run(k, x, col), np.maximum(x, 0) * 2 + col, rtol=1e-6)


def test_tensor_scalar_bitwise_ops_on_int_tiles() -> None:
    x = np.random.default_rng(17).integers(0, 2**16, (8, 8)).astype(np.int32)

    def k(a: Any) -> Any:
        r = nl.ndarray(a.shape, nl.int32, buffer=nl.sbuf)
        nisa.tensor_scalar(r, nl.load(a), nl.bitwise_and, 0xFF, op1=nl.left_shift, operand1=4)
        return out_of(r, a.shape, nl.int32)

    np.testing.assert_array_equal(run(k, x), (x & 0xFF) << 4)


@pytest.mark.parametrize("reverse0", [False, True])
@pytest.mark.parametrize("reverse1", [False, True])
@pytest.mark.parametrize("column", [False, True])
def test_scalar_tensor_tensor(reverse0: bool, reverse1: bool, column: bool) -> None:
    x, y = randn((32, 16), seed=18), randn((32, 16), seed=19)
    col = randn((32, 1), seed=20)

    def k(a: Any, b: Any, c: Any) -> Any:
        r = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        operand0 = nl.load(c) if column else -0.75
        nisa.scalar_tensor_tensor(
            dst=r,
            data=nl.load(a),
            op0=nl.subtract,
            operand0=operand0,
            op1=nl.subtract,
            operand1=nl.load(b),
            reverse0=reverse0,
            reverse1=reverse1,
        )
        return out_of(r, a.shape, nl.float32)

    s0 = col if column else np.float32(-0.75)
    step0 = (s0 - x) if reverse0 else (x - s0)
    expect = (y - step0) if reverse1 else (step0 - y)
    np.testing.assert_allclose(run(k, x, y, col), expect, rtol=1e-6)


# --------------------------------------------------------------------------------------------
# activation / activation_reduce
# --------------------------------------------------------------------------------------------
def _sig(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


#: name → (reference on float64, input range inside the function's valid range)
_ACT_REF: dict[str, tuple[Callable[[np.ndarray], np.ndarray], tuple[float, float]]] = {
    "copy": (lambda z: z, (-3, 3)),
    "identity": (lambda z: z, (-3, 3)),
    "square": (lambda z: z * z, (-3, 3)),
    "sigmoid": (_sig, (-3, 3)),
    "relu": (lambda z: np.maximum(z, 0), (-3, 3)),
    "gelu": (lambda z: 0.5 * z * (1 + _erf(z / math.sqrt(2))), (-3, 3)),
    "gelu_dx": (lambda z: 0.5 * (1 + _erf(z / math.sqrt(2))) + z * np.exp(-z * z / 2) / math.sqrt(2 * math.pi), (-3, 3)),
    "gelu_apprx_tanh": (lambda z: 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3))), (-3, 3)),
    "gelu_apprx_sigmoid": (lambda z: z * _sig(1.702 * z), (-3, 3)),
    "gelu_apprx_sigmoid_dx": (lambda z: _sig(1.702 * z) + 1.702 * z * _sig(1.702 * z) * (1 - _sig(1.702 * z)), (-3, 3)),
    "silu": (lambda z: z * _sig(z), (-3, 3)),
    "silu_dx": (lambda z: _sig(z) + z * _sig(z) * (1 - _sig(z)), (-3, 3)),
    "tanh": (np.tanh, (-3, 3)),
    "softplus": (lambda z: np.log1p(np.exp(z)), (-3, 3)),
    "mish": (lambda z: z * np.tanh(np.log1p(np.exp(z))), (-3, 3)),
    "erf": (_erf, (-3, 3)),
    "erf_dx": (lambda z: 2 / math.sqrt(math.pi) * np.exp(-z * z), (-3, 3)),
    "exp": (np.exp, (-3, 3)),
    "sign": (np.sign, (-3, 3)),
    "abs": (np.abs, (-3, 3)),
    "negative": (np.negative, (-3, 3)),
    "log": (np.log, (0.1, 10)),
    "sin": (np.sin, (-3, 3)),
    "cos": (np.cos, (-3, 3)),
    "tan": (np.tan, (-1.2, 1.2)),
    "arctan": (np.arctan, (-1.5, 1.5)),
    "sqrt": (np.sqrt, (0.1, 10)),
    "rsqrt": (lambda z: 1 / np.sqrt(z), (0.1, 10)),
    "reciprocal": (lambda z: 1 / z, (0.5, 4)),
    "floor": (np.floor, (-3, 3)),
    "ceil": (np.ceil, (-3, 3)),
    "trunc": (np.trunc, (-3, 3)),
    "logical_not": (lambda z: (z == 0) * 1.0, (-3, 3)),
}


def test_every_activation_function_has_a_reference_here() -> None:
    assert set(alu.ACT) == set(_ACT_REF)


@pytest.mark.parametrize("vector_scale", [False, True])
@pytest.mark.parametrize("name", sorted(alu.ACT))
def test_activation_function_with_scale_bias_and_reduce(name: str, vector_scale: bool) -> None:
    ref, (lo, hi) = _ACT_REF[name]
    p, f = 32, 40
    bias = uniform((p, 1), -0.05, 0.05, seed=21)
    scale = uniform((p, 1), 0.5, 2.0, seed=22) if vector_scale else np.full((p, 1), 0.5, np.float32)
    target = uniform((p, f), lo + 0.06, hi - 0.06, seed=23)
    x = ((target - bias) / scale).astype(np.float32)
    if name in ("logical_not", "sign"):
        x[:4, :5], bias[:4] = 0.0, 0.0  # inputs whose scaled, biased value is exactly zero
    z = x * scale + bias  # what ScalarE sees, in fp32
    expect = ref(z.astype(np.float64))
    op = name if name == "identity" else getattr(nl, name)  # nl has no `identity`; ACT accepts the name

    def k(a: Any, b: Any, s: Any) -> Any:
        r = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
        rr = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(
            dst=r, op=op, data=nl.load(a), bias=nl.load(b), scale=nl.load(s) if vector_scale else 0.5, reduce_op=nl.add, reduce_res=rr
        )
        return out_of(r, (p, f), nl.float32), out_of(rr, (p, 1), nl.float32)

    with warnings.catch_warnings():
        warnings.simplefilter("error", emu.NkiWarning)  # inputs are inside every valid range
        got, total = run(k, x, bias, scale)
    np.testing.assert_allclose(got, expect, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(total[:, 0], got.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_activation_writes_bf16_dst_and_reads_psum() -> None:
    x = randn((16, 32), seed=24)

    def k(a: Any) -> Any:
        p = nl.ndarray(a.shape, nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=nl.load(a))
        r = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.sbuf)
        nisa.activation(dst=r, op=nl.exp, data=p, scale=2.0)
        return out_of(r, a.shape, nl.bfloat16)

    np.testing.assert_array_equal(run(k, x), np.exp(np.float32(2.0) * x).astype(BF16))


def test_activation_reduce_sums_rows_of_the_result() -> None:
    x = randn((64, 100), seed=25)
    bias = randn((64, 1), seed=26)
    trace = emu.Trace()

    def k(a: Any, b: Any) -> Any:
        r = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        rr = nl.ndarray((64, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=r, op=nl.tanh, data=nl.load(a), reduce_op=nl.add, reduce_res=rr, bias=nl.load(b), scale=0.25)
        return out_of(r, a.shape, nl.float32), out_of(rr, (64, 1), nl.float32)

    got, total = run(k, x, bias, trace=trace)
    np.testing.assert_allclose(got, np.tanh(x * np.float32(0.25) + bias), rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(total, np.tanh(x * np.float32(0.25) + bias).sum(axis=1, keepdims=True), rtol=1e-5)
    (ins,) = [i for i in trace if i.op == "activation_reduce"]
    assert ins.engine == "scalar"
    assert [w.role for w in ins.writes] == ["dst", "reduce_res"]


# --------------------------------------------------------------------------------------------
# tensor_reduce / tensor_partition_reduce / reciprocal
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [3, -1, (2, 3), (1, 2, 3)])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("negate", [False, True])
@pytest.mark.parametrize(("name", "np_reduce"), [("add", np.sum), ("maximum", np.max), ("minimum", np.min), ("multiply", np.prod)])
def test_tensor_reduce_over_trailing_axes(axis: Any, keepdims: bool, negate: bool, name: str, np_reduce: Any) -> None:
    x = uniform((8, 3, 4, 5), 0.5, 1.5, seed=27)
    expect = np_reduce(x.astype(np.float64), axis=axis, keepdims=keepdims)
    expect = -expect if negate else expect
    shape = expect.shape if expect.ndim >= 2 else (8, 1)

    def k(a: Any) -> Any:
        r = nl.ndarray(shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=r, op=getattr(nl, name), data=nl.load(a), axis=axis, negate=negate, keepdims=keepdims)
        return out_of(r, shape, nl.float32)

    np.testing.assert_allclose(run(k, x), expect.reshape(shape), rtol=1e-5)


def test_tensor_reduce_bitwise_or_on_ints_and_psum_input() -> None:
    x = np.random.default_rng(28).integers(0, 2**20, (16, 12)).astype(np.int32)
    y = randn((16, 12), seed=29)

    def k(a: Any, b: Any) -> Any:
        r = nl.ndarray((16, 1), nl.int32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=r, op=nl.bitwise_or, data=nl.load(a), axis=1)
        p = nl.ndarray(b.shape, nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=nl.load(b))
        m = nl.ndarray((16, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=m, op=nl.maximum, data=p, axis=(1,))
        return out_of(r, (16, 1), nl.int32), out_of(m, (16, 1), nl.float32)

    bits, mx = run(k, x, y)
    np.testing.assert_array_equal(bits[:, 0], np.bitwise_or.reduce(x, axis=1))
    np.testing.assert_array_equal(mx[:, 0], y.max(axis=1))


@pytest.mark.parametrize(("name", "np_reduce"), [("add", np.sum), ("maximum", np.max), ("minimum", np.min)])
def test_tensor_partition_reduce_reduces_across_partitions(name: str, np_reduce: Any) -> None:
    x = randn((64, 40), seed=30)
    trace = emu.Trace()

    def k(a: Any) -> Any:
        r = nl.ndarray((1, 40), nl.float32, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(dst=r, op=getattr(nl, name), data=nl.load(a))
        return out_of(r, (1, 40), nl.float32)

    np.testing.assert_allclose(run(k, x, trace=trace), np_reduce(x, axis=0, keepdims=True), rtol=1e-5, atol=1e-6)
    assert [i.engine for i in trace if i.op == "tensor_partition_reduce"] == ["gpsimd"]


def test_reciprocal_on_vector_engine_in_fp32() -> None:
    x = randn((32, 32), seed=31)
    x[0, 0] = 0.0
    trace = emu.Trace()

    def k(a: Any) -> Any:
        r = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=r, data=nl.load(a))
        return out_of(r, a.shape, nl.float32)

    with np.errstate(divide="ignore"):
        expect = np.float32(1.0) / x
    np.testing.assert_array_equal(run(k, x, trace=trace), expect)
    assert [i.engine for i in trace if i.op == "reciprocal"] == ["vector"]


# --------------------------------------------------------------------------------------------
# nc_matmul / nc_transpose / get_nc_version
# --------------------------------------------------------------------------------------------
def _matmul_kernel(k_dim: int, m: int, n: int, calls: list[Any]) -> Callable[..., Any]:
    """A kernel running the matmul calls in ``calls``: each item is an accumulate value, or "read" (a PSUM read)."""

    def k(a: Any, b: Any) -> Any:
        ta, tb = nl.load(a), nl.load(b)
        p = nl.ndarray((m, n), nl.float32, buffer=nl.psum)
        s = nl.ndarray((m, n), nl.float32, buffer=nl.sbuf)
        for c in calls:
            if c == "read":
                nisa.tensor_copy(dst=s, src=p)
            else:
                nisa.nc_matmul(p, ta, tb, accumulate=c)
        nisa.tensor_copy(dst=s, src=p)
        return out_of(s, (m, n), nl.float32)

    return k


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.float16])
def test_nc_matmul_contracts_over_partitions(dtype: Any) -> None:
    a, b = randn((128, 96), seed=32, dtype=dtype), randn((128, 512), seed=33, dtype=dtype)
    expect = a.astype(np.float64).T @ b.astype(np.float64)
    np.testing.assert_allclose(run(_matmul_kernel(128, 96, 512, [None]), a, b), expect, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("calls", "factor"),
    [
        ([None], 1),
        ([None, None, None], 3),  # accumulation continues while no other instruction reads the PSUM
        ([None, None, "read", None], 1),  # a non-matmul read closes the group: the next write overwrites
        ([None, None, "read", None, True], 2),
        ([None, None, False], 1),  # accumulate=False always overwrites
        ([None, True, True], 3),
        ([None, "read", True], 2),  # accumulate=True adds onto what PSUM holds
    ],
)
def test_nc_matmul_accumulate_semantics(calls: list[Any], factor: int) -> None:
    a, b = randn((64, 32), seed=34), randn((64, 128), seed=35)
    expect = factor * (a.astype(np.float64).T @ b.astype(np.float64))
    np.testing.assert_allclose(run(_matmul_kernel(64, 32, 128, calls), a, b), expect, rtol=1e-4, atol=1e-4)


def _tile_product(out: Any, blk: Any, mv: Any, c: int, d: int, cols: slice) -> None:
    """``out``'s ``(c, d)`` 128 × 128 tile = Σₖ ``blk[:, k, c-th 128 columns]ᵀ · mv[:, k, cols]``,
    accumulated in PSUM over two K tiles and stored through SBUF (the tutorial's inner step)."""
    p = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
    for kt in nl.affine_range(2):
        nisa.nc_matmul(dst=p, stationary=blk[:, kt, c * 128 : (c + 1) * 128], moving=mv[:, kt, cols])
    s = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=p)
    nisa.dma_copy(dst=out[c * 128 : (c + 1) * 128, d * 128 : (d + 1) * 128], src=s)


@pytest.mark.parametrize("rewrite", ["nothing", "both", "stationary", "moving", "source"])
def test_nc_matmul_column_slices_of_one_block_match_numpy(rewrite: str) -> None:
    """Column slices of one stationary block times column slices of one moving block (the tutorial
    pattern the emulator lands as wide GEMMs, sharing the stacked stationary block between moving
    slices); rewriting either block midway must be seen. The blocks are fp32 rows of the inputs,
    multiplied straight from them while their loads are pending: overwriting the input the
    stationary block came from must not change the block."""
    a, b = randn((256, 512), seed=40), randn((256, 256), seed=41)
    a_old = a.copy()

    def k(x: Any, y: Any) -> Any:
        blk = nl.ndarray((128, 2, 512), nl.float32, buffer=nl.sbuf)
        mv = nl.ndarray((128, 2, 256), nl.float32, buffer=nl.sbuf)
        for kt in nl.affine_range(2):
            nisa.dma_copy(dst=blk[:, kt, :], src=x[kt * 128 : (kt + 1) * 128, :])
            nisa.dma_copy(dst=mv[:, kt, :], src=y[kt * 128 : (kt + 1) * 128, :])
        out = nl.ndarray((512, 256), nl.float32, buffer=nl.shared_hbm)
        for d in nl.sequential_range(2):
            for c in nl.sequential_range(4):
                if d == 1 and c == 0 and rewrite == "source":
                    zeros = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
                    nisa.memset(dst=zeros, value=0.0)
                    nisa.dma_copy(dst=x[0:128, :], src=zeros)
                if d == 1 and c == 2 and rewrite in ("both", "stationary"):
                    nisa.activation(dst=blk[:, 0, :], op=nl.copy, data=blk[:, 0, :], scale=2.0)
                if d == 1 and c == 2 and rewrite in ("both", "moving"):
                    nisa.activation(dst=mv[:, 1, :], op=nl.copy, data=mv[:, 1, :], scale=3.0)
                _tile_product(out, blk, mv, c, d, slice(d * 128, (d + 1) * 128))
        return out

    a64, b64 = a_old.astype(np.float64), b.astype(np.float64)
    expect = a64.T @ b64
    a2, b2 = a64.copy(), b64.copy()
    if rewrite in ("both", "stationary"):
        a2[:128] *= 2.0
    if rewrite in ("both", "moving"):
        b2[128:] *= 3.0
    expect[256:, 128:] = (a2.T @ b2)[256:, 128:]
    np.testing.assert_allclose(run(k, a, b), expect, rtol=1e-4, atol=1e-4)
    assert (a[:128] == 0).all() == (rewrite == "source")


def test_nc_matmul_operands_loaded_by_dma_hold_the_numbers_of_the_load() -> None:
    """Matmuls read loaded tiles straight from the DMA's source while the copy is pending: a later
    DMA over part of a tile, and a store into the source after the load, must both be seen right."""
    x, y, z = randn((128, 256), seed=50), randn((64, 128), seed=51), randn((128, 128), seed=52)
    x_old = x.copy()

    def k(x: Any, y: Any, z: Any) -> Any:
        first = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=first, src=x[:, 0:128])
        second = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=second, src=x[:, 128:256])
        nisa.dma_copy(dst=second[0:64, :], src=y)  # later, over the first partitions of that load
        mv = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=mv, src=z)
        out = nl.ndarray((3, 128, 64), nl.float32, buffer=nl.shared_hbm)

        def product(i: int, st: Any, m: Any) -> None:
            p = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=p, stationary=st, moving=m)
            s = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=s, src=p)
            nisa.dma_copy(dst=out[i], src=s)

        product(1, second, mv[:, 0:64])  # while all four loads are pending
        sevens = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=sevens, value=7.0)
        nisa.dma_copy(dst=x[:, 0:128], src=sevens)  # the source of `first` changes after its load
        product(0, first, mv[:, 0:64])
        product(2, first, mv[:, 64:128])
        return out

    got = run(k, x, y, z)
    st0, st1 = x_old[:, :128].astype(np.float64), np.concatenate([y, x_old[64:, 128:]]).astype(np.float64)
    z64 = z.astype(np.float64)
    expect = np.stack([st0.T @ z64[:, :64], st1.T @ z64[:, :64], st0.T @ z64[:, 64:]])
    np.testing.assert_allclose(got, expect, rtol=1e-4, atol=1e-4)
    assert (x[:, :128] == 7.0).all()  # the kernel's store into its input reached the caller's array


@pytest.mark.parametrize("rewrite", [False, True])
def test_nc_matmul_stationary_reloaded_per_stripe_sees_a_rewritten_input(rewrite: bool) -> None:
    """The tutorial's fully optimized loop loads the same bf16 input rows into a fresh stationary
    block for every output stripe, and the emulator converts those rows once for all stripes.
    An input the kernel overwrites between stripes must be read anew by the next stripe."""
    bf16 = ml_dtypes.bfloat16
    a, b = randn((256, 256), seed=46, dtype=bf16), randn((256, 256), seed=47, dtype=bf16)
    a_old = a.copy()

    def k(x: Any, y: Any) -> Any:
        out = nl.ndarray((256, 256), nl.float32, buffer=nl.shared_hbm)
        for d in nl.sequential_range(2):
            if d == 1 and rewrite:
                halves = nl.ndarray((128, 256), nl.bfloat16, buffer=nl.sbuf)
                nisa.memset(dst=halves, value=0.5)
                nisa.dma_copy(dst=x[0:128, :], src=halves)
            blk = nl.ndarray((128, 2, 256), nl.bfloat16, buffer=nl.sbuf)
            mv = nl.ndarray((128, 2, 128), nl.bfloat16, buffer=nl.sbuf)
            for kt in nl.affine_range(2):
                nisa.dma_copy(dst=blk[:, kt, :], src=x[kt * 128 : (kt + 1) * 128, :])
                nisa.dma_copy(dst=mv[:, kt, :], src=y[kt * 128 : (kt + 1) * 128, d * 128 : (d + 1) * 128])
            for c in nl.affine_range(2):
                _tile_product(out, blk, mv, c, d, slice(None))
        return out

    a64, b64 = a_old.astype(np.float64), b.astype(np.float64)
    expect = a64.T @ b64
    if rewrite:
        a64[:128] = 0.5
        expect[:, 128:] = (a64.T @ b64)[:, 128:]
    np.testing.assert_allclose(run(k, a, b), expect, rtol=1e-4, atol=1e-4)


def test_nc_matmul_product_rows_that_became_a_psum_tile_are_not_served_again() -> None:
    """A first matmul write of a whole PSUM tile takes the rows of a wide product as the tile's
    storage. Once the tile is changed in place (here scaled, then accumulated into), later groups
    asking for those rows, or for a slice overlapping them, must still get the plain product."""
    a, b = randn((128, 256), seed=44), randn((128, 64), seed=45)
    starts = [0, 128, 128, 64, 0]

    def k(x: Any, y: Any) -> Any:
        blk, mv = nl.load(x), nl.load(y)
        out = nl.ndarray((len(starts), 128, 64), nl.float32, buffer=nl.shared_hbm)
        tiles = [nl.ndarray((128, 64), nl.float32, buffer=nl.psum) for _ in starts]
        for i, c in enumerate(starts):
            nisa.nc_matmul(dst=tiles[i], stationary=blk[:, c : c + 128], moving=mv)
            if i == 1:  # changes rows 128:256 of the wide product in place …
                nisa.tensor_scalar(dst=tiles[1], data=tiles[1], op0=nl.multiply, operand0=2.0)
                nisa.nc_matmul(dst=tiles[1], stationary=blk[:, 128:256], moving=mv, accumulate=True)
        for i in range(len(starts)):  # … which tiles 2 and 3 ask for again
            s = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=s, src=tiles[i])
            nisa.dma_copy(dst=out[i], src=s)
        return out

    ref = a.astype(np.float64).T @ b.astype(np.float64)
    expect = np.stack([ref[c : c + 128] for c in starts])
    expect[1] *= 3
    np.testing.assert_allclose(run(k, a, b), expect, rtol=1e-4, atol=1e-4)


def test_nc_matmul_first_write_overwrites_psum_initialized_by_memset() -> None:
    a, b = randn((32, 16), seed=36), randn((32, 64), seed=37)

    def k(x: Any, y: Any) -> Any:
        p = nl.zeros((16, 64), nl.float32, buffer=nl.psum)
        nisa.memset(p, 5.0)
        nisa.nc_matmul(p, nl.load(x), nl.load(y))
        s = nl.ndarray((16, 64), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=p)
        return out_of(s, (16, 64), nl.float32)

    np.testing.assert_allclose(run(k, a, b), a.T @ b, rtol=1e-5, atol=1e-5)


def test_nc_matmul_a_read_of_half_the_tile_closes_only_that_half() -> None:
    a, b = randn((32, 16), seed=38), randn((32, 64), seed=39)

    def k(x: Any, y: Any) -> Any:
        tx, ty = nl.load(x), nl.load(y)
        p = nl.ndarray((16, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(p, tx, ty)
        nisa.nc_matmul(p, tx, ty)
        half = nl.ndarray((16, 32), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=half, src=p[:, 0:32])
        nisa.nc_matmul(p, tx, ty)
        s = nl.ndarray((16, 64), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=p)
        return out_of(s, (16, 64), nl.float32)

    ref = a.astype(np.float64).T @ b.astype(np.float64)
    got = run(k, a, b)
    np.testing.assert_allclose(got[:, :32], ref[:, :32], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[:, 32:], 3 * ref[:, 32:], rtol=1e-5, atol=1e-5)


def test_nc_matmul_accumulate_true_on_unwritten_psum_warns() -> None:
    a, b = randn((16, 8), seed=40), randn((16, 8), seed=41)
    with pytest.warns(emu.NkiWarning, match=r"nc_matmul\(accumulate=True\) into PSUM that was never written"):
        got = run(_matmul_kernel(16, 8, 8, [True]), a, b)
    assert np.isnan(got).all()  # uninitialized PSUM reads as NaN


def test_nc_matmul_into_separate_banks_of_one_psum_tile() -> None:
    a, b = randn((128, 64), seed=42), randn((128, 1024), seed=43)

    def k(x: Any, y: Any) -> Any:
        tx, ty = nl.load(x), nl.load(y)
        p = nl.ndarray((64, 1024), nl.float32, buffer=nl.psum)
        for j in nl.affine_range(2):
            nisa.nc_matmul(p[:, j * 512 : (j + 1) * 512], tx, ty[:, j * 512 : (j + 1) * 512])
        s = nl.ndarray((64, 1024), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=p)
        return out_of(s, (64, 1024), nl.float32)

    np.testing.assert_allclose(run(k, a, b), a.astype(np.float64).T @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_nc_matmul_trn3_bf16_dst_and_wide_moving() -> None:
    a, b = randn((64, 32), seed=44, dtype=BF16), randn((64, 2048), seed=45, dtype=BF16)

    def k(x: Any, y: Any) -> Any:
        p = nl.ndarray((32, 2048), nl.bfloat16, buffer=nl.psum)
        nisa.nc_matmul(p, nl.load(x), nl.load(y))
        s = nl.ndarray((32, 2048), nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=p)
        return out_of(s, (32, 2048), nl.bfloat16)

    expect = (a.astype(np.float32).T @ b.astype(np.float32)).astype(BF16)
    np.testing.assert_allclose(run(k, a, b, target="trn3").astype(np.float32), expect.astype(np.float32), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_nc_transpose_on_tensor_engine_into_psum(dtype: Any) -> None:
    x = randn((128, 96), seed=46, dtype=dtype)
    trace = emu.Trace()

    def k(a: Any) -> Any:
        p = nl.ndarray((96, 128), dtype, buffer=nl.psum)
        nisa.nc_transpose(p, nl.load(a))
        s = nl.ndarray((96, 128), dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=p)
        return out_of(s, (96, 128), dtype)

    np.testing.assert_array_equal(run(k, x, trace=trace), x.T)
    assert [i.engine for i in trace if i.op == "nc_transpose"] == ["tensor"]


def test_nc_transpose_on_vector_engine_sbuf_to_sbuf() -> None:
    x = randn((32, 20), seed=47)
    trace = emu.Trace()

    def k(a: Any) -> Any:
        s = nl.ndarray((20, 32), nl.float32, buffer=nl.sbuf)
        nisa.nc_transpose(s, nl.load(a), engine=nisa.engine.vector)
        return out_of(s, (20, 32), nl.float32)

    np.testing.assert_array_equal(run(k, x, trace=trace), x.T)
    assert [i.engine for i in trace if i.op == "nc_transpose"] == ["vector"]


@pytest.mark.parametrize(("target", "version"), [("trn1", 2), ("trn2", 3), ("trn3", 4)])
def test_get_nc_version_per_target(target: str, version: int) -> None:
    def k() -> Any:
        return nisa.get_nc_version()

    got = run(k, target=target)
    assert got == getattr(nisa.nc_version, f"gen{version}")
    assert int(got) == version
