"""The ``neuronxcc.nki`` entry points and modules the emulator provides.

``install()`` (run by ``tests/conftest.py``) maps ``neuronxcc``, ``neuronxcc.nki`` and its
``language`` / ``isa`` / ``typing`` / ``compiler`` modules to the legacy front-end. The
entry points (``jit`` in its modes, ``trace``, ``simulate_kernel``, ``baremetal``) all run
on the emulator with the 0.1 semantics; ``benchmark`` and ``profile``, which answer with the
cost model, are tested with the layer that provides them (``tests/shim/``).
"""

from __future__ import annotations

import sys

import neuronxcc
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np
import pytest
from neuronxcc import nki

from nkiagent import emu


def add_one(x):
    """A small 0.1 kernel, decorated differently by each test."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x) + 1.0)
    return out


def _x() -> np.ndarray:
    return np.arange(128 * 64, dtype=np.float32).reshape(128, 64)


def test_install_provides_the_legacy_modules() -> None:
    assert neuronxcc.nki is nki and nki.language is nl and nki.isa is nisa and nki.compiler is ncc and nki.typing is nt
    for name in ("neuronxcc", "neuronxcc.nki", "neuronxcc.nki.language", "neuronxcc.nki.isa", "neuronxcc.nki.typing", "neuronxcc.nki.compiler"):
        assert name in sys.modules
    from neuronxcc import nki as again
    from neuronxcc.nki import baremetal, benchmark, jit, profile, simulate_kernel, trace  # noqa: F401
    from neuronxcc.nki.language import par_dim  # noqa: F401

    assert again is nki
    assert emu.real_neuronxcc_available() is False


def test_facades_expose_only_the_api_and_name_what_is_missing() -> None:
    assert "arange" in dir(nl) and "mgrid" in dir(nl) and "par_dim" in dir(nl) and "nc_matmul" in dir(nisa)
    assert "current" not in dir(nl) and "restrict" not in dir(nl)
    with pytest.raises(emu.NkiUnsupportedError) as info:
        _ = nl.atomic_rmw
    assert info.value.code == "err_not_emulated" and "neuronxcc.nki.language.atomic_rmw is not supported" in info.value.message
    with pytest.raises(emu.NkiUnsupportedError):
        _ = nisa.builtin_custom_op


@pytest.mark.parametrize("mode", ["auto", "simulation", "baremetal", "jax", "torchxla"])
def test_jit_modes_run_on_the_emulator(mode: str) -> None:
    kernel = nki.jit(add_one, mode=mode)
    np.testing.assert_array_equal(kernel(_x()), _x() + 1)


def test_jit_platform_target_selects_the_target() -> None:
    kernel = nki.jit(add_one, mode="simulation", platform_target="trn1")
    trace = emu.Trace()
    emu.run_kernel(kernel, (_x(),), trace=trace)
    assert trace.target == "trn1"


@nki.trace
def double_into(dst, src):
    """A sub-kernel (``@nki.trace``) writing into the caller's tile."""
    dst[...] = nl.multiply(src, 2.0)


@nki.jit(mode="trace")
def negate(t):
    return nl.negative(t)


