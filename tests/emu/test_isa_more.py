"""Second-tier ISA ops (``nkiagent.emu.instructions``, formerly ``isa_more``): NumPy-checked semantics and hardware-rule errors.

Every kernel follows the 0.3+ calling convention: DMA the HBM inputs into SBUF, run the op,
DMA the result into a ``shared_hbm`` output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkiagent import emu
from nkiagent.emu import NkiError, NkiWarning

FP32_MIN = float(np.finfo(np.float32).min)
RNG = np.random.default_rng(1234)


# --------------------------------------------------------------------------------------------
# kernel helpers
# --------------------------------------------------------------------------------------------
def _sb(t: Any, dtype: Any = None) -> Any:
    """HBM tensor → a fresh SBUF tile."""
    s = nl.ndarray(t.shape, dtype=dtype or t.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=t)
    return s


def _tile(shape: tuple[int, ...], dtype: Any = nl.float32, buffer: Any = nl.sbuf) -> Any:
    return nl.ndarray(shape, dtype=dtype, buffer=buffer)


def _out(t: Any) -> Any:
    """SBUF tile → a fresh shared_hbm output."""
    o = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o, src=t)
    return o


def _run(kernel: Callable[..., Any], *args: Any, target: str = "trn2") -> Any:
    return nki.simulate(kernel, target=target)(*args)


def _fails(kernel: Callable[..., Any], args: tuple[Any, ...], code: str, text: str, target: str = "trn2") -> NkiError:
    with pytest.raises(NkiError) as info:
        _run(kernel, *args, target=target)
    assert info.value.code == code, info.value
    assert text in info.value.message, info.value.message
    return info.value


def _rand(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


# --------------------------------------------------------------------------------------------
# bn_stats / bn_aggr
# --------------------------------------------------------------------------------------------
def test_bn_stats_layout_even_then_odd() -> None:
    def k(a):
        st = _tile((a.shape[0], 6))
        nisa.bn_stats(dst=st, data=_sb(a))
        return _out(st)

    a = _rand(8, 7)
    got = _run(k, a)
    ev, od = a[:, 0::2], a[:, 1::2]
    want = np.stack(
        [
            np.full(8, 4.0),
            ev.mean(1),
            ((ev - ev.mean(1, keepdims=True)) ** 2).sum(1),
            np.full(8, 3.0),
            od.mean(1),
            ((od - od.mean(1, keepdims=True)) ** 2).sum(1),
        ],
        axis=1,
    )
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_bn_stats_tiles_aggregate_to_mean_and_variance() -> None:
    def k(a):
        x = _sb(a)
        st = _tile((128, 12))
        for i in range(2):
            nisa.bn_stats(dst=st[:, i * 6 : (i + 1) * 6], data=x[:, i * 512 : (i + 1) * 512])
        mv = _tile((128, 2))
        nisa.bn_aggr(dst=mv, data=st)
        return _out(mv)

    a = (RNG.random((128, 1024)) * 100).astype(np.float32)
    got = _run(k, a)
    np.testing.assert_allclose(got[:, 0], a.mean(1), rtol=1e-5)
    np.testing.assert_allclose(got[:, 1], a.var(1), rtol=1e-4)


def test_bn_stats_free_size_limit() -> None:
    def k(a):
        st = _tile((128, 6))
        nisa.bn_stats(dst=st, data=_sb(a))
        return _out(st)

    _fails(k, (_rand(128, 1024),), "err_bn_stats_free_size", "1024 elements per partition, more than bn_stats_fmax = 512")


def test_bn_stats_dst_must_hold_six() -> None:
    def k(a):
        st = _tile((128, 4))
        nisa.bn_stats(dst=st, data=_sb(a))
        return _out(st)

    _fails(k, (_rand(128, 64),), "err_bn_stats_dst_shape", "bn_stats dst must hold 6 elements per partition")


def test_bn_aggr_input_multiple_of_three() -> None:
    def k(a):
        mv = _tile((128, 2))
        nisa.bn_aggr(dst=mv, data=_sb(a))
        return _out(mv)

    _fails(k, (_rand(128, 4),), "err_bn_aggr_input_size", "multiple of 3 elements per partition")


def test_bn_aggr_partition_mismatch() -> None:
    def k(a):
        mv = _tile((64, 2))
        nisa.bn_aggr(dst=mv, data=_sb(a))
        return _out(mv)

    _fails(k, (_rand(128, 6),), "err_num_partition_mismatch", "of 'bn_aggr'")


# --------------------------------------------------------------------------------------------
# tensor_tensor_scan
# --------------------------------------------------------------------------------------------
def _scan(d0: np.ndarray, d1: np.ndarray, init: np.ndarray, f0: Callable[..., Any], f1: Callable[..., Any]) -> np.ndarray:
    out = np.empty_like(d0)
    r = init
    for i in range(d0.shape[1]):
        r = f1(f0(d0[:, i], r), d1[:, i]).astype(np.float32)
        out[:, i] = r
    return out


def test_tensor_tensor_scan_linear_recurrence_with_column_initial() -> None:
    def k(a, b, c):
        r = _tile(a.shape)
        nisa.tensor_tensor_scan(dst=r, data0=_sb(a), data1=_sb(b), initial=_sb(c), op0=nl.multiply, op1=nl.add)
        return _out(r)

    a, b, c = RNG.random((64, 96), dtype=np.float32), _rand(64, 96), _rand(64, 1)
    np.testing.assert_allclose(_run(k, a, b, c), _scan(a, b, c[:, 0], np.multiply, np.add), rtol=1e-5, atol=1e-5)


def test_tensor_tensor_scan_reverse_operands_and_scalar_initial() -> None:
    def k(a, b):
        r = _tile(a.shape)
        nisa.tensor_tensor_scan(r, _sb(a), _sb(b), 2.0, nl.subtract, nl.subtract, reverse0=True, reverse1=True)
        return _out(r)

    a, b = _rand(16, 20), _rand(16, 20)
    want = _scan(a, b, np.full(16, 2.0, np.float32), lambda x, r: r - x, lambda t, y: y - t)
    np.testing.assert_allclose(_run(k, a, b), want, rtol=1e-5, atol=1e-5)


def test_tensor_tensor_scan_inputs_not_both_psum() -> None:
    def k(a):
        x = _sb(a)
        p0, p1 = _tile(a.shape, buffer=nl.psum), _tile(a.shape, buffer=nl.psum)
        nisa.tensor_copy(dst=p0, src=x)
        nisa.tensor_copy(dst=p1, src=x)
        r = _tile(a.shape)
        nisa.tensor_tensor_scan(dst=r, data0=p0, data1=p1, initial=0.0, op0=nl.multiply, op1=nl.add)
        return _out(r)

    _fails(k, (_rand(128, 64),), "err_scan_both_psum", "tensor_tensor_scan data0 and data1 cannot both be in PSUM")


def test_tensor_tensor_scan_shapes_must_match() -> None:
    def k(a, b):
        r = _tile(a.shape)
        nisa.tensor_tensor_scan(dst=r, data0=_sb(a), data1=_sb(b), initial=0.0, op0=nl.multiply, op1=nl.add)
        return _out(r)

    _fails(k, (_rand(32, 16), _rand(32, 8)), "err_free_size_mismatch", "of 'tensor_tensor_scan'")


# --------------------------------------------------------------------------------------------
# tensor_scalar_cumulative
# --------------------------------------------------------------------------------------------
def test_tensor_scalar_cumulative_sum_and_chained_reduce() -> None:
    def k(a):
        x = _sb(a)
        first, second = _tile(a.shape), _tile(a.shape)
        nisa.tensor_scalar_cumulative(dst=first, src=x, op0=nl.multiply, op1=nl.add, imm0=2.0)
        nisa.tensor_scalar_cumulative(dst=second, src=x, op0=nl.add, op1=nl.add, imm0=0.0, reduce_cmd=nisa.reduce_cmd.reduce)
        return _out(first), _out(second)

    a = _rand(128, 64)
    first, second = _run(k, a)
    np.testing.assert_allclose(first, np.cumsum(2 * a, axis=1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(second, np.cumsum(a, axis=1) + first[:, -1:], rtol=1e-4, atol=1e-4)


def test_tensor_scalar_cumulative_load_reduce_vector_imms_and_max() -> None:
    def k(a, i0, i1):
        r = _tile(a.shape)
        nisa.tensor_scalar_cumulative(
            dst=r, src=_sb(a), op0=nl.add, op1=nl.maximum, imm0=_sb(i0), imm1=_sb(i1), reduce_cmd=nisa.reduce_cmd.load_reduce
        )
        return _out(r)

    a, i0, i1 = _rand(32, 40), _rand(32, 1), _rand(32, 1)
    want = np.maximum.accumulate(np.concatenate([i1, a + i0], axis=1), axis=1)[:, 1:]
    np.testing.assert_allclose(_run(k, a, i0, i1), want, rtol=1e-6)


def test_tensor_scalar_cumulative_subtract_runs_in_order() -> None:
    def k(a):
        r = _tile(a.shape)
        nisa.tensor_scalar_cumulative(dst=r, src=_sb(a), op0=nl.add, op1=nl.subtract, imm0=1.0)
        return _out(r)

    a = _rand(8, 12)
    want = np.empty_like(a)
    reg = np.zeros(8, np.float32)
    for i in range(12):
        reg = (a[:, i] + 1) - reg
        want[:, i] = reg
    np.testing.assert_allclose(_run(k, a), want, rtol=1e-5, atol=1e-5)


def test_tensor_scalar_cumulative_rejects_int32() -> None:
    def k(a):
        r = _tile(a.shape, nl.int32)
        nisa.tensor_scalar_cumulative(dst=r, src=_sb(a), op0=nl.add, op1=nl.add, imm0=0.0)
        return _out(r)

    _fails(k, (np.ones((8, 8), np.int32),), "err_cumulative_dtype", "does not support int32 src")


def test_tensor_scalar_cumulative_load_reduce_needs_imm1() -> None:
    def k(a):
        r = _tile(a.shape)
        nisa.tensor_scalar_cumulative(dst=r, src=_sb(a), op0=nl.add, op1=nl.add, imm0=0.0, reduce_cmd=nisa.reduce_cmd.load_reduce)
        return _out(r)

    _fails(k, (_rand(8, 8),), "err_reduce_init", "load_reduce needs imm1")


def test_tensor_scalar_cumulative_op1_must_be_a_reduction() -> None:
    def k(a):
        r = _tile(a.shape)
        nisa.tensor_scalar_cumulative(dst=r, src=_sb(a), op0=nl.add, op1=nl.equal, imm0=0.0)
        return _out(r)

    _fails(k, (_rand(8, 8),), "err_reduce_op", "tensor_scalar_cumulative reduce_op must be nl.add or nl.subtract")


def test_reduce_cmd_rejects_int_literal() -> None:
    def k(a):
        r = _tile(a.shape)
        nisa.tensor_scalar_cumulative(dst=r, src=_sb(a), op0=nl.add, op1=nl.add, imm0=0.0, reduce_cmd=3)
        return _out(r)

    _fails(k, (_rand(8, 8),), "err_enum_int_literal", "reduce_cmd must be an nisa.reduce_cmd member")


# --------------------------------------------------------------------------------------------
# tensor_scalar_reduce
# --------------------------------------------------------------------------------------------
def test_tensor_scalar_reduce_scale_and_row_max() -> None:
    def k(a):
        r, m = _tile(a.shape), _tile((a.shape[0], 1))
        nisa.tensor_scalar_reduce(dst=r, data=_sb(a), op0=nl.multiply, operand0=0.5, reduce_op=nl.maximum, reduce_res=m)
        return _out(r), _out(m)

    for a in (_rand(128, 200), -np.abs(_rand(128, 200)) - 1):  # all-negative rows: the max starts from -inf
        r, m = _run(k, a)
        np.testing.assert_allclose(r, a * 0.5, rtol=1e-6)
        np.testing.assert_allclose(m[:, 0], (a * 0.5).max(1), rtol=1e-6)


def test_tensor_scalar_reduce_unary_abs_and_negated_result() -> None:
    def k(a):
        r, m = _tile(a.shape), _tile((a.shape[0], 1))
        nisa.tensor_scalar_reduce(dst=r, data=_sb(a), op0=nl.abs, operand0=0.0, reduce_op=nl.maximum, reduce_res=m, reduce_res_negate=True)
        return _out(r), _out(m)

    a = _rand(32, 50)
    r, m = _run(k, a)
    np.testing.assert_array_equal(r, np.abs(a))
    np.testing.assert_array_equal(m[:, 0], -np.abs(a).max(1))


def test_tensor_scalar_reduce_accumulates_across_tiles() -> None:
    def k(a, b):
        r, s = _tile(a.shape), _tile((a.shape[0], 1))
        nisa.tensor_scalar_reduce(dst=r, data=_sb(a), op0=nl.add, operand0=1.0, reduce_op=nl.add)
        nisa.tensor_scalar_reduce(
            dst=r, data=_sb(b), op0=nl.add, operand0=1.0, reduce_op=nl.add, reduce_res=s, reduce_cmd=nisa.reduce_cmd.reduce
        )
        return _out(s)

    a, b = _rand(64, 30), _rand(64, 30)
    np.testing.assert_allclose(_run(k, a, b)[:, 0], (a + 1).sum(1) + (b + 1).sum(1), rtol=1e-4, atol=1e-4)


def test_tensor_scalar_reduce_load_reduce_starts_from_init_column() -> None:
    def k(a, init):
        r, s = _tile(a.shape), _tile((a.shape[0], 1))
        nisa.tensor_scalar_reduce(
            dst=r,
            data=_sb(a),
            op0=nl.multiply,
            operand0=1.0,
            reduce_op=nl.minimum,
            reduce_res=s,
            reduce_cmd=nisa.reduce_cmd.load_reduce,
            reduce_init=_sb(init),
        )
        return _out(s)

    a, init = _rand(16, 10), _rand(16, 1)
    np.testing.assert_array_equal(_run(k, a, init)[:, 0], np.minimum(init[:, 0], a.min(1)))


def test_reduce_without_prior_reset_warns() -> None:
    def k(a):
        r, s = _tile(a.shape), _tile((a.shape[0], 1))
        nisa.tensor_scalar_reduce(
            dst=r, data=_sb(a), op0=nl.add, operand0=0.0, reduce_op=nl.add, reduce_res=s, reduce_cmd=nisa.reduce_cmd.reduce
        )
        return _out(s)

    with pytest.warns(NkiWarning, match="no earlier instruction reset or loaded"):
        out = _run(k, _rand(8, 8))
    assert np.isnan(out).all()


def test_tensor_scalar_reduce_rejects_bitvec_op0() -> None:
    def k(a):
        r = _tile(a.shape, nl.int32)
        nisa.tensor_scalar_reduce(dst=r, data=_sb(a), op0=nl.bitwise_and, operand0=1, reduce_op=nl.add)
        return _out(r)

    _fails(k, (np.ones((8, 8), np.int32),), "err_tensor_scalar_reduce_op", "op0 must be an arithmetic operator")


def test_tensor_scalar_reduce_unary_needs_zero_operand() -> None:
    def k(a):
        r = _tile(a.shape)
        nisa.tensor_scalar_reduce(dst=r, data=_sb(a), op0=nl.abs, operand0=2.0, reduce_op=nl.maximum)
        return _out(r)

    _fails(k, (_rand(8, 8),), "err_tensor_scalar_reduce_op", "operand0 must be None or 0 with the unary op0 nl.abs")


def test_tensor_scalar_reduce_reduce_op_and_reduce_res_shape() -> None:
    def bad_op(a):
        r = _tile(a.shape)
        nisa.tensor_scalar_reduce(dst=r, data=_sb(a), op0=nl.add, operand0=0.0, reduce_op=nl.subtract)
        return _out(r)

    def bad_res(a):
        r, s = _tile(a.shape), _tile((a.shape[0], 2))
        nisa.tensor_scalar_reduce(dst=r, data=_sb(a), op0=nl.add, operand0=0.0, reduce_op=nl.add, reduce_res=s)
        return _out(r)

    _fails(bad_op, (_rand(8, 8),), "err_reduce_op", "reduce_op must be nl.add or nl.multiply or nl.maximum or nl.minimum")
    _fails(bad_res, (_rand(8, 8),), "err_operand_not_column", "tensor_scalar_reduce reduce_res must be a [8, 1] tile")


def test_tensor_scalar_reduce_load_reduce_needs_init() -> None:
    def k(a):
        r = _tile(a.shape)
        nisa.tensor_scalar_reduce(dst=r, data=_sb(a), op0=nl.add, operand0=0.0, reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.load_reduce)
        return _out(r)

    _fails(k, (_rand(8, 8),), "err_reduce_init", "load_reduce needs reduce_init")


# --------------------------------------------------------------------------------------------
# select_reduce / range_select / tensor_copy_predicated
# --------------------------------------------------------------------------------------------
def test_select_reduce_column_on_false_with_row_max() -> None:
    def k(pred, a, f):
        r, m = _tile(a.shape), _tile((a.shape[0], 1))
        nisa.select_reduce(
            dst=r,
            predicate=_sb(pred),
            on_true=_sb(a),
            on_false=_sb(f),
            reduce_res=m,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
            reduce_op=nl.maximum,
        )
        return _out(r), _out(m)

    pred = RNG.integers(0, 2, (128, 96)).astype(np.uint8)
    a, f = _rand(128, 96), _rand(128, 1)
    r, m = _run(k, pred, a, f)
    want = np.where(pred != 0, a, f)
    np.testing.assert_array_equal(r, want)
    np.testing.assert_array_equal(m[:, 0], want.max(1))


def test_select_reduce_reverse_pred_scalar_on_false() -> None:
    def k(pred, a):
        r = _tile(a.shape)
        nisa.select_reduce(dst=r, predicate=_sb(pred), on_true=_sb(a), on_false=FP32_MIN, reverse_pred=True)
        return _out(r)

    pred = np.zeros((128, 16), np.uint8)
    pred[:64] = 1
    a = _rand(128, 16)
    r = _run(k, pred, a)
    assert (r[:64] == FP32_MIN).all()
    np.testing.assert_array_equal(r[64:], a[64:])


def test_select_reduce_only_max() -> None:
    def k(pred, a):
        r = _tile(a.shape)
        nisa.select_reduce(dst=r, predicate=_sb(pred), on_true=_sb(a), on_false=0.0, reduce_op=nl.add)
        return _out(r)

    _fails(k, (np.ones((8, 8), np.uint8), _rand(8, 8)), "err_reduce_op", "select_reduce reduce_op must be nl.maximum")


def test_select_reduce_predicate_dtype_and_idle_reduce() -> None:
    def float_pred(pred, a):
        r = _tile(a.shape)
        nisa.select_reduce(dst=r, predicate=_sb(pred), on_true=_sb(a), on_false=0.0)
        return _out(r)

    def idle(pred, a):
        r, m = _tile(a.shape), _tile((a.shape[0], 1))
        nisa.select_reduce(dst=r, predicate=_sb(pred), on_true=_sb(a), on_false=0.0, reduce_res=m)
        return _out(r)

    _fails(float_pred, (np.ones((8, 8), np.float32), _rand(8, 8)), "err_predicate_dtype", "predicate must be int8, uint8, int16 or uint16")
    _fails(idle, (np.ones((8, 8), np.uint8), _rand(8, 8)), "err_reduce_cmd", "reduce_cmd is idle, which performs no reduction")


def test_range_select_matches_aws_reference() -> None:
    def k(a, b0, b1):
        r, m = _tile(a.shape), _tile((a.shape[0], 1))
        nisa.range_select(
            dst=r,
            on_true_tile=_sb(a),
            comp_op0=nl.greater_equal,
            comp_op1=nl.less,
            bound0=_sb(b0),
            bound1=_sb(b1),
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
            reduce_res=m,
            reduce_op=nl.maximum,
            range_start=32,
            on_false_value=FP32_MIN,
        )
        return _out(r), _out(m)

    a = RNG.random((128, 256), dtype=np.float32)
    b0 = RNG.integers(0, 60, (128, 1)).astype(np.float32)
    b1 = b0 + RNG.integers(1, 100, (128, 1)).astype(np.float32)
    r, m = _run(k, a, b0, b1)
    idx = 32 + np.arange(256, dtype=np.float32)
    want = np.where((idx >= b0) & (idx < b1), a, FP32_MIN)
    np.testing.assert_array_equal(r, want)
    np.testing.assert_array_equal(m[:, 0], want.max(1))


def test_range_select_chains_the_accumulator() -> None:
    def k(a, b0, b1):
        x, y, z = _sb(a), _tile(a.shape), _tile(a.shape)
        r, m = _tile(a.shape), _tile((a.shape[0], 1))
        ops = {"comp_op0": nl.greater_equal, "comp_op1": nl.less, "bound0": _sb(b0), "bound1": _sb(b1)}
        nisa.range_select(dst=r, on_true_tile=x, range_start=32, **ops)
        nisa.tensor_scalar(dst=y, data=x, op0=nl.add, operand0=1.0)
        nisa.range_select(dst=r, on_true_tile=y, range_start=32 + 128, reduce_cmd=nisa.reduce_cmd.reduce, **ops)
        nisa.tensor_scalar(dst=z, data=y, op0=nl.add, operand0=1.0)
        nisa.range_select(dst=r, on_true_tile=z, range_start=32 + 256, reduce_cmd=nisa.reduce_cmd.reduce, reduce_res=m, **ops)
        return _out(r), _out(m)

    a = RNG.random((128, 512), dtype=np.float32)
    b0, b1 = np.zeros((128, 1), np.float32), np.full((128, 1), 350, np.float32)
    r, m = _run(k, a, b0, b1)
    best = np.full(128, -np.inf, np.float32)
    for i in range(3):
        idx = 32 + i * 128 + np.arange(512, dtype=np.float32)
        sel = np.where((idx >= b0) & (idx < b1), a + i, FP32_MIN)
        best = np.maximum(best, sel.max(1))
    np.testing.assert_array_equal(r, sel)
    np.testing.assert_allclose(m[:, 0], best, rtol=1e-6)


def _range_kernel(on_false: float = FP32_MIN, cmp: Any = None) -> Callable[..., Any]:
    def k(a, b0, b1):
        r = _tile(a.shape)
        nisa.range_select(
            dst=r,
            on_true_tile=_sb(a),
            comp_op0=cmp or nl.greater_equal,
            comp_op1=nl.less,
            bound0=_sb(b0),
            bound1=_sb(b1),
            on_false_value=on_false,
        )
        return _out(r)

    return k


def test_range_select_rules() -> None:
    args = (_rand(8, 16), np.zeros((8, 1), np.float32), np.ones((8, 1), np.float32))
    _fails(_range_kernel(on_false=0.0), args, "err_range_select_on_false", "on_false_value must be FP32_MIN (-3.4028235e+38)")
    _fails(_range_kernel(cmp=nl.add), args, "err_range_select_cmp", "comp_op0 must be one of nl.equal")
    _fails(_range_kernel(), args, "err_isa_unsupported_target", "range_select is only available on trn2", target="trn1")
    _fails(_range_kernel(), args[:2] + (np.ones((8, 1), np.int32),), "err_range_select_bound_dtype", "bound1 must be float32")


def test_tensor_copy_predicated_tile_and_scalar() -> None:
    def k(pred, a, b):
        d1, d2 = _sb(b), _sb(b)
        p = _sb(pred)
        nisa.tensor_copy_predicated(dst=d1, src=_sb(a), predicate=p)
        nisa.tensor_copy_predicated(dst=d2, src=7.5, predicate=p, reverse_pred=True)
        return _out(d1), _out(d2)

    pred = RNG.integers(0, 2, (128, 64)).astype(np.uint8)
    a, b = _rand(128, 64), _rand(128, 64)
    d1, d2 = _run(k, pred, a, b)
    np.testing.assert_array_equal(d1, np.where(pred != 0, a, b))
    np.testing.assert_array_equal(d2, np.where(pred == 0, 7.5, b))


def test_tensor_copy_predicated_rules() -> None:
    def float_pred(pred, a):
        d = _sb(a)
        nisa.tensor_copy_predicated(dst=d, src=_sb(a), predicate=_sb(pred))
        return _out(d)

    def mixed_dtype(pred, a):
        d = _tile(a.shape, nl.bfloat16)
        nisa.tensor_copy_predicated(dst=d, src=_sb(a), predicate=_sb(pred))
        return _out(d)

    _fails(float_pred, (np.ones((8, 8), np.float32), _rand(8, 8)), "err_predicate_dtype", "predicate must be uint8, uint16 or uint32")
    _fails(mixed_dtype, (np.ones((8, 8), np.uint8), _rand(8, 8)), "err_copy_predicated_dtype", "src and dst must share a dtype")


# --------------------------------------------------------------------------------------------
# max8 / nc_find_index8 / nc_match_replace8
# --------------------------------------------------------------------------------------------
def test_max8_and_find_index8_give_sorted_top8_and_their_positions() -> None:
    def k(a):
        x = _sb(a)
        top, idx = _tile((a.shape[0], 8)), _tile((a.shape[0], 8), nl.uint32)
        nisa.max8(dst=top, src=x)
        nisa.nc_find_index8(dst=idx, data=x, vals=top)
        return _out(top), _out(idx)

    a = _rand(32, 4, 25)  # 3-D source: free dims are flattened
    top, idx = _run(k, a)
    flat = a.reshape(32, -1)
    order = np.argsort(-flat, axis=1, kind="stable")[:, :8]
    np.testing.assert_array_equal(top, np.take_along_axis(flat, order, axis=1))
    np.testing.assert_array_equal(idx, order.astype(np.uint32))


def test_find_index8_duplicates_ascend_and_missing_is_all_ones() -> None:
    def k(a, v):
        idx = _tile((a.shape[0], 8), nl.uint16)
        nisa.nc_find_index8(dst=idx, data=_sb(a), vals=_sb(v))
        return _out(idx)

    a = np.array([[5, 1, 5, 2, 5, 3, 4, 0, 9, 9]], np.float32)
    v = np.array([[5, 5, 7, 9, 5, 1, 9, 9]], np.float32)
    np.testing.assert_array_equal(_run(k, a, v), [[0, 2, 0xFFFF, 8, 4, 1, 9, 0xFFFF]])


def test_match_replace8_aws_duplicate_tie_break() -> None:
    def k(a, v):
        out, idx = _tile(a.shape), _tile((a.shape[0], 8), nl.uint32)
        nisa.nc_match_replace8(dst=out, data=_sb(a), vals=_sb(v), imm=-1.0, dst_idx=idx)
        return _out(out), _out(idx)

    a = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    v = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    out, idx = _run(k, a, v)
    np.testing.assert_array_equal(idx, [[2, 10, 9, 8, 7, 6, 5, 4]])
    np.testing.assert_array_equal(out, [[1, 2, -1, 4, -1, -1, -1, -1, -1, -1, -1]])


def test_match_replace8_in_place_after_max8() -> None:
    def k(a):
        x = _sb(a)
        top, idx = _tile((a.shape[0], 8)), _tile((a.shape[0], 8), nl.uint32)
        nisa.max8(dst=top, src=x)
        nisa.nc_match_replace8(dst=x, data=x, vals=top, imm=float("-inf"), dst_idx=idx)
        return _out(x), _out(idx)

    a = RNG.random((128, 512), dtype=np.float32)
    out, idx = _run(k, a)
    order = np.argsort(-a, axis=1, kind="stable")[:, :8]
    np.testing.assert_array_equal(idx, order)
    want = a.copy()
    np.put_along_axis(want, order, -np.inf, axis=1)
    np.testing.assert_array_equal(out, want)


def test_match_replace8_missing_value_warns() -> None:
    def k(a, v):
        out = _tile(a.shape)
        nisa.nc_match_replace8(dst=out, data=_sb(a), vals=_sb(v), imm=0.0)
        return _out(out)

    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    v = np.array([[1, 2, 3, 4, 5, 6, 7, 99]], np.float32)
    with pytest.warns(NkiWarning, match="does not occur in data partition 0"):
        out = _run(k, a, v)
    np.testing.assert_array_equal(out, np.where((a >= 1) & (a <= 7), 0, a))


def test_top8_family_rules() -> None:
    def small(a):
        top = _tile((a.shape[0], 8))
        nisa.max8(dst=top, src=_sb(a))
        return _out(top)

    def bad_dst(a):
        top = _tile((a.shape[0], 4))
        nisa.max8(dst=top, src=_sb(a))
        return _out(top)

    def float_idx(a):
        x = _sb(a)
        top, idx = _tile((a.shape[0], 8)), _tile((a.shape[0], 8))
        nisa.max8(dst=top, src=x)
        nisa.nc_find_index8(dst=idx, data=x, vals=top)
        return _out(idx)

    def short_vals(a):
        x = _sb(a)
        out = _tile(a.shape)
        nisa.nc_match_replace8(dst=out, data=x, vals=x[:, 0:4], imm=0.0)
        return _out(out)

    _fails(small, (_rand(8, 4),), "err_top8_free_size", "max8 src must have between 8 and 16384 elements per partition, got 4")
    _fails(bad_dst, (_rand(8, 16),), "err_top8_dst_shape", "max8 dst must be [P, 8]")
    _fails(float_idx, (_rand(8, 16),), "err_index_dtype", "nc_find_index8 dst must be uint16 or uint32, got float32")
    _fails(short_vals, (_rand(8, 16),), "err_top8_vals_shape", "vals must hold exactly 8 elements")


# --------------------------------------------------------------------------------------------
# nc_stream_shuffle
# --------------------------------------------------------------------------------------------
def test_stream_shuffle_rotates_in_place_per_quadrant() -> None:
    def k(a):
        x = _sb(a)
        nisa.nc_stream_shuffle(dst=x, src=x, shuffle_mask=[(i - 1) % 32 for i in range(32)])
        return _out(x)

    a = _rand(128, 16)
    want = a.copy()
    for q in range(4):
        want[q * 32 : (q + 1) * 32] = a[[q * 32 + (i - 1) % 32 for i in range(32)]]
    np.testing.assert_array_equal(_run(k, a), want)


def test_stream_shuffle_broadcast_and_keep() -> None:
    def k(a, b):
        d = _sb(b)
        nisa.nc_stream_shuffle(dst=d, src=_sb(a), shuffle_mask=[0] * 16 + [255] * 16)
        return _out(d)

    a, b = _rand(1, 24), _rand(32, 24)
    want = b.copy()
    want[:16] = a[0]
    np.testing.assert_array_equal(_run(k, a, b), want)


def test_stream_shuffle_rules() -> None:
    def mask_kernel(mask: list[int]) -> Callable[..., Any]:
        def k(a):
            x = _sb(a)
            nisa.nc_stream_shuffle(dst=x, src=x, shuffle_mask=mask)
            return _out(x)

        return k

    def dtype_kernel(a):
        d = _tile(a.shape, nl.bfloat16)
        nisa.nc_stream_shuffle(dst=d, src=_sb(a), shuffle_mask=list(range(32)))
        return _out(d)

    def start_kernel(a):
        x = _sb(a)
        d = _tile((64, a.shape[1]))
        nisa.nc_stream_shuffle(dst=d, src=x[32:64], shuffle_mask=list(range(32)))
        return _out(d)

    a = _rand(64, 8)
    _fails(mask_kernel(list(range(31))), (a,), "err_shuffle_mask", "shuffle_mask must be a list of 32 partition indices")
    _fails(mask_kernel([40] * 32), (a,), "err_shuffle_mask", "shuffle_mask[0] = 40 must be a source partition 0..31")
    _fails(dtype_kernel, (a,), "err_shuffle_dtype", "dst must have src's dtype")
    _fails(start_kernel, (a,), "err_start_partition", "nc_stream_shuffle src starts at partition 32; with 64 active partitions")


# --------------------------------------------------------------------------------------------
# local_gather / nc_n_gather
# --------------------------------------------------------------------------------------------
def test_local_gather_matches_aws_numpy_reference() -> None:
    def k(src, index):
        d = _tile((32, 20 * 2))
        nisa.local_gather(dst=d, src_buffer=_sb(src), index=_sb(index), num_elem_per_idx=2, num_valid_indices=20)
        return _out(d)

    src = _rand(32, 64, 2)
    per_core = RNG.integers(0, 64, (16, 2)).astype(np.uint16)
    index = np.tile(per_core, (2, 1))
    want = np.empty((32, 20, 2), np.float32)
    for c in range(2):
        rows = slice(c * 16, (c + 1) * 16)
        flat = index[rows].flatten(order="F")[:20]
        want[rows] = np.take(src[rows], flat, axis=1)
    np.testing.assert_array_equal(_run(k, src, (index * 2).astype(np.uint16)), want.reshape(32, 40))


def _gather_kernel(dst_shape: tuple[int, int], elems: int = 1) -> Callable[..., Any]:
    def k(src, index):
        d = _tile(dst_shape)
        nisa.local_gather(dst=d, src_buffer=_sb(src), index=_sb(index), num_elem_per_idx=elems)
        return _out(d)

    return k


def test_local_gather_rules() -> None:
    src = _rand(16, 8)
    idx = np.zeros((16, 1), np.uint16)
    _fails(_gather_kernel((16, 16)), (src, idx.astype(np.int32)), "err_index_dtype", "local_gather index must be uint16, got int32")
    _fails(_gather_kernel((8, 16)), (src[:8], idx[:8]), "err_local_gather_partitions", "multiple of 16 partitions")
    _fails(_gather_kernel((16, 48), elems=3), (src, idx), "err_local_gather_elems", "num_elem_per_idx must be one of [1, 2, 4, 8, 16, 32]")
    _fails(_gather_kernel((16, 8)), (src, idx), "err_local_gather_dst_shape", "must hold num_valid_indices * num_elem_per_idx = 16")
    _fails(_gather_kernel((16, 16)), (src, np.full((16, 1), 8, np.uint16)), "err_local_gather_index", "past the 8 elements per partition")


def test_local_gather_cannot_read_psum() -> None:
    def k(src, index):
        p = _tile(src.shape, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=_sb(src))
        d = _tile((16, 16))
        nisa.local_gather(dst=d, src_buffer=p, index=_sb(index))
        return _out(d)

    _fails(
        k,
        (_rand(16, 8), np.zeros((16, 1), np.uint16)),
        "err_unsupported_memory",
        "Expected operand 'src_buffer' of 'local_gather' to be in address space 'sbuf', but got a tile in 'psum' instead.",
    )


def test_nc_n_gather_per_partition() -> None:
    def k(data, ind):
        d = _tile(ind.shape)
        nisa.nc_n_gather(dst=d, data=_sb(data), indices=_sb(ind))
        return _out(d)

    data = _rand(16, 4, 8)
    ind = RNG.integers(0, 32, (16, 10)).astype(np.uint32)
    np.testing.assert_array_equal(_run(k, data, ind), np.take_along_axis(data.reshape(16, 32), ind.astype(np.int64), axis=1))


def test_nc_n_gather_rules() -> None:
    def k(data, ind):
        d = _tile(ind.shape)
        nisa.nc_n_gather(dst=d, data=_sb(data), indices=_sb(ind))
        return _out(d)

    _fails(k, (_rand(4, 8), np.zeros((4, 3), np.int32)), "err_index_dtype", "nc_n_gather indices must be uint32, got int32")
    _fails(k, (_rand(4, 8), np.full((4, 3), 8, np.uint32)), "err_n_gather_index", "index 8 is outside [0, 8)")


# --------------------------------------------------------------------------------------------
# dropout / exponential
# --------------------------------------------------------------------------------------------
def test_dropout_zeroes_at_rate_without_rescaling_and_is_reproducible() -> None:
    def k(a, p):
        d1, d2 = _tile(a.shape), _tile(a.shape)
        x = _sb(a)
        nisa.dropout(dst=d1, data=x, prob=0.3)
        nisa.dropout(dst=d2, data=x, prob=_sb(p))
        return _out(d1), _out(d2)

    a = RNG.random((128, 512), dtype=np.float32) + 1.0
    p = np.zeros((128, 1), np.float32)
    p[64:] = 1.0
    d1, d2 = _run(k, a, p)
    kept = d1 != 0
    assert abs(1.0 - kept.mean() - 0.3) < 0.01
    np.testing.assert_array_equal(d1[kept], a[kept])
    np.testing.assert_array_equal(d2[:64], a[:64])
    assert (d2[64:] == 0).all()
    np.testing.assert_array_equal(_run(k, a, p)[0], d1)


def test_dropout_rules() -> None:
    def bad_prob(a):
        d = _tile(a.shape)
        nisa.dropout(dst=d, data=_sb(a), prob=1.5)
        return _out(d)

    def bad_dtype(a):
        d = _tile(a.shape, nl.bfloat16)
        nisa.dropout(dst=d, data=_sb(a), prob=0.5)
        return _out(d)

    _fails(bad_prob, (_rand(8, 8),), "err_dropout_prob", "prob must be a probability in [0, 1], got 1.5")
    _fails(bad_dtype, (_rand(8, 8),), "err_dropout_dtype", "dst.dtype must equal data.dtype")


def test_exponential_with_column_max_and_row_sums() -> None:
    def k(a, m, init):
        x, mx = _sb(a), _sb(m)
        e, s1, s2 = _tile(a.shape), _tile((a.shape[0], 1)), _tile((a.shape[0], 1))
        nisa.exponential(dst=e, src=x, max_value=mx, reduce_res=s1, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.exponential(dst=e, src=x, max_value=mx, reduce_res=s2, reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=_sb(init))
        return _out(e), _out(s1), _out(s2)

    a, init = _rand(128, 64), _rand(128, 1)
    m = a.max(1, keepdims=True)
    e, s1, s2 = _run(k, a, m, init, target="trn3")
    want = np.exp(a - m)
    np.testing.assert_allclose(e, want, rtol=1e-6)
    np.testing.assert_allclose(s1[:, 0], want.sum(1), rtol=1e-5)
    np.testing.assert_allclose(s2[:, 0], want.sum(1) + init[:, 0], rtol=1e-5)


def test_exponential_rules() -> None:
    def plain(a):
        e = _tile(a.shape)
        nisa.exponential(dst=e, src=_sb(a))
        return _out(e)

    def idle_res(a):
        e, s = _tile(a.shape), _tile((a.shape[0], 1))
        nisa.exponential(dst=e, src=_sb(a), reduce_res=s)
        return _out(e)

    def stray_init(a):
        e = _tile(a.shape)
        nisa.exponential(dst=e, src=_sb(a), reduce_init=1.0, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        return _out(e)

    a = _rand(8, 8)
    np.testing.assert_allclose(_run(plain, a, target="trn3"), np.exp(a), rtol=1e-6)
    _fails(
        plain,
        (a,),
        "err_isa_unsupported_target",
        "exponential is only available on trn3 (NeuronCore-v4) and newer; the current target is trn2",
    )
    _fails(plain, (a,), "err_isa_unsupported_target", "the current target is trn1", target="trn1")
    _fails(idle_res, (a,), "err_reduce_cmd", "reduce_res is given but reduce_cmd is idle", target="trn3")
    _fails(stray_init, (a,), "err_reduce_init", "reduce_init must be unset or 0.0 unless reduce_cmd is load_reduce", target="trn3")


# --------------------------------------------------------------------------------------------
# virtual registers
# --------------------------------------------------------------------------------------------
def test_register_load_drives_dynamic_range() -> None:
    def k(n, a):
        reg = nisa.register_alloc()
        nisa.register_load(reg, _sb(n))
        acc = _sb(a)
        for _ in nl.dynamic_range(reg):
            nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)
        return _out(acc)

    a = _rand(4, 8)
    np.testing.assert_allclose(_run(k, np.array([[3]], np.int32), a), a + 3, rtol=1e-6)


def test_register_scalar_offset_selects_a_row() -> None:
    def k(data):
        reg = nisa.register_alloc(0)
        nisa.register_move(reg, 2)
        row = _tile((1, 8))
        nisa.dma_copy(dst=row, src=data.ap([[8, 1], [1, 8]], scalar_offset=reg))
        return _out(row)

    data = _rand(4, 8)
    np.testing.assert_array_equal(_run(k, data), data[2:3])


def test_register_move_store_and_while_loop() -> None:
    def k(c0):
        count = _sb(c0)
        reg = nisa.register_alloc()
        nisa.register_load(reg, count)
        copy = nisa.register_alloc()
        nisa.register_move(copy, reg)
        trips = nl.zeros((1, 1), nl.float32)
        while reg:
            nisa.tensor_scalar(dst=trips, data=trips, op0=nl.add, operand0=1.0)
            nisa.tensor_scalar(dst=count, data=count, op0=nl.subtract, operand0=1)
            nisa.register_load(reg, count)
        stored = _tile((1, 1), nl.int32)
        nisa.register_store(stored, copy)
        return _out(trips), _out(stored)

    trips, stored = _run(k, np.array([[4]], np.int32))
    assert trips[0, 0] == 4.0 and stored[0, 0] == 4


def test_register_rules() -> None:
    def uninit(a):
        reg = nisa.register_alloc()
        row = _tile((1, 8))
        nisa.dma_copy(dst=row, src=a.ap([[8, 1], [1, 8]], scalar_offset=reg))
        return _out(row)

    def wide(a):
        nisa.register_load(nisa.register_alloc(), _sb(a))
        return _out(_sb(a))

    def floating(a):
        nisa.register_load(nisa.register_alloc(), _sb(a))
        return _out(_sb(a))

    def too_big(a):
        nisa.register_move(nisa.register_alloc(), 2**40)
        return _out(_sb(a))

    def not_reg(a):
        nisa.register_move(3, 1)
        return _out(_sb(a))

    _fails(uninit, (_rand(4, 8),), "err_register_uninitialized", "virtual register read before it held a value")
    _fails(wide, (np.ones((1, 2), np.int32),), "err_register_tensor_shape", "register_load src must hold exactly one element")
    _fails(
        floating,
        (np.ones((1, 1), np.float32),),
        "err_register_tensor_dtype",
        "register_load src must be a 32-bit or narrower integer tensor",
    )
    _fails(too_big, (_rand(1, 1),), "err_register_value", "does not fit a 32-bit register")
    _fails(not_reg, (_rand(1, 1),), "err_expected_register", "operand 'dst' must be a VirtualRegister")


# --------------------------------------------------------------------------------------------
# trace records: one per op, on the documented engine, also in timing-only runs
# --------------------------------------------------------------------------------------------
def test_ops_record_one_instruction_on_their_engine_even_timing_only() -> None:
    def k(a, ind):
        x = _sb(a)
        st, mv, top, g = _tile((128, 6)), _tile((128, 2)), _tile((128, 8)), _tile((128, 8))
        nisa.bn_stats(dst=st, data=x[:, 0:512])
        nisa.bn_aggr(dst=mv, data=st)
        nisa.max8(dst=top, src=x)
        nisa.nc_n_gather(dst=g, data=x, indices=_sb(ind))
        e, s = _tile(a.shape), _tile((128, 1))
        nisa.exponential(dst=e, src=x, max_value=top[:, 0:1], reduce_res=s, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.tensor_scalar_reduce(dst=e, data=e, op0=nl.multiply, operand0=s, reduce_op=nl.add, reduce_res=s)
        reg = nisa.register_alloc(1)
        for _ in nl.dynamic_range(reg):
            nisa.dropout(dst=e, data=e, prob=0.1)
        return _out(mv), _out(g), _out(e)

    for timing_only, args in (
        (False, (_rand(128, 600), np.zeros((128, 8), np.uint32))),
        (True, (emu.ShapeSpec((128, 600)), emu.ShapeSpec((128, 8), "uint32"))),
    ):
        trace = emu.Trace()
        emu.run_kernel(k, args, trace=trace, target="trn3", timing_only=timing_only)
        engines = {ins.op: ins.engine for ins in trace if ins.op != "dma_copy"}
        assert engines == {
            "bn_stats": "vector",
            "bn_aggr": "vector",
            "max8": "vector",
            "nc_n_gather": "gpsimd",
            "exponential": "vector",
            "tensor_scalar_reduce": "vector",
            "register_alloc": "sync",
            "dropout": "vector",
        }
        counts = trace.counts()
        assert all(counts[op] == 1 for op in engines)


# --------------------------------------------------------------------------------------------
# nonzero_with_count
# --------------------------------------------------------------------------------------------
def _nonzero_kernel(index_offset: Any = 16, padding_val: Any = -1, dst_dtype: Any = nl.int32, extra: int = 1) -> Callable[..., Any]:
    def k(a):
        d = _tile((a.shape[0], a.shape[1] + extra), dst_dtype)
        nisa.memset(dst=d, value=7)
        nisa.nonzero_with_count(dst=d, src=_sb(a), index_offset=index_offset, padding_val=padding_val)
        return _out(d)

    return k


def test_nonzero_with_count_matches_the_documented_example_on_each_gpsimd_cores_first_partition() -> None:
    a = (RNG.random((128, 8)) < 0.4).astype(np.float32)
    a[0] = [0, 1, 1, 0, 0, 1, 0, 0]  # the AWS page's example row
    got = _run(_nonzero_kernel(), a)
    assert got[0].tolist() == [17, 18, 21, -1, -1, -1, -1, -1, 3]
    for p in range(128):
        if p % 16:
            assert (got[p] == 7).all(), f"partition {p} is not one a GpSimd core reads: left as it was"
        else:
            idx = np.flatnonzero(a[p]) + 16
            assert got[p].tolist() == [*idx, *[-1] * (8 - idx.size), idx.size]


@pytest.mark.parametrize(("kernel", "target", "code", "text"), [
    (_nonzero_kernel(), "trn1", "err_isa_unsupported_target", "nonzero_with_count is only available on trn2 (NeuronCore-v3) and newer"),
    (_nonzero_kernel(extra=0), "trn2", "err_nonzero_dst_shape", "dst must hold one more element per partition than src (the count goes last): 9"),
    (_nonzero_kernel(index_offset=200, dst_dtype=nl.int8), "trn2", "err_nonzero_dst_dtype", "dst dtype int8 cannot hold every value it may receive ([-1, 207]"),
    (_nonzero_kernel(padding_val=-1.5), "trn2", "err_nonzero_operand", "nonzero_with_count padding_val must be an int, got -1.5"),
])  # fmt: skip
def test_nonzero_with_count_refuses(kernel: Callable[..., Any], target: str, code: str, text: str) -> None:
    _fails(kernel, (np.ones((128, 8), np.float32),), code, text, target=target)
