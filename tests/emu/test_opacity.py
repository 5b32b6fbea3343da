"""Kernel code cannot see tile contents or the trace: no host-side NumPy work is possible.

A kernel that could read its tiles' numbers on the host could compute its answer for free
in NumPy and look infinitely fast to the cost model. These tests pin the walls: tiles have
no array/buffer protocol and refuse conversion, ufuncs, iteration and pickling; Python
operators become the same recorded instructions as ``nl.*`` calls; the ``nki`` modules a
kernel imports expose no emulator helper; the trace records no data.
"""

from __future__ import annotations

import copy
import importlib
import pickle
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import fields
from typing import Any

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nkiagent.emu.instructions.elementwise as emu_elementwise
import nkiagent.emu.isa as emu_isa
import nkiagent.emu.language as emu_language
import nkiagent.shim
from nkiagent import emu
from nkiagent.emu import NkiError


def run(fn: Callable[..., Any], *args: Any, trace: emu.Trace | None = None) -> Any:
    return emu.run_kernel(nki.jit(fn), args, trace=trace).outputs


def probe(attempt: Callable[[Any], Any]) -> BaseException | None:
    """Run ``attempt(tile)`` inside a kernel on an SBUF tile holding data; return what it raised."""
    caught: list[BaseException | None] = []

    def k(x: Any) -> None:
        t = nl.load(x)
        try:
            attempt(t)
        except BaseException as e:  # noqa: BLE001 - the test inspects whatever was raised
            caught.append(e)
        else:
            caught.append(None)

    run(k, np.arange(16, dtype=np.float32).reshape(4, 4))
    return caught[0]


# --------------------------------------------------------------------------------------------
# Tiles refuse to hand out numbers
# --------------------------------------------------------------------------------------------
def test_tiles_have_no_array_interface_or_data_attribute() -> None:
    def attempt(t: Any) -> None:
        for name in (
            "__array__",
            "__array_interface__",
            "__array_struct__",
            "__dlpack__",
            "__buffer__",
            "data",
            "values",
            "numpy",
            "tolist",
            "item",
        ):
            assert not hasattr(t, name), name
        for name in dir(t):
            if not name.startswith("_"):
                value = getattr(t, name)
                assert not isinstance(value, (np.ndarray, memoryview, bytes)), name

    assert probe(attempt) is None


def test_memoryview_of_a_tile_fails() -> None:
    assert isinstance(probe(memoryview), TypeError)


@pytest.mark.parametrize(
    "convert",
    [np.asarray, np.array, lambda t: np.array(t, dtype=np.float32), lambda t: np.asarray(t, dtype=object), np.ascontiguousarray],
)
def test_numpy_conversion_does_not_yield_numbers(convert: Callable[[Any], Any]) -> None:
    err = probe(convert)
    assert isinstance(err, (TypeError, NkiError)), err


@pytest.mark.parametrize(
    "ufunc_call",
    [lambda t: np.add(t, 1.0), lambda t: np.exp(t), lambda t: np.maximum(t, t), lambda t: np.sum(t), lambda t: np.ones((4, 4)) + t],
)
def test_numpy_ufuncs_and_functions_on_tiles_raise(ufunc_call: Callable[[Any], Any]) -> None:
    assert isinstance(probe(ufunc_call), (TypeError, NkiError))


@pytest.mark.parametrize(
    ("convert", "code"),
    [
        (float, "err_dynamic_control_flow_not_supported"),
        (int, "err_dynamic_control_flow_not_supported"),
        (complex, "err_dynamic_control_flow_not_supported"),
        (lambda t: range(t), "err_dynamic_control_flow_not_supported"),
        (lambda t: [0, 1][t], "err_dynamic_control_flow_not_supported"),
        (iter, "err_tensor_not_iterable"),
        (list, "err_tensor_not_iterable"),
        (pickle.dumps, "err_tensor_not_serializable"),
        (copy.deepcopy, "err_tensor_not_serializable"),
        (copy.copy, "err_tensor_not_serializable"),
    ],
)
def test_host_conversions_raise_nki_errors(convert: Callable[[Any], Any], code: str) -> None:
    err = probe(convert)
    assert isinstance(err, NkiError)
    assert err.code == code


def test_hbm_kernel_arguments_are_opaque_too() -> None:
    seen: list[BaseException] = []

    def k(x: Any) -> None:
        for attempt in (float, memoryview, np.asarray, pickle.dumps):
            try:
                attempt(x)
            except BaseException as e:  # noqa: BLE001
                seen.append(e)

    run(k, np.ones((4, 4), np.float32))
    assert len(seen) == 4 and all(isinstance(e, (TypeError, NkiError)) for e in seen)


