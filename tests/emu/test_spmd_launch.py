"""SPMD launches: a plain entry may pick the grid from the shapes; programs never share SBUF/PSUM tiles."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from nkiagent import emu, shim

shim.install()
import nki
import nki.isa as nisa
import nki.language as nl

from nkiagent.emu.errors import NkiError

P, BLOCK = 128, 384


@nki.jit
def _program(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    i, j = nl.program_id(0), nl.program_id(1)
    cols = nl.ds(j * BLOCK, min(BLOCK, d - j * BLOCK))  # the last column program takes the ragged tail
    ta = nl.load(a[nl.ds(i * P, P), cols])
    tb = nl.load(b[nl.ds(i * P, P), cols])
    nl.store(out[nl.ds(i * P, P), cols], ta + tb)
    return out


def launcher(a, b):
    """The host-side launch: the grid comes from the shapes."""
    n, d = a.shape
    return _program[n // P, -(-d // BLOCK)](a, b)


@pytest.mark.parametrize("shape", [(256, 512), (384, 1000)])
def test_a_plain_entry_launches_a_grid_chosen_from_the_shapes(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(shape, dtype=np.float32), rng.standard_normal(shape, dtype=np.float32)
    trace = emu.Trace()
    out = emu.run_kernel(launcher, (a, b), target="trn2", trace=trace).outputs
    np.testing.assert_array_equal(out, a + b)
    programs = {ins.program_id for ins in trace.instructions}
    assert len(programs) == (shape[0] // P) * -(-shape[1] // BLOCK)


def test_a_jit_kernel_may_not_launch_a_grid_inside_itself() -> None:
    @nki.jit
    def outer(a, b):
        return _program[2, 2](a, b)

    a = np.ones((256, 768), np.float32)
    with pytest.raises(NkiError, match="err_nested_kernel_with_spmd_grid"):
        emu.run_kernel(outer, (a, a), target="trn2")


@functools.cache
def _shared_tile(width: int):
    return nl.ndarray((P, width), dtype=nl.float32, buffer=nl.sbuf)


@nki.jit
def _cached_tile_program(a):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    t = _shared_tile(d)  # program 1 gets program 0's tile from the cache
    nisa.dma_copy(dst=t, src=a[nl.ds(i * P, P), :])
    nisa.dma_copy(dst=out[nl.ds(i * P, P), :], src=t)
    return out


def test_a_tile_of_one_program_cannot_be_used_by_another() -> None:
    _shared_tile.cache_clear()
    a = np.ones((256, 64), np.float32)
    with pytest.raises(NkiError, match=r"allocated by SPMD program \[0\] and program \[1\] cannot use it.*\[err_tile_of_another_program\]"):
        emu.run_kernel(_cached_tile_program[2], (a,), target="trn2")
