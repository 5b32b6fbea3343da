"""``nki.simulate`` takes and returns torch CPU tensors when torch is installed (the `torch` extra)."""

from __future__ import annotations

import numpy as np
import torch


def _scale_kernel():
    import nki
    import nki.isa as nisa
    import nki.language as nl

    @nki.jit
    def scale(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, x.dtype)
        nisa.dma_copy(dst=t, src=x)
        u = nl.ndarray(x.shape, x.dtype)
        nisa.tensor_scalar(dst=u, data=t, op0=nl.multiply, operand0=3.0)
        nisa.dma_copy(dst=out, src=u)
        return out

    return scale


def test_torch_float32_in_torch_out() -> None:
    import nki

    x = torch.randn(128, 64)
    y = nki.simulate(_scale_kernel())(x)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32
    torch.testing.assert_close(y, x * 3)


def test_torch_bfloat16_round_trips_bit_exactly() -> None:
    import nki

    x = torch.randn(128, 32).to(torch.bfloat16)
    y = nki.simulate(_scale_kernel())(x)
    assert y.dtype == torch.bfloat16
    expect = (x.float() * 3).to(torch.bfloat16)
    assert torch.equal(y, expect)
    np.testing.assert_array_equal(y.float().numpy(), expect.float().numpy())
