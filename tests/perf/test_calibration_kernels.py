"""The calibration kernels (``tests/perf/kernels``) compute the right numbers, at small shapes.

A calibration point is only meaningful if its kernel does the published step's work, so each
kernel is checked against a float64 NumPy reference, and the trn2 ladder's instruction
streams are checked for the loads that tell its steps apart.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import nki  # the emulator: tests/conftest.py installed it
import numpy as np
import pytest

from nkiagent import emu
from tests.perf.kernels import layernorm, mamba, matmul_trn2

BF16 = np.dtype(ml_dtypes.bfloat16)
TRN2_STEPS = [
    matmul_trn2.matmul_sunk_single_buffer,
    matmul_trn2.matmul_psum_tiled_hoisted,
    matmul_trn2.matmul_psum_double_buffered,
    matmul_trn2.matmul_streaming,
]


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------------------------------
# trn2 matmul ladder: bf16 in, bf16 out
# ---------------------------------------------------------------------------------------------
MM_K, MM_M, MM_N = 384, 256, 1024


def _mm_args() -> tuple[np.ndarray, np.ndarray]:
    rng = _rng(1)
    return rng.standard_normal((MM_K, MM_M)).astype(BF16), rng.standard_normal((MM_K, MM_N)).astype(BF16)


@pytest.mark.parametrize("kernel", TRN2_STEPS, ids=lambda k: k.__name__)
def test_trn2_ladder_matches_numpy(kernel: Any) -> None:
    lhsT, rhs = _mm_args()
    out = nki.simulate(kernel)(lhsT, rhs)
    assert out.shape == (MM_M, MM_N) and out.dtype == BF16
    ref = lhsT.astype(np.float64).T @ rhs.astype(np.float64)
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=1e-2, atol=1e-2 * np.abs(ref).max())


@pytest.mark.parametrize(
    "kernel, loads",
    [
        # (m, n, k) tiles: 2 per matmul; resident: one per K tile of each operand; streaming: rhs K tiles + one block per M tile
        (matmul_trn2.matmul_sunk_single_buffer, 2 * (MM_M // 128) * (MM_N // 512) * (MM_K // 128)),
        (matmul_trn2.matmul_psum_tiled_hoisted, 2 * (MM_K // 128)),
        (matmul_trn2.matmul_psum_double_buffered, 2 * (MM_K // 128)),
        (matmul_trn2.matmul_streaming, MM_K // 128 + MM_M // 128),
    ],
    ids=lambda x: getattr(x, "__name__", str(x)),
)
def test_trn2_ladder_steps_differ_in_their_loads_not_their_matmuls(kernel: Any, loads: int) -> None:
    trace = emu.Trace()
    emu.run_kernel(kernel, _mm_args(), target="trn2", trace=trace)
    mms = [i for i in trace.instructions if i.op == "nc_matmul"]
    assert len(mms) == (MM_M // 128) * (MM_N // 512) * (MM_K // 128)
    assert {(i.attrs["K"], i.attrs["M"], i.attrs["N"]) for i in mms} == {(128, 128, 512)}
    hbm_loads = [i for i in trace.instructions if i.op == "dma_copy" and i.writes[0].memory == "sbuf" and i.reads[0].memory != "sbuf"]
    assert len(hbm_loads) == loads


# ---------------------------------------------------------------------------------------------
# fused Mamba: fp32 selective scan
# ---------------------------------------------------------------------------------------------
def _mamba_ref(delta: np.ndarray, u: np.ndarray, A: np.ndarray, B: np.ndarray, C: np.ndarray) -> np.ndarray:
    d, uu, a, b, c = (x.astype(np.float64) for x in (delta, u, A, B, C))
    batch, _, seq_len = d.shape
    out = np.zeros_like(d)
    for i in range(batch):
        decay = np.exp(d[i][:, None, :] * a[:, :, None])  # [channels, state, seq_len]
        inp = (d[i] * uu[i])[:, None, :] * b[i][None, :, :]
        h = np.zeros(a.shape)
        for t in range(seq_len):
            h = decay[:, :, t] * h + inp[:, :, t]
            out[i, :, t] = h @ c[i][:, t]
    return out


def _mamba_args(batch: int, channels: int, state: int, seq_len: int) -> tuple[np.ndarray, ...]:
    rng = _rng(2)
    f32 = np.float32
    return (
        rng.uniform(0.01, 0.2, (batch, channels, seq_len)).astype(f32),  # delta > 0
        rng.standard_normal((batch, channels, seq_len)).astype(f32),
        -rng.uniform(0.5, 2.0, (channels, state)).astype(f32),  # A < 0: a decaying state
        rng.standard_normal((batch, state, seq_len)).astype(f32),
        rng.standard_normal((batch, state, seq_len)).astype(f32),
    )


@pytest.mark.parametrize("kernel", [mamba.mamba_v1, mamba.mamba_v2, mamba.mamba_v3], ids=lambda k: k.__name__)
@pytest.mark.parametrize(
    "shape",
    # seq_len 512: B/C broadcasts read in PSUM; 1024: v1/v2 build them in SBUF and v3 carries its scan across two tiles
    [(1, 256, 4, 512), (2, 128, 3, 1024)],
    ids=["psum-broadcast", "sbuf-broadcast-two-seq-tiles"],
)
def test_mamba_matches_numpy(kernel: Any, shape: tuple[int, int, int, int]) -> None:
    args = _mamba_args(*shape)
    out = nki.simulate(kernel)(*args)
    np.testing.assert_allclose(out.astype(np.float64), _mamba_ref(*args), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# LayerNorm: fp32, ragged last row tile, two bn_stats chunks
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", [layernorm.layernorm_v1, layernorm.layernorm_v2], ids=["v1", "v2"])
def test_layernorm_matches_numpy(kernel: Any) -> None:
    rng = _rng(3)
    x = (rng.standard_normal((300, 1000)) * 3 + 1).astype(np.float32)
    g = rng.standard_normal(1000).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    out = nki.simulate(kernel)(x, g, b)
    x64 = x.astype(np.float64)
    mu = x64.mean(axis=1, keepdims=True)
    ref = (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(axis=1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=1e-4, atol=1e-4)
