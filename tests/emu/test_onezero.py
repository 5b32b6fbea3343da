"""``nc_matmul``'s ``is_*_onezero`` hints halve the fp32 matmul's price, so they are believed only when checked.

A flagged operand must hold nothing but 0.0 and 1.0 on every flagged instruction, on that
instruction's data; a timing-only run has no data, so it gets no discount.
"""

from __future__ import annotations

import inspect
from typing import Any

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkiagent import emu
from nkiagent.perf.cost import instruction_cost
from nkiagent.perf.specs import get_spec

K, M, N = 128, 128, 512
RNG = np.random.default_rng(0)
A = RNG.standard_normal((K, M)).astype(np.float32)
MASK = (RNG.random((K, N)) < 0.5).astype(np.float32)  # an honest 0/1 operand
B = RNG.standard_normal((K, N)).astype(np.float32)


def _matmul(stationary_flag: bool = False, moving_flag: bool = False, second_moving: bool = False) -> Any:
    """``a.T @ b`` flagged as asked; with ``second_moving``, a second flagged matmul of the same geometry on ``c``."""

    def k(a: Any, b: Any, c: Any) -> Any:
        sa, sb, sc = (nl.ndarray(t.shape, nl.float32, buffer=nl.sbuf) for t in (a, b, c))
        for dst, src in ((sa, a), (sb, b), (sc, c)):
            nisa.dma_copy(dst=dst, src=src)
        ps = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=sa, moving=sb, is_stationary_onezero=stationary_flag, is_moving_onezero=moving_flag)  # <- first
        res = nl.ndarray((M, N), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=ps)
        if second_moving:
            nisa.nc_matmul(dst=ps, stationary=sa, moving=sc, is_moving_onezero=True)  # <- second
            nisa.tensor_copy(dst=res, src=ps)
        out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=res)
        return out

    return nki.jit(k)


def _line(marker: str) -> str:
    lines, start = inspect.getsourcelines(_matmul)
    (hit,) = [start + i for i, s in enumerate(lines) if f"# <- {marker}" in s]
    return f"{__file__}:{hit}"


def _run(kernel: Any, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, timing_only: bool = False) -> tuple[Any, emu.Trace]:
    trace = emu.Trace()
    c = MASK if c is None else c
    args = tuple(emu.ShapeSpec(x.shape, x.dtype) for x in (a, b, c)) if timing_only else (a, b, c)
    out = emu.run_kernel(kernel, args, target="trn2", trace=trace, timing_only=timing_only).outputs
    return out, trace


def _matmuls(trace: emu.Trace) -> list[Any]:
    return [i for i in trace if i.op == "nc_matmul"]


def _cycles(ins: Any) -> float:
    return instruction_cost(ins, get_spec("trn2")).cycles


def test_honest_onezero_operand_runs_and_gets_the_discount() -> None:
    out, trace = _run(_matmul(moving_flag=True), A, MASK)
    np.testing.assert_allclose(out, A.T.astype(np.float64) @ MASK, rtol=1e-5, atol=1e-4)
    (ins,) = _matmuls(trace)
    assert ins.attrs["onezero"] is True
    assert _cycles(ins) == N * 2  # fp32: ×2 instead of ×4


def test_unflagged_fp32_matmul_pays_four_times() -> None:
    _, trace = _run(_matmul(), A, MASK)
    (ins,) = _matmuls(trace)
    assert ins.attrs["onezero"] is False
    assert _cycles(ins) == N * 4


def test_stationary_flag_checks_the_stationary_operand() -> None:
    identity_like = (np.arange(K)[:, None] == np.arange(M)[None, :]).astype(np.float32)
    out, trace = _run(_matmul(stationary_flag=True), identity_like, B)
    np.testing.assert_allclose(out, B[:M], rtol=1e-6)
    assert _matmuls(trace)[0].attrs["onezero"] is True


@pytest.mark.parametrize(("flag", "role", "shape"), [("moving_flag", "moving", (K, N)), ("stationary_flag", "stationary", (K, M))])
def test_broken_promise_is_an_error(flag: str, role: str, shape: tuple[int, int]) -> None:
    a, b = A.copy(), MASK.copy()
    bad = (3, 7)
    (b if role == "moving" else a)[:] = 1.0
    (b if role == "moving" else a)[bad] = 0.5
    with pytest.raises(emu.NkiValidationError) as info:
        _run(_matmul(**{flag: True}), a, b)
    err = info.value
    assert err.code == "err_matmul_onezero"
    assert err.message == (
        f"nc_matmul is_{role}_onezero=True promises that {role}[{shape[0]}, {shape[1]}] holds only 0.0 and 1.0, but {role}[3, 7] is 0.5; "
        f"pass is_{role}_onezero=False (the flag is a hint for 0/1 matrices such as masks and identities)"
    )
    assert err.location == _line("first")


def test_every_flagged_call_is_checked_not_just_the_first_of_a_geometry() -> None:
    """An honest first use must not vouch for later matmuls of the same shapes (the emulator memoises shape rules)."""
    with pytest.raises(emu.NkiValidationError) as info:
        _run(_matmul(moving_flag=True, second_moving=True), A, MASK, c=B)
    assert info.value.code == "err_matmul_onezero"
    assert info.value.location == _line("second")


@pytest.mark.parametrize("value", [np.nan, -1.0, 2.0])
def test_nan_and_other_values_break_the_promise(value: float) -> None:
    b = MASK.copy()
    b[0, 0] = value
    with pytest.raises(emu.NkiValidationError, match="err_matmul_onezero"):
        _run(_matmul(moving_flag=True), A, b)


def test_timing_only_run_gets_no_discount() -> None:
    """No data, no check: the estimate must not rest on a promise nobody verified."""
    _, trace = _run(_matmul(moving_flag=True), A, MASK, timing_only=True)
    (ins,) = _matmuls(trace)
    assert ins.attrs["onezero"] is False
    assert _cycles(ins) == N * 4


def test_untraced_runs_check_too() -> None:
    """The verifier's correctness runs keep no trace; a broken promise fails them as well."""
    with pytest.raises(emu.NkiValidationError, match="err_matmul_onezero"):
        emu.run_kernel(_matmul(moving_flag=True), (A, B, MASK), target="trn2")
