"""The comparison's block-by-block pass path finds a bad element wherever it sits, as the whole-array path does."""

from __future__ import annotations

import numpy as np
import pytest

from nkiagent.tasks.spec import Tolerance
from nkiagent.verify import compare as cmp_mod
from nkiagent.verify.compare import compare

N = 3 * cmp_mod._BLOCK + 1234  # a ragged last block


@pytest.fixture
def ref() -> np.ndarray:
    return np.random.default_rng(0).standard_normal(N).astype(np.float32)


@pytest.mark.parametrize("where", [0, cmp_mod._BLOCK - 1, cmp_mod._BLOCK, 2 * cmp_mod._BLOCK + 7, N - 1])
@pytest.mark.parametrize("bad", [1.0, np.nan, np.inf])
def test_one_bad_element_in_any_block_fails_with_its_index(ref: np.ndarray, where: int, bad: float) -> None:
    out = ref.copy()
    out[where] = ref[where] + bad if np.isfinite(bad) else bad
    for tol in (Tolerance(rtol=1e-3, atol=1e-3), Tolerance(rel_l2=1e-9)):
        c = compare(out, ref, tol)
        assert not c.ok and c.first_mismatch == (where,), (tol, c)


def test_within_tolerance_passes_with_the_largest_error(ref: np.ndarray) -> None:
    out = ref + np.float32(1e-6)
    out[N - 1] += np.float32(1e-4)
    c = compare(out, ref, Tolerance(rtol=1e-3, atol=1e-3))
    assert c.ok and c.max_abs_err == pytest.approx(float(np.abs(out - ref).max()))
    l2 = compare(out, ref, Tolerance(rel_l2=1e-3))
    assert l2.ok and l2.rel_l2 == pytest.approx(float(np.linalg.norm((out - ref).astype(np.float64)) / np.linalg.norm(ref.astype(np.float64))))


def test_a_relative_l2_over_the_bound_fails(ref: np.ndarray) -> None:
    out = ref * np.float32(1.1)
    c = compare(out, ref, Tolerance(rel_l2=0.05))
    assert not c.ok and c.reason.startswith("relative L2 error 0.1")
