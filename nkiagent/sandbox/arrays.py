"""Arrays across the process boundary: the deterministic drawing of a case's inputs, and ``.npy`` files.

The worker and the parent build the same arrays from the same (task, dims, seed,
distribution), so inputs never need to travel between processes and the parent computes the
reference on exactly what the kernel saw; when they do travel (a backend's one-off run, the
parent's input cache), they go as ``.npy`` files written by :func:`save_array`.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence

import numpy as np

from ..emu.dtypes import as_dtype
from ..tasks.spec import InputSpec, Task

__all__ = ["DISTRIBUTIONS", "EXTRA_DISTRIBUTIONS", "OFFSET", "make_case_inputs", "make_inputs", "save_array"]

#: Every task's distributions: normal; heavy-tailed with outliers; large magnitude.
DISTRIBUTIONS = ("normal", "heavy_tailed", "large")
#: Distributions a task adds where its maths is sensitive to them (``Task.distributions``): a large
#: mean offset (a one-pass variance E[x²] − E[x]² cancels catastrophically), and rows that are
#: constant, some of them all zero (a variance of 0, a max − min of 0, an RMS of 0).
EXTRA_DISTRIBUTIONS = ("offset", "constant_rows")
#: The mean offset of ``offset`` inputs, in standard deviations: large enough that E[x²] − E[x]² in
#: fp32 loses the variance, small enough that an fp32 two-pass mean and variance stays within a
#: 1e-4 tolerance (measured on layernorm: both hold from about 8 to 16).
OFFSET = 16.0


_DYADIC = np.array([-4.0, -2.0, -1.0, -0.5, -0.25, 0.25, 0.5, 1.0, 2.0, 4.0], dtype=np.float32)


#: Distributions whose draws begin with the same ``n`` standard normals of the input's stream (the stream
#: is seeded by seed and input, not by distribution): one case group draws them once (:func:`make_case_inputs`).
_NORMAL_BASED = ("normal", "heavy_tailed", "large", "offset")


def _values(rng: np.random.Generator, n: int, dist: str, row: int, seed: int, base: np.ndarray | None = None) -> np.ndarray:
    """``n`` values of ``dist``, always a fresh array (the domain maps work in place).

    ``base``: the stream's first ``n`` standard normals, already drawn (``rng`` is then just past
    them): the normal-based distributions reuse it instead of drawing it again.
    """
    if dist in _NORMAL_BASED:
        first = rng.standard_normal(n, dtype=np.float32) if base is None else base
        if dist == "normal":
            return first.copy() if base is not None else first
        if dist == "offset":
            return first + np.float32(OFFSET)
        if dist == "large":
            return first * np.float32(1000.0)
        # heavy_tailed: a ratio of normals, Cauchy-like tails, cheap to draw; clipped so fp32 sums stay finite
        x = first / (np.abs(rng.standard_normal(n, dtype=np.float32)) + np.float32(0.25))
        np.clip(x, -200.0, 200.0, out=x)
        k = max(1, n // 200)
        idx = rng.integers(0, n, k)
        x[idx] *= np.float32(50.0)  # ~0.5% outliers
        return x
    if dist == "constant_rows":
        row = max(row, 1)  # n is always a whole number of rows: the last dimension's length
        # dyadic constants: every partial sum of a row is exact in fp32, so an fp32 mean is exactly the
        # constant and an honest kernel's x − mean is exactly 0 (a float64 reference gets nothing else)
        per_row = rng.choice(_DYADIC, size=n // row)
        # the same rows are zero in every input of the case (drawn from the seed alone), so a formula
        # that divides by a statistic of several inputs meets 0 / 0 there too
        per_row[np.random.default_rng([seed, 0x5EED]).random(n // row) < 0.25] = 0.0
        return np.repeat(per_row, row)
    raise ValueError(f"unknown distribution {dist!r}")


def _rng(spec: InputSpec, seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(f"{spec.name}:{index}".encode())])


def _one(
    spec: InputSpec, dims: Mapping[str, int], seed: int, dist: str, index: int, base: tuple[np.ndarray, np.random.Generator] | None = None
) -> np.ndarray:
    """Input ``index`` of a case; ``base``: the stream's first normals and the generator just past them."""
    shape = spec.resolve(dims)
    n = int(np.prod(shape))
    dtype = as_dtype(spec.dtype)
    if dtype.kind in "iub":
        rng = _rng(spec, seed, index)
        hi = {"large": 1000, "heavy_tailed": 100}.get(dist, 10)
        lo = 0 if dtype.kind in "ub" else -hi
        info = np.iinfo(dtype) if dtype.kind != "b" else None
        if info is not None:
            lo, hi = max(lo, info.min), min(hi, info.max)
        return rng.integers(lo, hi + 1, size=shape).astype(dtype)
    if base is not None and dist in _NORMAL_BASED:
        x = _values(base[1], n, dist, shape[-1] if shape else 1, seed, base[0])
    else:
        x = _values(_rng(spec, seed, index), n, dist, shape[-1] if shape else 1, seed)
    if spec.domain in ("positive", "nonnegative"):
        np.abs(x, out=x)
        if spec.domain == "positive":
            x += np.float32(1e-3)
    elif spec.domain == "unit":
        x /= np.float32(4.0)
        np.tanh(x, out=x)
        x += np.float32(1.0)
        x *= np.float32(0.5)
    return x.reshape(shape).astype(dtype, copy=False)


