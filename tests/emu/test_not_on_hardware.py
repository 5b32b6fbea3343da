"""Operators the simulator can compute but Trainium cannot: refused in 0.3, lowered to real instructions in 0.1.

The NKI ISA has no divide, mod or fmod (they are absent from the supported math operators,
nki.api.shared.html tbl-aluop), and the 0.3 release notes say ``nl.divide`` is not supported
on hardware, ``nl.fmod`` / ``nl.mod`` fail there and ``nl.power(tile, scalar)`` is not
supported. A kernel using them must not be timed as a Trainium kernel: 0.3 refuses them with
``err_op_not_on_hardware``; the 0.1 front-end (public 0.1 kernels use ``nl.divide``) emits the
instructions they lower to and prices those.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import neuronxcc.nki as legacy_nki
import neuronxcc.nki.isa as lisa
import neuronxcc.nki.language as lnl
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkiagent import emu
from nkiagent.perf import profile_trace

RNG = np.random.default_rng(3)
X = RNG.uniform(0.5, 4.0, (128, 64)).astype(np.float32)
Y = RNG.uniform(0.5, 4.0, (128, 64)).astype(np.float32)

FIX = {
    "divide": "multiply by the reciprocal instead: nl.multiply(x, nl.reciprocal(y)), or nisa.reciprocal into a tile and op=nl.multiply",
    "mod": "there is no remainder on the hardware: form x - y * nl.floor(x * (1 / y)) from a reciprocal, multiplies and a floor",
    "fmod": "there is no remainder on the hardware: form x - y * nl.trunc(x * (1 / y)) from a reciprocal, multiplies and a trunc",
}


def _message(what: str, name: str) -> str:
    return f"{what}: the NKI ISA has no {name} operator, so this runs in simulation only and fails on Trainium; {FIX[name]}"


def _expect(body: Callable[[Any, Any], Any], code: str, message: str) -> None:
    """Run ``body(x_tile, y_tile)`` in a 0.3 kernel and check the refusal, at the body's marked line."""

    def k(a: Any, b: Any) -> Any:
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, body(nl.load(a), nl.load(b)))
        return out

    with pytest.raises(emu.NkiValidationError) as info:
        emu.run_kernel(nki.jit(k), (X, Y))
    err = info.value
    assert (err.code, err.message) == (code, message)
    lines, start = inspect.getsourcelines(body)
    assert err.location == f"{inspect.getsourcefile(body)}:{start + next(i for i, s in enumerate(lines) if '# <- error' in s)}"


NL_FORMS: dict[str, Callable[[Any, Any], Any]] = {
    "tile / tile": lambda x, y: nl.divide(x, y),  # <- error
    "tile / number": lambda x, y: nl.divide(x, 2.0),  # <- error
    "number / tile": lambda x, y: nl.divide(2.0, y),  # <- error
    "operator /": lambda x, y: x / y,  # <- error
}


@pytest.mark.parametrize("form", sorted(NL_FORMS))
def test_nl_divide_is_refused(form: str) -> None:
    _expect(NL_FORMS[form], "err_op_not_on_hardware", _message("nl.divide", "divide"))


@pytest.mark.parametrize("name", ["mod", "fmod"])
def test_nl_mod_and_fmod_are_refused(name: str) -> None:
    _expect(lambda x, y: getattr(nl, name)(x, y), "err_op_not_on_hardware", _message(f"nl.{name}", name))  # <- error


def test_percent_operator_is_refused() -> None:
    _expect(lambda x, y: x % 3.0, "err_op_not_on_hardware", _message("nl.mod", "mod"))  # <- error


def test_numbers_are_still_divided_at_trace_time() -> None:
    """``nl.divide`` of two Python numbers is a constant, computed on the host (no instruction)."""
    assert nl.divide(3.0, 4.0) == 0.75
    assert nl.mod(7, 3) == 1


ISA_FORMS: dict[str, Callable[[Any, Any, Any, Any], None]] = {
    "tensor_tensor": lambda r, x, y, op: nisa.tensor_tensor(dst=r, data1=x, data2=y, op=op),  # <- error
    "tensor_scalar": lambda r, x, y, op: nisa.tensor_scalar(dst=r, data=x, op0=op, operand0=2.0),  # <- error
    "scalar_tensor_tensor": lambda r, x, y, op: nisa.scalar_tensor_tensor(dst=r, data=x, op0=nl.add, operand0=1.0, op1=op, operand1=y),  # <- error
}


@pytest.mark.parametrize("name", ["divide", "mod", "fmod"])
@pytest.mark.parametrize("numpy_op", [False, True])
@pytest.mark.parametrize("instruction", sorted(ISA_FORMS))
def test_isa_ops_refuse_operators_the_isa_lacks(instruction: str, numpy_op: bool, name: str) -> None:
    op = getattr(np, {"mod": "remainder"}.get(name, name)) if numpy_op else getattr(nl, name)

    def body(x: Any, y: Any) -> Any:
        r = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        ISA_FORMS[instruction](r, x, y, op)
        return r

    with pytest.raises(emu.NkiValidationError) as info:
        emu.run_kernel(nki.jit(lambda a, b: _store(body(nl.load(a), nl.load(b)))), (X, Y))
    assert (info.value.code, info.value.message) == ("err_op_not_on_hardware", _message(f"{instruction} op=nl.{name}", name))
    assert info.value.location.startswith(__file__ + ":")


