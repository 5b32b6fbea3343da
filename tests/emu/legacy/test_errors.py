"""One test per NKI 0.1 error code the legacy front-end raises: exact code, exact message, location.

The codes and texts are those of the 0.1 error manual (``nki.errors``, SDK 2.26); the
kernels mostly follow the manual's own examples. Each kernel marks the line that must fail
with ``# <- error`` and :func:`expect_error` checks the error points exactly there.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np
import pytest
from neuronxcc import nki

from nkiagent.emu import NkiError, NkiWarning

MARK = "# <- error"


def marked_line(fn: Callable[..., Any]) -> str:
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if MARK in text]
    assert len(hits) == 1, f"kernel {fn.__name__} must mark exactly one line"
    return f"{fn.__code__.co_filename}:{hits[0]}"


def expect_error(fn: Callable[..., Any], *args: Any, code: str, message: str, grid: tuple[int, ...] = ()) -> None:
    kernel = nki.jit(fn)
    with pytest.raises(NkiError) as info:
        nki.simulate_kernel(kernel[grid] if grid else kernel, *args)
    err = info.value
    assert (err.code, err.message) == (code, message)
    assert err.location == marked_line(fn)


def _zeros(*shape: int) -> np.ndarray:
    return np.zeros(shape, dtype=np.float32)


# --------------------------------------------------------------------------------------------
# Indexing and masks
# --------------------------------------------------------------------------------------------
def test_err_1d_arange_not_supported() -> None:
    def k():
        tmp = nl.zeros((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        i = nl.arange(64)
        nl.exp(tmp[i, 0])  # <- error

    expect_error(k, code="err_1d_arange_not_supported", message="indexing tensor `tmp` with 1d arange is not supported")


def test_err_unsupported_mixing_basic_advanced_tensor_indexing() -> None:
    def k():
        a = nl.zeros((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        i = nl.arange(4)[:, None]
        nl.exp(a[i, :])  # <- error

    expect_error(k, code="err_unsupported_mixing_basic_advanced_tensor_indexing",
                 message="Mixing basic tensor indexing and advanced tensor indexing is not supported.")


def test_err_cannot_assign_to_index() -> None:
    def k():
        _, x = nl.mgrid[0:1, 0:8]
        x[0, 5] = 1024  # <- error

    expect_error(k, code="err_cannot_assign_to_index", message="'index' tensor does not support item assignment")


def test_err_control_flow_condition_depending_on_arange() -> None:
    def k(x):
        for j0 in nl.affine_range(4):
            j = j0 * 512 + nl.arange(512)[None, :]
            if j > 2048:  # <- error
                nl.store(x[0, j], value=0.0)

    expect_error(k, _zeros(1, 4096), code="err_control_flow_condition_depending_on_arange",
                 message="Control-flow depending on `nl.arange` or `nl.mgrid` is not supported")


@pytest.mark.parametrize("kind", ["store_without_mask", "block_index", "integer_index"])
def test_err_tensor_access_out_of_bound(kind: str) -> None:
    def store_without_mask():
        x = nl.ndarray([128, 4000], dtype=np.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range((4000 + 512 - 1) // 512):
            tile = nl.mgrid[0:128, 0:512]
            nl.store(x[tile.p, i * 512 + tile.x], value=0)  # <- error
        return x

    def block_index():
        a = nl.ndarray((4, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.sbuf)
        a[4] = 0  # <- error

    def integer_index():
        a = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        a[nl.arange(128)[:, None], 512] = 0  # <- error

    fn, message = {
        "store_without_mask": (store_without_mask, "Out-of-bound access for tensor `x` on dimension 1: index range [3584, 4095] exceed dimension size of 4000"),
        "block_index": (block_index, "Out-of-bound access for tensor `a` on dimension 0: index 4 exceed dimension size of 4"),
        "integer_index": (integer_index, "Out-of-bound access for tensor `a` on dimension 1: index 512 exceed dimension size of 512"),
    }[kind]
    expect_error(fn, code="err_tensor_access_out_of_bound", message=message)


@pytest.mark.parametrize("kind", ["non_affine", "or", "diagonal", "tensor"])
def test_err_unsupported_expression_in_mask(kind: str) -> None:
    def non_affine(out: nt.mutable_tensor):
        i = nl.arange(8)[None, :]
        nl.store(out[nl.arange(128)[:, None], i], value=0.0, mask=(i % 4) < 2)  # <- error
        return out

    def or_(out: nt.mutable_tensor):
        i = nl.arange(8)[None, :]
        nl.store(out[nl.arange(128)[:, None], i], value=0.0, mask=(i < 2) | (i > 5))  # <- error
        return out

    def diagonal(out: nt.mutable_tensor):
        i_p, i_f = nl.arange(128)[:, None], nl.arange(8)[None, :]
        nl.store(out[i_p, i_f], value=0.0, mask=i_p + i_f < 64)  # <- error
        return out

    def tensor(out: nt.mutable_tensor):
        t = nl.load(out)
        nl.store(out, value=t, mask=t > 0)  # <- error
        return out

    fn, detail = {
        "non_affine": (non_affine, "the expression uses a non-affine operation (//, % or a product of indices)"),
        "or": (or_, "masks combine comparisons with '&' only ('|' and '~' do not select a sub-rectangle)"),
        "diagonal": (diagonal, "a comparison involves index dims [0, 1]; each comparison must restrict one dim to select a sub-rectangle"),
        "tensor": (tensor, "got NkiTensor; build masks by comparing nl.arange/nl.mgrid expressions and loop indices"),
    }[kind]

    expect_error(fn, _zeros(128, 8), code="err_unsupported_expression_in_mask",
                 message=f"NKI mask expressions must be affine expressions of static loop indices: {detail}")


# --------------------------------------------------------------------------------------------
# Tiles, memories, shapes
# --------------------------------------------------------------------------------------------
def test_err_failed_to_infer_tile_from_local_tensor() -> None:
    def k():
        a = nl.zeros((4, nl.par_dim(8), 8), dtype=nl.float32, buffer=nl.sbuf)
        nl.add(a, 32)  # <- error

    expect_error(k, code="err_failed_to_infer_tile_from_local_tensor", message="Failed to infer tile from tensor 'a',")


@pytest.mark.parametrize("kind", ["load_from_sbuf", "exp_of_hbm"])
def test_err_unsupported_memory(kind: str) -> None:
    def load_from_sbuf():
        tmp = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        nl.load(tmp)  # <- error

    def exp_of_hbm():
        tmp = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.hbm)
        nl.exp(tmp)  # <- error

    fn, message = {
        "load_from_sbuf": (load_from_sbuf, "Expected operand 'src' of 'load' to be in address space 'hbm', but got a tile in 'sbuf' instead."),
        "exp_of_hbm": (exp_of_hbm, "Expected operand 'x' of 'exp' to be in address space 'psum|sbuf', but got a tile in 'hbm' instead."),
    }[kind]
    expect_error(fn, code="err_unsupported_memory", message=message)


def test_err_num_partition_exceed_arch_limit() -> None:
    def k():
        nl.zeros(shape=[256, 1024], dtype=np.float32, buffer=nl.sbuf)  # <- error

    expect_error(k, code="err_num_partition_exceed_arch_limit", message="number of partitions 256 exceed architecture limitation of 128.")


def test_err_num_partition_mismatch() -> None:
    def k():
        x = nl.zeros(shape=[128, 512], dtype=np.float32, buffer=nl.sbuf)
        y0 = nl.zeros(shape=[1, 512], dtype=np.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(x, y0, op=nl.add)  # <- error

    expect_error(k, code="err_num_partition_mismatch",
                 message="number of partitions (dimension 0 size of a tile) mismatch in parameters (data1[128, 512], data2[1, 512]) of 'tensor_tensor'")


def test_err_exceed_max_supported_dimension() -> None:
    def k():
        x = nl.zeros(shape=[64, 32, 2], dtype=np.float32, buffer=nl.sbuf)
        nl.transpose(x)  # <- error

    expect_error(k, code="err_exceed_max_supported_dimension",
                 message="parameter 'x[64, 32, 2]' of 'transpose' exceed max supported number of dimensions of 2.")


def test_err_size_of_dimension_exceed_arch_limit() -> None:
    def k():
        x = nl.zeros(shape=[128, 512], dtype=np.float32, buffer=nl.sbuf)
        nl.transpose(x)  # <- error

    expect_error(k, code="err_size_of_dimension_exceed_arch_limit",
                 message="size of dimension 1 in 'x[128, 512]' of 'transpose' exceed architecture limitation of 128.")


def test_err_store_dst_shape_smaller_than_other_shape() -> None:
    def k():
        x = nl.zeros(shape=(128, 512), dtype=nl.float32, buffer=nl.sbuf)
        y = nl.zeros(shape=(128, 1), dtype=nl.float32, buffer=nl.sbuf)
        x[...] = y  # broadcasting from the source to the destination is fine
        y[...] = x  # <- error

    expect_error(k, code="err_store_dst_shape_smaller_than_other_shape",
                 message="Illegal assignment destination shape in 'a = b': shape [128, 1] of parameter 'a' is smaller than other parameter shapes b[128, 512].")


def test_err_hbm_tensor_with_init_value_not_supported() -> None:
    def k():
        nl.full((3, 128, 512), fill_value=1.0, dtype=nl.float32, buffer=nl.shared_hbm)  # <- error

    expect_error(k, code="err_hbm_tensor_with_init_value_not_supported", message="Creating HBM tensor with init value is not supported.")


@pytest.mark.parametrize("kind", ["nki_loop", "python_loop", "helper"])
def test_err_shared_hbm_must_in_kernel_level(kind: str) -> None:
    def nki_loop():
        for i in nl.affine_range(2):
            nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)  # <- error

    def python_loop():
        for i in range(2):  # the second creation on the line shows it is in a loop
            nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)  # <- error

    def helper():
        def func():
            return nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)  # <- error

        func()

    fn = {"nki_loop": nki_loop, "python_loop": python_loop, "helper": helper}[kind]
    expect_error(fn, code="err_shared_hbm_must_in_kernel_level", message="shared_hbm buffer can only be created top level kernel scope")


# --------------------------------------------------------------------------------------------
# Activation operands
# --------------------------------------------------------------------------------------------
def test_err_activation_bias_invalid_type() -> None:
    def k():
        data = nl.zeros((128, 64), dtype=nl.float32)
        nisa.activation(op=nl.exp, data=data, bias=nisa.memset((128, 1), 1, dtype=np.int8))  # <- error

    expect_error(k, code="err_activation_bias_invalid_type",
                 message="Bias parameter of activation or activation_reduce must be a vector of type float32, float16, or bfloat16.")


def test_err_activation_scale_invalid_type() -> None:
    def k():
        data = nl.zeros((128, 64), dtype=nl.float32)
        nisa.activation(op=nl.exp, data=data, scale=nisa.memset((128, 1), 1.2, dtype=np.float16))  # <- error

    expect_error(k, code="err_activation_scale_invalid_type",
                 message="Scale parameter of activation or activation_reduce must be a scalar or vector of type float32.")


def test_err_activation_scale_scalar_or_vector() -> None:
    def k():
        data = nl.zeros((128, 64), dtype=nl.float32)
        nisa.activation(op=nl.exp, data=data, scale=nisa.memset((1, 128), 1.2, dtype=np.float32))  # <- error

    expect_error(k, code="err_activation_scale_scalar_or_vector",
                 message="Scale parameter of activation must be either a scalar value or a 1D vector spanning the partition dimension.")


# --------------------------------------------------------------------------------------------
# Control flow on tensor values
# --------------------------------------------------------------------------------------------
def test_err_dynamic_control_flow_not_supported() -> None:
    def k(a):
        cnd = nl.load(a)
        if cnd:  # <- error
            pass

    expect_error(k, _zeros(1, 1), code="err_dynamic_control_flow_not_supported",
                 message="dynamic control-flow depending on tensor value is not supported.")


def test_err_ambiguous_tensor_truth_value() -> None:
    def k(a):
        t = nl.load(a)
        if t:  # <- error
            pass

    expect_error(k, _zeros(128, 128), code="err_ambiguous_tensor_truth_value",
                 message="ValueError: Cannot evaluate truth value of a multi-element tensor/array.")


# --------------------------------------------------------------------------------------------
# Kernel parameters and outputs
# --------------------------------------------------------------------------------------------
def test_err_cannot_update_immutable_parameter() -> None:
    def k(in_tensor):
        y = nl.load(in_tensor) + 1
        nl.store(in_tensor, value=y)  # <- error
        return in_tensor

    expect_error(k, _zeros(128, 8), code="err_cannot_update_immutable_parameter", message="Cannot update immutable parameter")


def test_err_mutable_parameter_not_returned() -> None:
    def k(in_tensor: nt.mutable_tensor):  # <- error
        out_tensor = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.shared_hbm)
        y = nl.load(in_tensor) + 1
        nl.store(out_tensor, value=y)
        nl.store(in_tensor, value=y)
        return out_tensor

    expect_error(k, _zeros(128, 8), code="err_mutable_parameter_not_returned",
                 message="Mutable kernel parameter not returned by `return` statement")


def test_err_tensor_output_not_written_to() -> None:
    def k(tensor_in):  # <- error
        out = nl.ndarray(tensor_in.shape, dtype=tensor_in.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(128 // 129):  # a dead loop: the store never runs
            nl.store(out, value=nl.load(tensor_in))
        return out

    expect_error(k, _zeros(128, 8), code="err_tensor_output_not_written_to",
                 message="output tensor `out` is returned but never written by the kernel")


@nki.trace
def kernel1():
    """A sub-kernel for the nested-grid test."""


def test_err_nested_kernel_with_spmd_grid() -> None:
    def k():
        kernel1()  # a sub-kernel without a grid is fine
        kernel1[4, 4]()  # <- error

    expect_error(k, code="err_nested_kernel_with_spmd_grid",
                 message="Calling kernel with spmd grid (kernel1[4, 4]) inside another kernel is not supported")


def test_err_nki_api_outside_of_nki_kernel() -> None:
    with pytest.raises(NkiError) as info:
        nl.zeros((128, 128), dtype=nl.float32)  # <- error
    assert (info.value.code, info.value.message) == ("err_nki_api_outside_of_nki_kernel", "Calling NKI API outside of NKI kernels is not supported.")
    assert info.value.location == marked_line(test_err_nki_api_outside_of_nki_kernel)


# --------------------------------------------------------------------------------------------
# Loop-carried output dependencies
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["block", "hbm"])
def test_err_unexpected_output_dependencies(kind: str) -> None:
    def block():
        a = nl.ndarray((4, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(4):
            a[0] = 0  # <- error

    def hbm(x):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            nl.store(out[64:128, :], value=nl.load(x[i, 64:128, :]))  # <- error
        return out

    fn, args, who, target = {
        "block": (block, (), "different iterations of i loop", "a[0]"),
        "hbm": (hbm, (_zeros(2, 128, 512),), "different iterations of i loop", "out[64, 0]"),
    }[kind]
    expect_error(fn, *args, code="err_unexpected_output_dependencies",
                 message=f"Unexpected output dependencies, {who} write to `{target}`")


def test_spmd_instances_writing_one_place_warn() -> None:
    """0.1 compiles one SPMD instance and cannot see such writes (nki-samples' resize_nearest repeats identical ones)."""

    @nki.jit
    def spmd(x):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x[nl.program_id(0)]))
        return out

    x = np.stack([np.zeros((128, 512), np.float32), np.ones((128, 512), np.float32)])
    with pytest.warns(NkiWarning, match=r"different SPMD kernel instances write to `out\[0, 0\]`: a race on hardware unless they write the same values"):
        out = nki.simulate_kernel(spmd[2], x)
    np.testing.assert_array_equal(out, x[1])  # the emulator runs instances in order: the last one wins


def test_err_unsupported_perf_mode() -> None:
    """Double-row matmuls are emulated for [K, 2, M] x [K, 2, N] operands only; others are named as not emulated."""

    def k():
        lhs = nl.zeros((128, 128), dtype=nl.float8_e4m3, buffer=nl.sbuf)
        rhs = nl.zeros((128, 512), dtype=nl.float8_e4m3, buffer=nl.sbuf)
        res = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        res[...] += nisa.nc_matmul(lhs, rhs, perf_mode="double_row_gen3")  # <- error

    expect_error(k, code="err_unsupported_perf_mode",
                 message="nc_matmul(perf_mode='double_row_gen3') is emulated for unmasked [K, 2, M] x [K, 2, N] operands, got [128, 128] and [128, 512]")
