"""``nkiagent.shim.install``: the emulator's faces, with the legacy face's timing entry points on the cost model.

The emulator may import nothing above it (``tests/test_layers.py``), so its own ``neuronxcc.nki``
refuses ``benchmark`` and ``profile`` by name; the shim's face is the emulator's plus those.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator

import numpy as np
import pytest

import nkiagent.emu.neuronxcc.nki as emu_face
import nkiagent.shim.neuronxcc.nki as shim_face
from nkiagent import emu, shim
from nkiagent.emu.legacy.frontend import LegacyKernel
from nkiagent.shim.legacy import BenchmarkKernel, ProfileKernel

TIMING = {"benchmark", "profile", "jit"}


@pytest.fixture
def emulator_only() -> Iterator[None]:
    """Only ``nkiagent.emu.install()`` ran; afterwards, what ``tests/conftest.py`` installs again."""
    try:
        assert emu.install(force=True) == "emulator"
        yield
    finally:
        shim.install(force=True)


def test_install_puts_the_shim_face_over_the_emulators_own_modules() -> None:
    assert shim.install(force=True) == "emulator"
    legacy = importlib.import_module("neuronxcc.nki")
    assert legacy is shim_face and importlib.import_module("neuronxcc").nki is shim_face
    for sub in ("language", "isa", "typing", "compiler"):  # the submodules kernels import stay the emulator's
        assert sys.modules[f"neuronxcc.nki.{sub}"] is getattr(emu_face, sub) is getattr(shim_face, sub)
    assert importlib.import_module("nki") is sys.modules["nki"] and sys.modules["nki"].__version__.endswith("+nkiagent.emu")


def test_the_shim_face_is_the_emulators_plus_the_timing_entry_points() -> None:
    assert set(shim_face.__all__) == set(emu_face.__all__) | {"benchmark", "profile"}
    for name in set(emu_face.__all__) - TIMING:
        assert getattr(shim_face, name) is getattr(emu_face, name), name
    assert isinstance(shim_face.benchmark(lambda x: x), BenchmarkKernel)
    assert isinstance(shim_face.profile(lambda x: x), ProfileKernel)
    assert isinstance(shim_face.jit(lambda x: x, mode="benchmark"), BenchmarkKernel)
    plain = shim_face.jit(lambda x: x, mode="simulation")
    assert type(plain) is LegacyKernel


@pytest.mark.parametrize("name", ["benchmark", "profile"])
def test_the_emulator_alone_refuses_the_timing_entry_points_by_name(emulator_only: None, name: str) -> None:
    legacy = importlib.import_module("neuronxcc.nki")
    assert legacy is emu_face
    with pytest.raises(emu.NkiUnsupportedError) as info:
        exec(f"from neuronxcc.nki import {name}", {})  # noqa: S102 — the import a kernel writes
    assert info.value.code == "err_not_emulated"
    assert info.value.message == (
        f"neuronxcc.nki.{name} answers with nkiagent's cost model, which the emulator alone does not include: "
        "install the front-ends with nkiagent.shim.install() instead of nkiagent.emu.install()"
    )
    with pytest.raises(AttributeError, match="has no attribute 'bench'"):
        _ = legacy.bench  # other names: a plain miss


def test_the_emulator_alone_refuses_jit_benchmark_mode(emulator_only: None) -> None:
    legacy = importlib.import_module("neuronxcc.nki")
    with pytest.raises(emu.NkiUnsupportedError, match=r"neuronxcc\.nki\.jit\(mode='benchmark'\) answers with nkiagent's cost model"):
        legacy.jit(lambda x: x, mode="benchmark")
    kernel = legacy.jit(lambda x: x, mode="auto")  # every other mode still runs
    assert type(kernel) is LegacyKernel


def test_uninstall_removes_both_layers_modules_and_install_restores_them() -> None:
    try:
        shim.uninstall()
        for name in ("nki", "nki.language", "neuronxcc", "neuronxcc.nki", "neuronxcc.nki.language"):
            assert name not in sys.modules, name
    finally:
        shim.install(force=True)
    assert importlib.import_module("neuronxcc.nki") is shim_face
    kernel = shim_face.benchmark(_add_one)
    np.testing.assert_array_equal(kernel(np.zeros((128, 8), np.float32)), np.ones((128, 8), np.float32))


def _add_one(x):  # a 0.1 kernel for the round trip above
    nl = sys.modules["neuronxcc.nki.language"]
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x) + 1.0)
    return out