def make_inputs(task: Task, dims: Mapping[str, int], seed: int, dist: str) -> list[np.ndarray]:
    """The kernel's inputs for one case, in the task's input order."""
    if task.generate is not None:
        return [np.ascontiguousarray(a) for a in task.generate(seed)]
    return [_one(spec, dims, seed, dist, i) for i, spec in enumerate(task.inputs)]


def make_case_inputs(task: Task, dims: Mapping[str, int], seed: int, dists: Sequence[str]) -> dict[str, list[np.ndarray]]:
    """:func:`make_inputs` for every distribution in ``dists`` of one shape and seed, bit for bit the same, drawn faster.

    Why: standard normals are most of the cost of a task's first evaluation (about 9 ns each,
    millions per case), and ``normal``, ``large``, ``offset`` and ``heavy_tailed`` all begin with
    the same ones (the stream is seeded by seed and input, not by distribution). Here they are
    drawn once per input and shared; only what follows them (heavy_tailed's divisors) is drawn
    per distribution, from the generator just past them, exactly as :func:`make_inputs` draws it.
    """
    if task.generate is not None:
        return {d: make_inputs(task, dims, seed, d) for d in dists}
    shared = [d for d in dists if d in _NORMAL_BASED]
    out: dict[str, list[np.ndarray]] = {d: [] for d in dists}
    for i, spec in enumerate(task.inputs):
        base = None
        if len(shared) > 1 and as_dtype(spec.dtype).kind not in "iub":
            rng = _rng(spec, seed, i)
            base = (rng.standard_normal(int(np.prod(spec.resolve(dims))), dtype=np.float32), rng)
            base[0].flags.writeable = False  # every distribution reads it; none may change it in place
        for d in dists:  # only heavy_tailed draws on past the shared normals, and it comes once per case
            out[d].append(_one(spec, dims, seed, d, i, base))
    return out


def save_array(path: str, array: np.ndarray) -> None:
    """``np.save`` that keeps ml_dtypes types (bfloat16, float8_*) loadable as themselves.

    Plain ``np.save`` records them as raw void (``<V2``), so ``np.load`` hands back bytes and a
    bf16 kernel would see garbage. This header names the dtype instead (``'bfloat16'``), which
    ``np.load(allow_pickle=False)`` resolves in any process that imported ml_dtypes (the
    emulator does, in the worker and the parent alike).
    """
    arr = np.ascontiguousarray(array)
    if arr.dtype.kind != "V" or arr.dtype.names is not None:
        np.save(path, arr, allow_pickle=False)
        return
    header = np.lib.format.header_data_from_array_1_0(arr)
    header["descr"] = arr.dtype.name
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, header)
        fh.write(arr.tobytes())