# --------------------------------------------------------------------------------------------
# The nki namespace a kernel sees holds the API only
# --------------------------------------------------------------------------------------------
_HELPERS = ("current", "running", "f32", "write", "record", "tile", "np", "dt", "isa", "get_target", "close_psum_group",
            "scalar_or_column", "check_compute_operand", "require_tensor", "not_emulated", "ALU", "ACT", "HBM")  # fmt: skip


@pytest.mark.parametrize("module", [nl, nisa])
@pytest.mark.parametrize("name", _HELPERS)
def test_nki_modules_expose_no_emulator_helpers(module: types.ModuleType, name: str) -> None:
    with pytest.raises(emu.NkiUnsupportedError):
        getattr(module, name)
    assert name not in dir(module)


def test_nki_modules_reach_no_context_trace_or_array() -> None:
    for module in (nl, nisa):
        for name in dir(module):
            value = getattr(module, name)
            assert not isinstance(value, (types.ModuleType, np.ndarray, emu.Trace)), f"{module.__name__}.{name}"
    # …while the implementation modules (not importable as nki.*) still hold their helpers
    assert callable(emu_language.current) and callable(emu_elementwise.f32)


def test_public_api_is_complete_through_the_facade() -> None:
    assert nl.add is emu_language.add and nisa.nc_matmul is emu_isa.nc_matmul
    assert nl.sbuf is emu_language.sbuf and nl.tile_size is emu_language.tile_size and nl.bfloat16 == np.dtype("bfloat16")
    assert nisa.engine.vector == 5 and nisa.nc_version.gen3 == 3 and nl.ds(2, 3).as_slice() == slice(2, 5)
    assert sorted(nl.__all__) == dir(nl)
    with pytest.raises(AttributeError):
        nl.__file__  # noqa: B018 - Python's own probes see a plain miss


# --------------------------------------------------------------------------------------------
# Python operators are the same recorded instructions as nl.* calls
# --------------------------------------------------------------------------------------------
def _signature(trace: emu.Trace) -> list[tuple[Any, ...]]:
    return [(i.op, i.engine, i.attrs, [(a.role, a.memory, a.shape, a.dtype) for a in i.reads],
             [(a.role, a.memory, a.shape, a.dtype) for a in i.writes]) for i in trace]  # fmt: skip


def test_operators_record_the_same_instructions_as_nl_functions() -> None:
    x = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    y = np.random.default_rng(1).standard_normal((16, 16)).astype(np.float32)
    xi = np.arange(256, dtype=np.int32).reshape(16, 16)

    def with_operators(a: Any, b: Any, c: Any) -> Any:
        ta, tb, tc = nl.load(a), nl.load(b), nl.load(c)
        results = [ta + tb, ta - tb, ta * tb, ta * 2.0, 2.0 - ta, ta**tb, -ta, abs(ta), ta > tb, ta <= 0.5,
                   tc & 7, tc | tc, tc ^ 5, tc << 1, tc >> 2, ~tc]  # fmt: skip
        for r in results:
            out = nl.ndarray(r.shape, r.dtype, buffer=nl.shared_hbm)
            nl.store(out, r)
        return tuple(results[:1])

    def with_functions(a: Any, b: Any, c: Any) -> Any:
        ta, tb, tc = nl.load(a), nl.load(b), nl.load(c)
        results = [nl.add(ta, tb), nl.subtract(ta, tb), nl.multiply(ta, tb), nl.multiply(ta, 2.0),
                   nl.subtract(2.0, ta), nl.power(ta, tb), nl.negative(ta), nl.abs(ta), nl.greater(ta, tb),
                   nl.less_equal(ta, 0.5), nl.bitwise_and(tc, 7), nl.bitwise_or(tc, tc), nl.bitwise_xor(tc, 5), nl.left_shift(tc, 1),
                   nl.right_shift(tc, 2), nl.invert(tc)]  # fmt: skip
        for r in results:
            out = nl.ndarray(r.shape, r.dtype, buffer=nl.shared_hbm)
            nl.store(out, r)
        return tuple(results[:1])

    t_ops, t_fns = emu.Trace(), emu.Trace()
    emu.run_kernel(nki.jit(with_operators), (x, y, xi), trace=t_ops)
    emu.run_kernel(nki.jit(with_functions), (x, y, xi), trace=t_fns)
    assert len(t_ops) == 3 + 2 * 16  # (/ and % are refused, like nl.divide and nl.mod: test_not_on_hardware)
    assert _signature(t_ops) == _signature(t_fns)