@nki.jit
def uses_helpers(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    double_into(d, t)
    nl.store(out, value=negate(d))
    return out


def test_trace_mode_helpers_are_called_from_kernels() -> None:
    np.testing.assert_array_equal(uses_helpers(_x()), -2 * _x())


def test_simulate_kernel_and_baremetal() -> None:
    np.testing.assert_array_equal(nki.simulate_kernel(add_one, _x()), _x() + 1)
    np.testing.assert_array_equal(nki.simulate_kernel(nki.jit(add_one), _x()), _x() + 1)
    np.testing.assert_array_equal(nki.baremetal(add_one)(_x()), _x() + 1)
    np.testing.assert_array_equal(nki.baremetal(save_neff_name="k.neff", artifacts_dir="/nonexistent")(add_one)(_x()), _x() + 1)


def test_simulate_kernel_accepts_torch_tensors() -> None:
    torch = pytest.importorskip("torch")
    out = nki.simulate_kernel(add_one, torch.ones(128, 4))
    assert isinstance(out, torch.Tensor) and bool((out == 2).all())


@ncc.enable_stack_allocator
@ncc.skip_middle_end_transformations
@ncc.force_auto_alloc()
@nki.jit
def with_directives(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.ndarray((2, nl.par_dim(128), 64), dtype=nl.float32, buffer=ncc.sbuf.auto_alloc())
    b = nl.ndarray((nl.par_dim(128), 64), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=4096))
    p = nl.ndarray((2, nl.par_dim(128), 64), dtype=nl.float32, buffer=ncc.psum.mod_alloc(base_bank=2, num_bank_tiles=(2,)))
    with ncc.no_reorder(), ncc.allocation_scope(), ncc.multi_buffer(2):
        for i in nl.affine_range(2):
            a[i] = nl.load(x)
            p[i] = nisa.tensor_copy(a[i])
        b[...] = nl.add(p[0], a[1])  # (two PSUM operands would be illegal)
    nl.store(out, value=b)
    return out


def test_compiler_directives_and_direct_allocation_are_accepted() -> None:
    trace = emu.Trace()
    out = emu.run_kernel(with_directives, (_x(),), trace=trace).outputs
    np.testing.assert_array_equal(out, 2 * _x())
    placed = {a["name"]: (a["memory"], a["address"]) for a in trace.allocations}
    assert placed["b"] == ("sbuf", 4096)
    assert (placed["p[0]"], placed["p[1]"]) == (("psum", 2 * 2048), ("psum", 3 * 2048))
    assert ncc.sbuf.auto_alloc() is nl.sbuf and ncc.psum.auto_alloc() is nl.psum


def test_float64_arguments_are_stored_as_float32_in_legacy_kernels_only() -> None:
    x = np.linspace(0, 1, 128 * 8).reshape(128, 8)  # float64
    out = nki.simulate_kernel(add_one, x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, x + 1, rtol=1e-6)
    import nki as nki03  # the 0.3 API still rejects float64

    with pytest.raises(emu.NkiTypeError) as info:
        nki03.simulate(nki03.jit(lambda a: a))(x)
    assert info.value.code == "err_kernel_arg_dtype"


def test_legacy_kernels_force_the_legacy_api_in_run_kernel() -> None:
    """The verifier picks ``api`` from the source; a ``neuronxcc.nki.jit`` kernel is 0.1 whatever it is told."""
    out = emu.run_kernel(nki.jit(add_one), (_x(),), api="0.3").outputs
    np.testing.assert_array_equal(out, _x() + 1)


def test_legacy_api_in_a_current_launch_is_a_clear_error() -> None:
    def mixed(x):
        return nl.zeros((2, nl.par_dim(128), 4), dtype=nl.float32)

    with pytest.raises(emu.NkiRuntimeError) as info:
        emu.run_kernel(mixed, (_x(),), api="0.3")
    assert info.value.code == "err_api_generation_mismatch"


def test_static_cast_casts_host_arrays() -> None:
    """Tests prepare inputs with ``nl.static_cast(array, dtype)`` outside kernels: the array comes back in that dtype."""
    import ml_dtypes
    import neuronxcc.nki.language as nl

    x = np.array([[1.0, 0.3333333333, -2.5]])
    bf = nl.static_cast(x, nl.bfloat16)
    assert bf.dtype == np.dtype(ml_dtypes.bfloat16) and float(bf[0, 1]) == 0.333984375
    f8 = nl.static_cast(x, nl.float8_e4m3)
    assert f8.dtype == nl.float8_e4m3 and [float(v) for v in f8[0]] == [1.0, 0.34375, -2.5]
