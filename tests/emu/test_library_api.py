"""The current-API surface AWS's NKI Library reaches (issue 25), on kernels written here.

Submodule imports (``import nki.isa.constants``), ``nki.dtype``, ``nl.NKIObject`` as a base of a
kernel's config dataclass, the packed ``_x4`` dtypes, and ``None`` comparisons and truthiness
of optional tensor arguments evaluated as Python.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkiagent import emu
from nkiagent.emu import NkiError


def test_submodules_import_as_in_awss_package() -> None:
    constants = importlib.import_module("nki.isa.constants")
    from nki.isa.constants import dge_mode, oob_mode

    assert constants.oob_mode is oob_mode is nisa.oob_mode
    assert dge_mode is nisa.dge_mode
    assert importlib.import_module("nki.language.dtypes").bfloat16 == nl.bfloat16
    assert nki.dtype.float32 == np.float32
    assert sys.modules["nki.dtype"] is nki.dtype
    for name in ("nki.tensor", "nki.compiler", "nki.builtin"):
        assert importlib.import_module(name) is sys.modules[name]


def test_unemulated_submodule_names_say_so() -> None:
    with pytest.raises(NkiError, match=r"nki\.compiler\.skip_middle_end is not supported by the nkiagent emulator"):
        _ = nki.compiler.skip_middle_end


def test_dtypes_module_shows_dtypes_not_emulator_helpers() -> None:
    with pytest.raises(NkiError, match="not supported"):
        _ = nki.dtype.as_dtype


@dataclass
class _Tiling(nl.NKIObject):
    """A config object in the library's style: a dataclass on ``nl.NKIObject``."""

    rows: int
    scale: float


def _scaled_copy(x: Any, tiling: _Tiling, bias: Any = None) -> Any:
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((tiling.rows, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=tiling.scale)
    if bias != None and bias:  # the library's spelling: a Python question about an optional argument
        b = nl.ndarray(t.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=b, src=bias)
        nisa.tensor_tensor(dst=t, data1=t, data2=b, op=nl.add)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("with_bias", [False, True])
def test_optional_tensor_argument_and_config_object(with_bias: bool) -> None:
    x = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
    bias = np.full((4, 8), 0.5, np.float32) if with_bias else None
    got = emu.run_kernel(nki.jit(_scaled_copy), (x, _Tiling(rows=4, scale=2.0), bias)).outputs
    np.testing.assert_array_equal(got, x * 2.0 + (0.5 if with_bias else 0.0))


def test_tensor_compared_with_none_is_python() -> None:
    seen: list[Any] = []

    def k(x: Any) -> None:
        seen.extend([x == None, x != None, bool(x), x is not None])

    emu.run_kernel(nki.jit(k), (np.zeros((2, 2), np.float32),))
    assert seen == [False, True, True, True]


def test_tensor_compared_with_a_number_is_still_elementwise() -> None:
    def k(x: Any) -> Any:
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        eq = t == 2.0
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=eq)
        return out

    x = np.array([[1.0, 2.0], [2.0, 3.0]], np.float32)
    np.testing.assert_array_equal(emu.run_kernel(nki.jit(k), (x,)).outputs, (x == 2.0).astype(np.float32))


@pytest.mark.parametrize(("name", "itemsize"), [("float8_e4m3fn_x4", 4), ("float8_e5m2_x4", 4), ("float4_e2m1fn_x4", 2)])
def test_packed_dtypes_are_distinct_and_sized_for_four_values(name: str, itemsize: int) -> None:
    dtype = getattr(nl, name)
    assert dtype.itemsize == itemsize
    others = [
        nl.tfloat32,
        nl.uint32,
        nl.uint16,
        *(getattr(nl, n) for n in ("float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4") if n != name),
    ]
    assert all(dtype != other for other in others)
    assert emu.dtypes.as_dtype(name) == dtype


