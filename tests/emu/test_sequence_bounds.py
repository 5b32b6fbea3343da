"""``nisa.sequence_bounds``: NumPy-checked starts and ends of each segment, and the rules it enforces.

The reference below is the definition on AWS's page, written out as loops (a segment is a run
of equal consecutive ids; id 0 is padding, start ``n`` and end ``-1``), independent of the
emulator's vectorised implementation.
"""

from __future__ import annotations

from typing import Any

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkiagent import emu


def _reference(ids: np.ndarray) -> np.ndarray:
    """``[starts, ends]`` of a 1-D array of segment ids, one element at a time."""
    n = len(ids)
    starts, ends = np.zeros(n), np.zeros(n)
    for i in range(n):
        if ids[i] == 0:
            starts[i], ends[i] = n, -1
            continue
        lo = i
        while lo > 0 and ids[lo - 1] == ids[i]:
            lo -= 1
        hi = i
        while hi < n - 1 and ids[hi + 1] == ids[i]:
            hi += 1
        starts[i], ends[i] = lo, hi + 1
    return np.stack([starts, ends])


@nki.jit
def bounds_kernel(ids: Any) -> Any:
    t = nl.ndarray(ids.shape, ids.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=ids)
    b = nl.ndarray((1, 2, ids.shape[1]), ids.dtype, buffer=nl.sbuf)
    nisa.sequence_bounds(dst=b, segment_ids=t)
    out = nl.ndarray(b.shape, ids.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=b)
    return out


def test_the_pages_example_shape() -> None:
    got = nki.simulate(bounds_kernel)(np.array([[1, 1, 2, 0, 3, 3]], np.float32))
    np.testing.assert_array_equal(got, [[[0, 0, 2, 6, 4, 4], [2, 2, 3, -1, 6, 6]]])


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("seed", range(4))
def test_random_packed_sequences_match_numpy(dtype: Any, seed: int) -> None:
    """Sorted ids with padding runs (as packed sequences come), and unsorted ones that revisit an id."""
    rng = np.random.default_rng(seed)
    n = 512
    ids = np.sort(rng.integers(0, 12, n)) if seed % 2 == 0 else rng.integers(0, 3, n)
    trace = emu.Trace()
    got = emu.run_kernel(bounds_kernel, (ids.reshape(1, n).astype(dtype),), trace=trace).outputs
    np.testing.assert_array_equal(np.asarray(got).reshape(2, n), _reference(ids))
    assert [i.engine for i in trace if i.op == "sequence_bounds"] == ["gpsimd"]


def _refused(dst_shape: tuple[int, ...], ids_shape: tuple[int, ...], dtype: Any = nl.float32) -> emu.NkiError:
    @nki.jit
    def k(x: Any) -> Any:
        t = nl.ndarray(ids_shape, dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1)
        b = nl.ndarray(dst_shape, nl.float32, buffer=nl.sbuf)
        nisa.sequence_bounds(dst=b, segment_ids=t)
        return x

    with pytest.raises(emu.NkiValidationError) as info:
        nki.simulate(k)(np.zeros((1, 1), np.float32))
    return info.value


def test_more_than_one_partition_is_refused() -> None:
    err = _refused((4, 2, 8), (4, 8))
    assert (err.code, err.message) == (
        "err_sequence_bounds_partitions",
        "sequence_bounds segment_ids[4, 8] must be on one partition (the partition dim must be 1)",
    )


def test_a_dst_without_two_rows_is_refused() -> None:
    err = _refused((1, 8), (1, 8))
    assert (err.code, err.message) == (
        "err_sequence_bounds_dst_shape",
        "sequence_bounds dst[1, 8] must hold a start and an end per segment id: [1, 2, 8] for segment_ids[1, 8]",
    )


def test_a_bf16_operand_is_refused() -> None:
    err = _refused((1, 2, 8), (1, 8), nl.bfloat16)
    assert (err.code, err.message) == (
        "err_sequence_bounds_dtype",
        "sequence_bounds segment_ids must be float32 or int32, got bfloat16; copy it to an int32 tile first",
    )


def test_the_01_api_returns_the_bounds_tile() -> None:
    """``neuronxcc.nki.isa.sequence_bounds(segment_ids=...)`` allocates and returns the ``[1, 2, n]`` result, in the dtype asked for."""
    import neuronxcc.nki as legacy_nki
    import neuronxcc.nki.isa as lisa
    import neuronxcc.nki.language as lnl

    @legacy_nki.jit
    def k(ids: Any) -> Any:
        out = lnl.ndarray((1, 2, ids.shape[1]), dtype=lnl.int32, buffer=lnl.shared_hbm)
        lnl.store(out, value=lisa.sequence_bounds(segment_ids=lnl.load(ids), dtype=lnl.int32))
        return out

    ids = np.sort(np.random.default_rng(9).integers(0, 6, 64)).astype(np.float32)
    got = legacy_nki.simulate_kernel(k, ids.reshape(1, 64))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got.reshape(2, 64), _reference(ids))