def _store(t: Any) -> Any:
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


def test_power_of_a_tile_by_a_number_is_refused() -> None:
    _expect(
        lambda x, y: nl.power(x, 2.0),  # <- error
        "err_op_not_on_hardware",
        "nl.power(tile, scalar): not supported on hardware (NKI 0.3 release notes); square with nl.square "
        "(or nisa.activation(op=nl.square)), or raise to a tile of exponents with nl.power(tile, tile)",
    )


def test_power_of_two_tiles_runs_on_gpsimd() -> None:
    trace = emu.Trace()
    out = emu.run_kernel(nki.jit(lambda a, b: _store(nl.power(nl.load(a), nl.load(b)))), (X, Y), trace=trace).outputs
    np.testing.assert_allclose(out, X.astype(np.float64) ** Y, rtol=1e-5)
    assert [i.engine for i in trace if i.op == "tensor_tensor"] == ["gpsimd"]


# --------------------------------------------------------------------------------------------
# 0.1: lowered to the instructions the hardware runs, and priced as those
# --------------------------------------------------------------------------------------------
def _legacy(body: Callable[[Any, Any], Any]) -> Any:
    def k(a: Any, b: Any) -> Any:
        out = lnl.ndarray(a.shape, dtype=lnl.float32, buffer=lnl.shared_hbm)
        lnl.store(out, value=body(lnl.load(a), lnl.load(b)))
        return out

    return legacy_nki.jit(k)


def _run01(kernel: Any, *args: np.ndarray) -> tuple[np.ndarray, emu.Trace]:
    trace = emu.Trace()
    out = emu.run_kernel(kernel, args, trace=trace, api="0.1").outputs
    return np.asarray(out), trace


def _compute(trace: emu.Trace) -> list[tuple[str, Any, Any]]:
    """The compute instructions: (op, alu, lowered_from)."""
    return [(i.op, i.attrs.get("alu"), i.attrs.get("lowered_from")) for i in trace if i.engine != "dma"]


def test_legacy_divide_of_tiles_is_reciprocal_then_multiply() -> None:
    out, trace = _run01(_legacy(lambda x, y: lnl.divide(x, y)), X, Y)
    np.testing.assert_allclose(out, X / Y, rtol=2e-7)
    assert _compute(trace) == [("reciprocal", None, "nl.divide"), ("tensor_tensor", "multiply", "nl.divide")]


def test_legacy_divide_by_a_number_is_a_multiply() -> None:
    out, trace = _run01(_legacy(lambda x, y: x / 4.0), X, Y)
    np.testing.assert_allclose(out, X / 4.0, rtol=1e-7)
    assert _compute(trace) == [("tensor_scalar", ("multiply", None), "nl.divide")]


def test_legacy_number_divided_by_a_tile() -> None:
    out, trace = _run01(_legacy(lambda x, y: lnl.divide(2.0, y)), X, Y)
    np.testing.assert_allclose(out, 2.0 / Y, rtol=2e-7)
    assert [op for op, _, _ in _compute(trace)] == ["reciprocal", "tensor_scalar"]


@pytest.mark.parametrize(("name", "ref"), [("mod", np.mod), ("fmod", np.fmod)])
def test_legacy_remainders_are_lowered(name: str, ref: Any) -> None:
    pos = np.arange(-64 * 128 + 7, 64 * 128 + 7, dtype=np.int32).reshape(128, 128)
    out, trace = _run01(_legacy(lambda x, y: getattr(lnl, name)(x, 38, dtype=lnl.int32)), pos, pos)
    np.testing.assert_array_equal(out, ref(pos, 38))
    rounding = "floor" if name == "mod" else "trunc"
    assert [(op, alu) for op, alu, src in _compute(trace) if src == f"nl.{name}"] == [
        ("tensor_scalar", ("multiply", None)), ("activation", None), ("tensor_scalar", ("multiply", None)), ("tensor_tensor", "subtract")
    ]  # fmt: skip
    assert [i.attrs["func"] for i in trace if i.op == "activation"] == [rounding]


def test_legacy_divide_costs_what_reciprocal_and_multiply_cost() -> None:
    """The point of lowering: the estimate of nl.divide is the estimate of what the hardware runs."""
    _, lowered = _run01(_legacy(lambda x, y: lnl.divide(x, y)), X, Y)
    _, by_hand = _run01(_legacy(lambda x, y: lnl.multiply(x, lnl.reciprocal(y))), X, Y)
    assert profile_trace(lowered, "trn2")[1].latency_ns == profile_trace(by_hand, "trn2")[1].latency_ns


def test_legacy_isa_ops_refuse_divide() -> None:
    with pytest.raises(emu.NkiValidationError) as info:
        _run01(_legacy(lambda x, y: lisa.tensor_tensor(x, y, np.divide)), X, Y)
    assert (info.value.code, info.value.message) == ("err_op_not_on_hardware", _message("tensor_tensor op=nl.divide", "divide"))