def test_packed_dtype_moves_by_dma_bit_exact() -> None:
    def k(x: Any) -> Any:
        t = nl.ndarray(x.shape, dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        out = nl.ndarray(x.shape, dtype=nl.float8_e4m3fn_x4, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    packed = np.arange(8, dtype=np.uint32).view(nl.float8_e4m3fn_x4).reshape(2, 4)
    got = emu.run_kernel(nki.jit(k), (packed,)).outputs
    np.testing.assert_array_equal(np.asarray(got).view(np.uint32), packed.view(np.uint32))


def _out(t: Any) -> Any:
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_dma_transpose_4d_default_axes_are_awss() -> None:
    """AWS documents the 4-D default permutation as (3, 1, 2, 0), not a reversal."""

    def k(x: Any) -> Any:
        t = nl.ndarray((x.shape[3], x.shape[1], x.shape[2], x.shape[0]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=x)
        return _out(t)

    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5).astype(nl.bfloat16)
    got = emu.run_kernel(nki.jit(k), (x,)).outputs
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.transpose(x, (3, 1, 2, 0)).astype(np.float32))


def test_int32_tensor_tensor_with_a_psum_operand_runs_on_vector() -> None:
    """The GpSimd default of 32-bit integer add cannot reach PSUM: the default engine stays VectorE there."""
    trace = emu.Trace()

    def k(x: Any) -> Any:
        p = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.psum)
        s = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=x)
        nisa.tensor_copy(dst=p, src=s)
        r = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=r, data1=p, data2=s, op=nl.add)
        nisa.tensor_tensor(dst=s, data1=s, data2=s, op=nl.add)
        return _out(r)

    x = np.arange(8, dtype=np.int32).reshape(2, 4)
    np.testing.assert_array_equal(emu.run_kernel(nki.jit(k), (x,), trace=trace).outputs, 2 * x)
    assert [i.engine for i in trace if i.op == "tensor_tensor"] == ["vector", "gpsimd"]


def test_transpose_mode_matmul_writes_bf16_psum_on_trn2() -> None:
    """Transpose mode moves 16-bit values bit-exactly and writes them to PSUM in their own dtype (trn2+)."""

    def k(x: Any, ident: Any) -> Any:
        xs = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xs, src=x)
        i_s = nl.ndarray(ident.shape, dtype=ident.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=i_s, src=ident)
        p = nl.ndarray((x.shape[1], x.shape[0]), dtype=nl.bfloat16, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=xs, moving=i_s, is_transpose=True)
        s = nl.ndarray(p.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=p)
        return _out(s)

    x = (np.arange(32 * 16, dtype=np.float32).reshape(32, 16) / 7).astype(nl.bfloat16)
    ident = np.eye(32, dtype=np.float32).astype(nl.bfloat16)
    got = emu.run_kernel(nki.jit(k), (x, ident), target="trn2").outputs
    np.testing.assert_array_equal(np.asarray(got).view(np.uint16), np.ascontiguousarray(x.T).view(np.uint16))
    with pytest.raises(NkiError, match="dst dtype must be float32 on gen2, got bfloat16"):
        emu.run_kernel(nki.jit(k), (x, ident), target="trn1")


def test_ap_indirect_offset_steps_rows_of_the_viewed_tensor() -> None:
    """``scalar_offset`` on ``indirect_dim=0`` of a reshaped view steps that view's rows, not the allocation's."""

    def k(data: Any) -> Any:
        view = data.reshape((8, 8))
        reg = nisa.register_alloc(0)
        nisa.register_move(reg, 5)
        row = nl.ndarray((1, 8), dtype=data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=view.ap([[8, 1], [1, 8]], scalar_offset=reg, indirect_dim=0))
        return _out(row)

    data = np.arange(2 * 4 * 8, dtype=np.float32).reshape(2, 4, 8)
    np.testing.assert_array_equal(emu.run_kernel(nki.jit(k), (data,)).outputs, data.reshape(8, 8)[5:6])


@pytest.mark.parametrize("name", ["dma_compute", "quantize_mx", "nc_matmul_mx"])
def test_unemulated_instructions_import_and_refuse_when_called(name: str) -> None:
    """AWS's library imports these at module level; the import works and a call says what is not emulated and why."""
    op = getattr(importlib.import_module("nki.isa"), name)

    def k(x: Any) -> None:
        op()

    with pytest.raises(NkiError, match=rf"nki\.isa\.{name} is not emulated by the nkiagent emulator: \w+"):
        emu.run_kernel(nki.jit(k), (np.zeros((2, 2), np.float32),))
