"""The fast paths change nothing a kernel or the cost model can see: both ways give the same bits and trace.

Each kernel of the emulator's corpus (``tests/emu/kernels``) runs with the fast paths on and off
(``run_kernel(fast=...)``, the same switch as ``NKIAGENT_EMU_FAST``); outputs must be equal bit
for bit and trace digests equal. Matmul inputs are small integers: the batch sums its K tiles in
one GEMM where the reference adds one instruction's product at a time, the same fp32
accumulation in another rounding order, exact only where fp32 sums exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from nkiagent import emu
from nkiagent.emu import fast
from nkiagent.emu.fast import matmul as batching
from tests.emu.kernels import attention, layernorm, matmul, rmsnorm, softmax, spmd, transpose, vector_add

RNG = np.random.default_rng(7)
BF16 = ml_dtypes.bfloat16


def _f(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _ints(*shape: int, dtype: Any = BF16) -> np.ndarray:
    return RNG.integers(-3, 4, shape).astype(dtype)


CASES: dict[str, tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = {
    "vector_add": (vector_add.vector_add, (_f(130, 600), _f(130, 600)), {}),
    "vector_add_spmd": (spmd.vector_add_spmd[2], (_f(256, 64), _f(256, 64)), {}),
    "softmax": (softmax.softmax, (_f(130, 300),), {}),
    "rmsnorm": (rmsnorm.rmsnorm, (_f(130, 256), _f(256)), {}),
    "layernorm": (layernorm.layernorm, (_f(130, 256), _f(256), _f(256)), {}),
    "layernorm_bn": (layernorm.layernorm_bn, (_f(130, 256), _f(256), _f(256)), {}),
    "transpose_pe": (transpose.transpose_pe, (_f(200, 136),), {}),
    "transpose_dma": (transpose.transpose_dma, (_f(200, 136),), {}),
    "matmul_tiled": (matmul.matmul_tiled, (_ints(256, 256), _ints(256, 512)), {}),
    "matmul_fully_optimized": (
        matmul.matmul_fully_optimized, (_ints(512, 256), _ints(512, 512)),
        {"tiles_in_block_m": 2, "tiles_in_block_n": 1, "tiles_in_block_k": 2},
    ),
    "attention": (attention.attention, ((_ints(128, 128) / 4).astype(BF16), _ints(128, 512), _ints(512, 64)), {}),
}  # fmt: skip


def _run(case: str, on: bool) -> tuple[Any, str]:
    kernel, args, kwargs = CASES[case]
    trace = emu.Trace()
    result = emu.run_kernel(kernel, args, kwargs, target="trn2", trace=trace, fast=on)
    return result.outputs, trace.digest()


@pytest.mark.parametrize("case", sorted(CASES))
def test_fast_and_reference_paths_agree_bit_for_bit(case: str) -> None:
    out_fast, digest_fast = _run(case, True)
    out_ref, digest_ref = _run(case, False)
    assert digest_fast == digest_ref
    a, b = np.asarray(out_fast), np.asarray(out_ref)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()
    assert not math.isnan(float(np.asarray(a, np.float64).sum()))


def test_the_switch_really_turns_matmul_batching_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off, every nc_matmul lands on its own (one product each); on, K tiles into one PSUM tile land as one."""
    products: list[int] = []
    real = batching._product
    monkeypatch.setattr(batching, "_product", lambda ctx, g, keep: products.append(len(g.views)) or real(ctx, g, keep))
    kernel, args, kwargs = CASES["matmul_fully_optimized"]
    emu.run_kernel(kernel, args, kwargs, fast=False)
    assert products and set(products) == {1}
    products.clear()
    emu.run_kernel(kernel, args, kwargs, fast=True)
    assert max(products) > 1


@pytest.mark.parametrize(("value", "expect"), [("1", True), ("0", False), (" 0 ", False)])
def test_the_environment_variable_sets_the_default(value: str, expect: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fast.ENV, value)
    assert fast.enabled() is expect
    assert fast.enabled(not expect) is (not expect)  # an explicit option wins


def test_a_bad_environment_value_is_an_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fast.ENV, "yes")
    with pytest.raises(ValueError, match=r"^NKIAGENT_EMU_FAST='yes': set it to 1 \(fast paths, the default\) or 0"):
        emu.run_kernel(vector_add.vector_add, (_f(4, 4), _f(4, 4)))