def test_in_place_operators_are_recorded_as_alu_instructions() -> None:
    trace = emu.Trace()

    def k(a: Any) -> Any:
        t = nl.load(a)
        u = nl.load(a)
        t += u
        t -= 1.0
        t *= u
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    x = np.full((4, 4), 3.0, np.float32)
    np.testing.assert_array_equal(run(k, x, trace=trace), (x + x - 1) * x)
    assert [(i.op, i.attrs.get("alu")) for i in trace if i.op != "dma_copy"] == [
        ("tensor_tensor", "add"), ("tensor_scalar", ("subtract", None)), ("tensor_tensor", "multiply"),
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------
# The trace records facts, never data
# --------------------------------------------------------------------------------------------
def _walk(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(k, f"{path}.key")
            yield from _walk(v, f"{path}[{k!r}]")
    elif isinstance(value, (tuple, list)):  # NamedTuples (Access, Region) included
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]")
    elif hasattr(value, "__dataclass_fields__"):
        for f in fields(value):
            yield from _walk(getattr(value, f.name), f"{path}.{f.name}")


def test_the_trace_holds_no_arrays_or_numpy_values() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((128, 64)).astype(np.float32), rng.standard_normal((128, 256)).astype(np.float32)
    table = rng.standard_normal((50, 8)).astype(np.float32)
    idx = rng.integers(0, 50, (16, 1)).astype(np.int32)
    trace = emu.Trace()

    def k(x: Any, y: Any, tab: Any, ix: Any) -> Any:
        tx, ty = nl.load(x), nl.load(y)
        p = nl.ndarray((64, 256), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(p, tx, ty)
        s = nl.ndarray((64, 256), nl.float32)
        col = nl.ndarray((64, 1), nl.float32)
        nisa.activation(dst=s, op=nl.exp, data=p, scale=0.5, reduce_op=nl.add, reduce_res=col)
        nisa.tensor_scalar(dst=s, data=s, op0=nl.multiply, operand0=col, op1=nl.add, operand1=1.0)
        r = nl.ndarray((64, 1), nl.float32)
        nisa.tensor_reduce(dst=r, op=nl.maximum, data=s, axis=1, negate=True)
        io = nl.ndarray((64, 8), nl.int32)
        nisa.iota(io, [[1, 8]], offset=3, channel_multiplier=8)
        nisa.memset(s, 2.5)
        g = nl.ndarray((16, 8), nl.float32)
        nisa.dma_copy(dst=g, src=tab.ap([[8, 16], [1, 8]], vector_offset=nl.load(ix), indirect_dim=0))
        out = nl.ndarray((64, 256), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.softmax(s, axis=1) + 1.0)
        return out

    run(k, a, b, table, idx, trace=trace)
    assert len(trace) > 10
    for path, value in _walk(trace.instructions, "instructions"):
        assert not isinstance(value, (np.ndarray, np.generic, memoryview, bytes)), f"{path} is {type(value).__name__}"
    for path, value in _walk(trace.allocations, "allocations"):
        assert not isinstance(value, (np.ndarray, np.generic, memoryview, bytes)), f"{path} is {type(value).__name__}"


# --------------------------------------------------------------------------------------------
# Installation
# --------------------------------------------------------------------------------------------
def test_install_force_makes_nki_resolve_to_the_emulator() -> None:
    from nkiagent.emu import nki as shim
    from nkiagent.emu.nki import typing as shim_typing

    try:
        emu.uninstall()
        assert "nki" not in sys.modules and "nki.language" not in sys.modules
        assert emu.install(force=True) == "emulator"
        assert importlib.import_module("nki") is shim
        assert importlib.import_module("nki.language") is shim.language
        assert importlib.import_module("nki.isa") is shim.isa
        assert importlib.import_module("nki.typing") is shim_typing
        import nki.language as fresh_nl

        assert fresh_nl is shim.language and fresh_nl.matmul is emu_language.matmul
        assert nki.simulate is emu.simulate and nki.jit is emu.jit
    finally:
        nkiagent.shim.install(force=True)  # what tests/conftest.py installs


def test_real_nki_is_not_available_here_and_plain_install_uses_the_emulator() -> None:
    assert emu.real_nki_available() is False
    try:
        assert emu.install() == "emulator"
        assert sys.modules["nki"].__version__.endswith("+nkiagent.emu")
    finally:
        nkiagent.shim.install(force=True)  # what tests/conftest.py installs
