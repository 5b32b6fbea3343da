"""Property tests for the emulator (issue 2): random shapes, dtypes, indices and ops either give
NumPy's answer or raise an :class:`~nkiagent.emu.NkiError`; never any other exception type.

Every example runs one small kernel and compares it with a NumPy model of the same
computation: values are computed in fp32 (as Vector/Scalar/GpSimd do) and stored with the
output dtype's rounding (``ml_dtypes`` round-to-nearest-even for floats; round-to-nearest with
saturation for integers). Each example also knows whether its choices are *plainly legal*
(in bounds, ≤ 128 partitions, SBUF operands, matching shapes …): then an NkiError is a bug too.
Unusual or illegal choices are drawn one time in six, so most examples reach the value check.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import ml_dtypes
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nkiagent.emu import NkiError, NkiWarning, run_kernel

T = TypeVar("T")


def props(max_examples: int) -> settings:
    """Reproducible in CI: no example database, derandomized search, no per-example deadline."""
    return settings(
        max_examples=max_examples,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


FLOATS = ("float32", "bfloat16", "float16", "float8_e4m3", "float8_e5m2")
INTS = ("int32", "uint32", "int16", "uint16", "int8", "uint8")
DTYPES = FLOATS + INTS
TARGETS = ("trn1", "trn2", "trn3")
PMAX = 128

#: precision bits of each float dtype (incl. the hidden bit) and its smallest subnormal
_PRECISION = {"float32": 24, "bfloat16": 8, "float16": 11, "float8_e4m3": 4, "float8_e5m2": 3}
_TINY = {"float32": 2.0**-149, "bfloat16": 2.0**-133, "float16": 2.0**-24, "float8_e4m3": 2.0**-9, "float8_e5m2": 2.0**-16}


def np_dtype(name: str) -> np.dtype:
    """The NumPy / ml_dtypes dtype of an NKI dtype name (independent of the emulator's table)."""
    if name in ("bfloat16", "float8_e4m3", "float8_e5m2"):
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def is_float(name: str) -> bool:
    return name in FLOATS


# --------------------------------------------------------------------------------------------
# Running kernels and judging outcomes
# --------------------------------------------------------------------------------------------
def run(kernel: Callable[..., Any], *args: np.ndarray, target: str = "trn2") -> Any:
    """Outputs of ``kernel`` on the emulator, or the NkiError it raised. Other exceptions propagate."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NkiWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            return run_kernel(kernel, args, target=target).outputs
        except NkiError as err:
            return err


def model_cast(values: np.ndarray, name: str) -> np.ndarray:
    """What memory of dtype ``name`` holds after storing ``values`` (fp32 results or exact integers)."""
    d = np_dtype(name)
    with np.errstate(all="ignore"):
        if d.kind in "iu":
            info = np.iinfo(d)
            if values.dtype.kind == "f":
                v = np.nan_to_num(values.astype(np.float64), nan=0.0)
                return np.clip(np.rint(v), info.min, info.max).astype(d)
            return np.clip(values.astype(np.int64), info.min, info.max).astype(d)
        return values.astype(np.float32).astype(d)


def dtype_tol(name: str) -> tuple[float, float]:
    """(rtol, atol) of one rounding step of dtype ``name``: a 1-ulp difference in fp32 can move
    the stored value by one ulp of the output dtype."""
    if is_float(name):
        return 2.0 ** (1 - _PRECISION[name]), _TINY[name]
    return 0.0, 1.0


def assert_same(actual: Any, expected: np.ndarray, rtol: float = 0.0, atol: Any = 0.0) -> None:
    assert isinstance(actual, np.ndarray), f"expected an array, got {type(actual).__name__}"
    assert actual.shape == expected.shape, f"shape {actual.shape} != NumPy's {expected.shape}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != NumPy's {expected.dtype}"
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    nan_a, nan_e = np.isnan(a), np.isnan(e)
    assert np.array_equal(nan_a, nan_e), f"NaN positions differ: got {a[nan_a != nan_e][:5]}, want {e[nan_a != nan_e][:5]}"
    with np.errstate(invalid="ignore", over="ignore"):
        close = (a == e) | nan_e | (np.abs(a - e) <= atol + rtol * np.abs(e))
    bad = np.argwhere(~close)
    assert bad.size == 0, (
        f"{len(bad)} of {a.size} values differ; first at {tuple(bad[0])}: got {a[tuple(bad[0])]!r}, want {e[tuple(bad[0])]!r}"
    )


def check(result: Any, expected: np.ndarray | None, *, legal: bool, rtol: float = 0.0, atol: Any = 0.0) -> None:
    """NumPy's answer, or an NkiError; ``expected is None`` means NKI must refuse, ``legal`` that it must not."""
    if isinstance(result, NkiError):
        assert not legal, f"a legal kernel was rejected: {result}"
        return
    assert expected is not None, f"the emulator accepted what NKI must reject; it returned {result!r}"
    assert_same(result, expected, rtol, atol)


# --------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------
def rare(data: st.DataObject, label: str, one_in: int = 6) -> bool:
    """True about one time in ``one_in``; shrinks toward False (the common, legal choice). An interior
    value is the trigger because hypothesis favours the bounds of integer ranges."""
    return data.draw(st.integers(0, one_in - 1), label=f"{label}.rare") == one_in // 2


def draw_choice(data: st.DataObject, common: Sequence[T], unusual: Sequence[T], label: str) -> T:
    """Mostly one of ``common``; one time in six one of ``unusual`` (illegal or odd choices)."""
    return data.draw(st.sampled_from(unusual if unusual and rare(data, label) else common), label=label)


def draw_dims(data: st.DataObject, ndim: int, budget: int, label: str) -> tuple[int, ...]:
    """``ndim`` sizes in 1..300 whose product stays within ``budget``."""
    dims: list[int] = []
    left = budget
    for k in range(ndim):
        n = data.draw(st.integers(1, max(1, min(300, left))), label=f"{label}[{k}]")
        dims.append(n)
        left = max(1, left // n)
    return tuple(dims)


def draw_partitions(data: st.DataObject, label: str) -> int:
    """A partition count: usually ≤ 128, one time in six beyond the architecture limit."""
    return data.draw(st.integers(PMAX + 1, 200) if rare(data, label) else st.integers(1, PMAX), label=label)


def draw_tile_shape(data: st.DataObject, label: str, p: int | None = None, budget: int = 2048) -> tuple[int, ...]:
    """An on-chip shape ``(P, F...)`` with 1 or 2 free dims of at most ``budget`` elements per partition."""
    p = draw_partitions(data, f"{label}.P") if p is None else p
    free = draw_dims(data, data.draw(st.integers(1, 2), label=f"{label}.free_ndim"), budget, f"{label}.F")
    return (p,) + free


def make_array(data: st.DataObject, shape: Sequence[int], name: str, label: str, lo: int | None = None, hi: int | None = None) -> np.ndarray:
    """Random values of dtype ``name``: scaled normals for floats, integers in ``[lo, hi]`` (default: a random range)."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label=f"{label}.seed"))
    d = np_dtype(name)
    if is_float(name):
        scale = data.draw(st.sampled_from([1.0, 0.01, 10.0, 300.0]), label=f"{label}.scale")
        return np.asarray(rng.standard_normal(tuple(shape), dtype=np.float32) * np.float32(scale)).astype(d)
    info = np.iinfo(d)
    if lo is None or hi is None:
        wide = data.draw(st.booleans(), label=f"{label}.wide")
        lo, hi = (int(info.min), int(info.max)) if wide else (max(int(info.min), -100), min(int(info.max), 100))
    return np.asarray(rng.integers(max(lo, int(info.min)), min(hi, int(info.max)), size=tuple(shape), endpoint=True)).astype(d)


@dataclass(frozen=True)
class Item:
    """One index component: what the kernel passes, its NumPy equivalent, and whether NKI must
    ``reject`` it (malformed, or an ``nl.ds`` reaching outside the dim)."""

    nki: Any
    np: Any
    legal: bool
    consumes: bool = True
    reject: bool = False


_FULL = Item(slice(None), slice(None), True)
_NEWAXIS = Item(None, None, True, consumes=False)
_ELLIPSIS = Item(Ellipsis, Ellipsis, True, consumes=False)
#: index components NKI must refuse: non-integers, NumPy-style bool masks and lists, zero steps
_BAD_ITEMS = (1.5, True, np.bool_(False), [0], "0", slice(1.5, None), slice(None, "a"), slice(0, 2, 0))


def draw_item(data: st.DataObject, n: int, label: str) -> Item:
    """An int, slice, ``nl.ds`` or (rarely) malformed index for a dim of size ``n``."""
    kind = draw_choice(data, ["int", "slice", "slice", "ds", "full"], ["bad"], f"{label}.kind")
    if kind == "full":
        return _FULL
    if kind == "bad":
        bad = data.draw(st.sampled_from(_BAD_ITEMS), label=f"{label}.bad")
        return Item(bad, bad, False, reject=True)
    if kind == "int":
        k = data.draw(st.integers(-n - 2, n + 1), label=f"{label}.int")
        wrap = data.draw(st.sampled_from([int, np.int32, np.int64]), label=f"{label}.int_type")
        return Item(wrap(k), k, -n <= k < n)
    if kind == "ds":
        start = data.draw(st.integers(-2, n + 1), label=f"{label}.ds_start")
        size = data.draw(st.integers(-1, n + 1), label=f"{label}.ds_size")
        ok = start >= 0 and size >= 0 and start + size <= n
        return Item(nl.ds(start, size), slice(start, start + size), ok and size > 0, reject=not ok)
    bound = st.one_of(st.none(), st.integers(-n - 3, n + 3))
    start = data.draw(bound, label=f"{label}.start")
    stop = data.draw(bound, label=f"{label}.stop")
    step = data.draw(st.sampled_from([None, 1, 2, 3, -1, -2]), label=f"{label}.step")
    if step is None or step > 0:
        ok = all(v is None or -n <= v <= n for v in (start, stop))
    else:
        ok = (start is None or -n <= start < n) and (stop is None or -n - 1 <= stop < n)
    return Item(slice(start, stop, step), slice(start, stop, step), ok)


@dataclass(frozen=True)
class Index:
    """A whole subscript: ``nki`` for the kernel, ``np`` for NumPy, ``reject``: NKI must refuse it."""

    nki: Any
    np: Any
    legal: bool
    items: tuple[Item, ...]
    reject: bool


def draw_index(data: st.DataObject, shape: tuple[int, ...], label: str) -> Index:
    """A random subscript for ``shape``: ints / slices / ``nl.ds`` / ``...`` / ``None``, sometimes malformed."""
    ndim = len(shape)
    too_many = rare(data, f"{label}.too_many", one_in=10)
    n_items = data.draw(st.integers(0, ndim + 1 if too_many else ndim), label=f"{label}.n")
    ellipses = 0 if n_items > ndim else draw_choice(data, [0, 1], [2], f"{label}.ellipses")
    positions = sorted(data.draw(st.lists(st.integers(0, n_items), min_size=ellipses, max_size=ellipses), label=f"{label}.ell_pos"))
    # the dim each consuming item indexes: items before an ellipsis from the front, after it from the back
    first_ell = positions[0] if positions else n_items
    dims = list(range(first_ell)) + list(range(ndim - (n_items - first_ell), ndim))
    items = [draw_item(data, shape[d] if 0 <= d < ndim else 1, f"{label}.{k}") for k, d in enumerate(dims)]
    for pos in reversed(positions):
        items.insert(pos, _ELLIPSIS)
    if rare(data, f"{label}.newaxis"):
        items.insert(data.draw(st.integers(0, len(items)), label=f"{label}.newaxis_pos"), _NEWAXIS)
    bare = len(items) == 1 and data.draw(st.booleans(), label=f"{label}.bare")
    reject = any(i.reject for i in items)
    return Index(
        items[0].nki if bare else tuple(i.nki for i in items),
        items[0].np if bare else tuple(i.np for i in items),
        not reject and all(i.legal for i in items) and n_items <= ndim and ellipses <= 1,
        tuple(items),
        reject,
    )


def numpy_view(array: np.ndarray, index: Index) -> np.ndarray | None:
    """NumPy's basic indexing of ``array``, or ``None`` where NumPy or NKI refuses the index."""
    if index.reject:
        return None
    try:
        return np.asarray(array[index.np])
    except (IndexError, ValueError, TypeError):
        return None


def onchip_shape(shape: tuple[int, ...], index: Index) -> tuple[int, ...]:
    """NKI's on-chip result shape: an int on the partition dim keeps a size-1 dim; ints on free
    dims drop unless the tile would fall below 2-D (§2.4). ``index`` must be one NumPy accepts."""
    items = list(index.items)
    n_real = sum(1 for i in items if i.consumes)
    if _ELLIPSIS in items:
        pos = items.index(_ELLIPSIS)
        items[pos : pos + 1] = [_FULL] * (len(shape) - n_real)
    else:
        items += [_FULL] * (len(shape) - n_real)
    out: list[int] = []
    int_pos: list[int] = []
    dim = 0
    for it in items:
        if not it.consumes:
            out.append(1)
            continue
        if isinstance(it.np, slice):
            out.append(len(range(*it.np.indices(shape[dim]))))
        else:
            if dim != 0:
                int_pos.append(len(out))
            out.append(1)
        dim += 1
    for pos in reversed(int_pos):
        if len(out) > 2:
            del out[pos]
    return tuple(out)


def partition_item(index: Index, ndim: int) -> Item | None:
    """The component of ``index`` that selects partitions (dim 0); ``None`` when a new axis comes first."""
    n_real = sum(1 for i in index.items if i.consumes)
    for it in index.items:
        if it is _NEWAXIS:
            return None
        if it is _ELLIPSIS and n_real < ndim:  # the ellipsis covers dim 0
            return _FULL
        if it.consumes:
            return it
    return _FULL


def sentinel(shape: tuple[int, ...], name: str) -> np.ndarray:
    """Never-written memory as AWS's simulator fills it: NaN for floats, 4 for integers."""
    return np.full(shape, np.nan if is_float(name) else 4).astype(np_dtype(name))


def draw_memory(data: st.DataObject, label: str) -> str:
    return draw_choice(data, ["sbuf"], ["psum"], label)


def draw_other_shape(data: st.DataObject, shape: tuple[int, ...], label: str) -> tuple[int, ...]:
    """``shape`` itself, the same elements per partition in another layout, or (rarely) a mismatch."""
    kind = draw_choice(data, ["same", "same", "relayout"], ["other"], label)
    if kind == "same":
        return shape
    if kind == "relayout":
        return (shape[0], math.prod(shape[1:]))
    return draw_tile_shape(data, label, p=data.draw(st.sampled_from([shape[0], shape[0] + 1, 1]), label=f"{label}.P"))


# --------------------------------------------------------------------------------------------
# Kernel building blocks
# --------------------------------------------------------------------------------------------
def on_chip(x: Any, memory: str) -> Any:
    """Load HBM ``x`` into a new SBUF tile (then into PSUM when ``memory == "psum"``)."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if memory == "sbuf":
        return t
    p = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.psum)
    nisa.tensor_copy(dst=p, src=t)
    return p


def to_hbm(t: Any) -> Any:
    """Copy an on-chip tile to a new ``shared_hbm`` output (staging PSUM through SBUF)."""
    if nl.is_psum(t.buffer):
        staged = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=staged, src=t)
        t = staged
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def new_tile(shape: tuple[int, ...], name: str, memory: str) -> Any:
    return nl.ndarray(shape, dtype=getattr(nl, name), buffer=getattr(nl, memory))


ENGINES: dict[str, Any] = {
    "unknown": nisa.engine.unknown,
    "vector": nisa.engine.vector,
    "gpsimd": nisa.engine.gpsimd,
    "scalar": nisa.engine.scalar,
    "int literal": 5,  # 0.3+ rejects raw enum integers
}
COMMON_ENGINES = ("unknown", "unknown", "vector")
UNUSUAL_ENGINES = ("gpsimd", "scalar", "int literal")


# --------------------------------------------------------------------------------------------
# Indexing: HBM and SBUF views
# --------------------------------------------------------------------------------------------
@props(350)
@given(data=st.data())
def test_hbm_indexing_matches_numpy(data: st.DataObject) -> None:
    """``a[i1][i2]`` on an HBM tensor copies exactly NumPy's ``a[i1][i2]`` (HBM drops int dims)."""
    shape = draw_dims(data, data.draw(st.integers(1, 3), label="ndim"), 1 << 14, "shape")
    name = data.draw(st.sampled_from(DTYPES), label="dtype")
    a = make_array(data, shape, name, "a")
    indices = [draw_index(data, shape, "i1")]
    view = numpy_view(a, indices[0])
    if view is not None and data.draw(st.booleans(), label="nested"):
        indices.append(draw_index(data, view.shape, "i2"))
        view = numpy_view(view, indices[1])

    def kernel(x: Any) -> Any:
        v = x
        for ix in indices:
            v = v[ix.nki]
        out = nl.ndarray(v.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=v)
        return out

    legal = view is not None and view.size > 0 and all(ix.legal for ix in indices)
    check(run(kernel, a), view, legal=legal)


@props(300)
@given(data=st.data())
def test_sbuf_indexing_matches_numpy(data: st.DataObject) -> None:
    """Views of an SBUF tile (≤ or > 128 partitions) hold NumPy's values, shaped by NKI's on-chip
    rule; read back by DMA (any partition start) or tensor_copy (compute-engine partition rules)."""
    target = data.draw(st.sampled_from(TARGETS), label="target")
    shape = draw_tile_shape(data, "shape")
    name = data.draw(st.sampled_from(DTYPES), label="dtype")
    a = make_array(data, shape, name, "a")
    ix = draw_index(data, shape, "index")
    via = data.draw(st.sampled_from(["dma_copy", "tensor_copy"]), label="read_via")
    view = numpy_view(a, ix)
    expected = None if view is None else view.reshape(onchip_shape(shape, ix))

    def kernel(x: Any) -> Any:
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        v = t[ix.nki]
        if via == "tensor_copy":
            staged = nl.ndarray(v.shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=staged, src=v)
            v = staged
        out = nl.ndarray(v.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=v)
        return out

    # compute engines also need the view to start at partition 0 and step partitions: require
    # success there only when the partition dim is taken whole
    whole = partition_item(ix, len(shape)) == _FULL
    legal = ix.legal and expected is not None and expected.size > 0 and shape[0] <= PMAX and (via == "dma_copy" or whole)
    check(run(kernel, a, target=target), expected, legal=legal)


def draw_view_method(data: st.DataObject, shape: tuple[int, ...], label: str) -> tuple[str, tuple[Any, ...], Callable[[np.ndarray], np.ndarray] | None]:
    """A random ``NkiTensor`` view method call on a view of ``shape``: (name, args, NumPy model),
    the model ``None`` when NKI must refuse the call. Dims may be negative (NumPy style) or, rarely,
    out of range."""
    nd = len(shape)
    method = data.draw(st.sampled_from(["reshape", "permute", "select", "expand_dim", "squeeze_dim", "flatten_dims", "slice", "broadcast"]), label=label)
    odd = rare(data, f"{label}.odd")

    def dim(extra: int = 0) -> int:
        """A dim of an ``nd + extra``-D result: in range, or (when odd) one past either end."""
        n = nd + extra
        return data.draw(st.sampled_from([-n - 1, n]) if odd or n == 0 else st.integers(-n, n - 1), label=f"{label}.dim")

    def norm(d: int, n: int = nd) -> int | None:
        return d + n if -n <= d < 0 else d if 0 <= d < n else None

    if method == "reshape":
        size = math.prod(shape)
        dims = [d for d in range(1, size + 1) if size % d == 0]
        first = data.draw(st.sampled_from(dims), label=f"{label}.first")
        new = (first, size // first) if data.draw(st.booleans(), label=f"{label}.split") else (size,)
        new = (new[0] + 1,) + new[1:] if odd else new

        def reshaped(v: np.ndarray) -> np.ndarray:
            return np.reshape(v, new, copy=False)  # NKI views never copy: NumPy refusing means NKI must too

        return method, (new,), None if odd else reshaped
    if method == "permute":
        perm = tuple(data.draw(st.permutations(range(nd)), label=f"{label}.perm"))
        if odd:
            perm = perm[:-1] + (perm[0],) if nd > 1 else (nd,)
            return method, (perm,), None
        return method, (perm,), lambda v: np.transpose(v, perm)
    if method in ("select", "squeeze_dim", "broadcast"):
        d = dim()
        k = norm(d)
        n = shape[k] if k is not None else 1
        if method == "select":
            i = data.draw(st.integers(-n - 1, n), label=f"{label}.index")
            return method, (d, i), (lambda v: np.take(v, i, axis=k)) if k is not None and -n <= i < n else None
        if method == "squeeze_dim":
            return method, (d,), (lambda v: np.squeeze(v, axis=k)) if k is not None and n == 1 else None
        size = data.draw(st.integers(1, 4), label=f"{label}.size")
        new_shape = tuple(size if j == k else s for j, s in enumerate(shape))
        return method, (d, size), (lambda v: np.broadcast_to(v, new_shape)) if k is not None and n == 1 else None
    if method == "expand_dim":
        d = dim(extra=1)
        return method, (d,), (lambda v: np.expand_dims(v, d)) if norm(d, nd + 1) is not None else None
    if method == "flatten_dims":
        a, b = sorted((dim(), dim()))
        ka, kb = norm(a), norm(b)
        if ka is None or kb is None or ka > kb:
            return method, (a, b), None
        new = shape[:ka] + (math.prod(shape[ka : kb + 1]),) + shape[kb + 1 :]
        return method, (a, b), lambda v: np.reshape(v, new, copy=False)
    d = dim()
    k = norm(d)
    n = shape[k] if k is not None else 1
    start, end = sorted((data.draw(st.integers(0, n), label=f"{label}.start"), data.draw(st.integers(0, n), label=f"{label}.end")))
    step = data.draw(st.integers(1, 3), label=f"{label}.step")
    return method, (d, start, end, step), (lambda v: v[(slice(None),) * k + (slice(start, end, step),)]) if k is not None else None


@props(250)
@given(data=st.data())
def test_view_methods_match_numpy(data: st.DataObject) -> None:
    """Chains of ``reshape`` / ``permute`` / ``select`` / ``expand_dim`` / ``squeeze_dim`` /
    ``flatten_dims`` / ``slice`` / ``broadcast`` on an HBM tensor read exactly what the same NumPy
    view reads (negative dims count from the end, as in NumPy)."""
    shape = draw_dims(data, data.draw(st.integers(1, 3), label="ndim"), 1 << 10, "shape")
    name = data.draw(st.sampled_from(DTYPES), label="dtype")
    a = make_array(data, shape, name, "a")
    calls: list[tuple[str, tuple[Any, ...]]] = []
    view: np.ndarray | None = a
    for k in range(data.draw(st.integers(1, 3), label="chain")):
        method, args, model = draw_view_method(data, view.shape, f"call{k}")
        calls.append((method, args))
        try:
            view = None if model is None else model(view)
        except ValueError:  # NumPy refuses (a reshape that would copy, a bad axis)
            view = None
        if view is None or view.size == 0:  # an empty view can only end in an error
            break

    def kernel(x: Any) -> Any:
        v = x
        for method, args in calls:
            v = getattr(v, method)(*args)
        out = nl.ndarray(v.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=v)
        return out

    check(run(kernel, a), None if view is None else np.array(view), legal=view is not None and view.size > 0)


_BAD_PATTERNS: tuple[Any, ...] = ([], [[1]], [1, 2], None, [[1, 2.5]], [[1, "2"]], [[1, 2, 3]])


@props(250)
@given(data=st.data())
def test_access_patterns_match_numpy(data: st.DataObject) -> None:
    """``t[view].ap(pattern, offset)`` reads storage elements ``offset + Σ stride·i`` of the whole base
    tensor (the current view is ignored) on HBM and SBUF; a pattern reaching outside the storage,
    a malformed one, or (on chip) one whose first pair does not step partitions is an NkiError."""
    on_chip_mem = data.draw(st.booleans(), label="sbuf")
    shape = draw_tile_shape(data, "shape", budget=512) if on_chip_mem else draw_dims(data, data.draw(st.integers(1, 3), label="ndim"), 1 << 12, "shape")
    name = data.draw(st.sampled_from(DTYPES), label="dtype")
    a = make_array(data, shape, name, "a")
    size = a.size
    row = size // shape[0]
    if rare(data, "malformed", one_in=10):
        pattern: Any = data.draw(st.sampled_from(_BAD_PATTERNS), label="pattern")
    else:
        pairs = []
        for k in range(data.draw(st.integers(1, 3), label="pairs")):
            dense = row if (k == 0 and on_chip_mem) else 1
            stride = draw_choice(data, [dense], [0, -1, 2, 3, row], f"stride{k}")
            pairs.append([stride, data.draw(st.integers(1, 8), label=f"count{k}")])
        pattern = pairs
    offset = data.draw(st.integers(-2, size + 2) if rare(data, "offset") else st.integers(0, max(0, size - 1)), label="offset")
    skip = data.draw(st.integers(0, shape[0] - 1), label="view_rows")  # ap ignores this view

    def kernel(x: Any) -> Any:
        t = x
        if on_chip_mem:
            t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
        v = t[skip:].ap(pattern, offset=offset)
        out = nl.ndarray(v.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=v)
        return out

    expected = None
    if pattern not in _BAD_PATTERNS:
        addr = np.full([n for _, n in pattern], offset, dtype=np.int64)
        for k, (stride, count) in enumerate(pattern):
            addr += (np.arange(count) * stride).reshape([count if j == k else 1 for j in range(len(pattern))])
        steps_partitions = not on_chip_mem or pattern[0][1] == 1 or pattern[0][0] == row
        if addr.min() >= 0 and addr.max() < size and steps_partitions:
            expected = a.reshape(-1)[addr]
    legal = expected is not None and (not on_chip_mem or (shape[0] <= PMAX and pattern[0][1] <= PMAX))
    check(run(kernel, a), expected, legal=legal)


# --------------------------------------------------------------------------------------------
# Views share storage; never-written memory; storage rounding
# --------------------------------------------------------------------------------------------
@props(250)
@given(data=st.data())
def test_writes_through_views_are_visible_in_the_parent(data: st.DataObject) -> None:
    """Writing ``v = t[i1][i2]`` (dma_copy, ``v[...] = x``, memset) changes exactly those elements
    of the HBM or SBUF tensor ``t``, converted to its dtype."""
    on_chip_mem = data.draw(st.booleans(), label="sbuf")
    if on_chip_mem:
        shape = draw_tile_shape(data, "shape")
    else:
        shape = draw_dims(data, data.draw(st.integers(1, 3), label="ndim"), 1 << 12, "shape")
    name = data.draw(st.sampled_from(DTYPES), label="dtype")
    a = make_array(data, shape, name, "a")
    # element positions of the view, shaped as NKI shapes it (on chip: partition ints keep a dim)
    view: np.ndarray | None = np.arange(a.size).reshape(shape)
    indices: list[Index] = []
    for label in ("i1", "i2"):
        if view is None or (indices and not data.draw(st.booleans(), label="nested")):
            break
        indices.append(draw_index(data, view.shape, label))
        parent_shape = view.shape
        view = numpy_view(view, indices[-1])
        if view is not None and on_chip_mem:
            view = view.reshape(onchip_shape(parent_shape, indices[-1]))
    how = data.draw(st.sampled_from(["dma_copy", "setitem", "memset"] if on_chip_mem else ["dma_copy", "setitem"]), label="write")
    src_name = draw_choice(data, [name], ["float32", "int32", "bfloat16", "uint8"], "src_dtype")
    b = make_array(data, view.shape if view is not None else (1,), src_name, "b", lo=-50, hi=50)
    fill_int = data.draw(st.integers(-50, 50), label="fill")
    fill = float(fill_int) if is_float(name) else fill_int
    fill_fits = is_float(name) or np.iinfo(np_dtype(name)).min <= fill_int

    def kernel(x: Any, y: Any) -> Any:
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf if on_chip_mem else nl.shared_hbm)
        nisa.dma_copy(dst=t, src=x)
        v = t
        for ix in indices:
            v = v[ix.nki]
        if how == "memset":
            nisa.memset(dst=v, value=fill)
        elif how == "setitem":
            v[...] = y
        else:
            nisa.dma_copy(dst=v, src=y)
        return to_hbm(t) if on_chip_mem else t

    expected: np.ndarray | None = None
    if view is not None and (how != "memset" or fill_fits):  # an out-of-range memset value is an error
        flat = a.copy().reshape(-1)
        if how == "memset":
            flat[view.reshape(-1)] = model_cast(np.array([fill]), name)[0]
        else:
            vals = b.astype(np.float32) if (is_float(src_name) or is_float(name)) else b
            flat[view.reshape(-1)] = model_cast(vals, name).reshape(-1)
        expected = flat.reshape(shape)
    legal = all(ix.legal for ix in indices) and view is not None and view.size > 0
    # memset runs on a compute engine, whose partition-start rules a random view may break
    legal = legal and (not on_chip_mem or (shape[0] <= PMAX and how != "memset"))
    check(run(kernel, a, b), expected, legal=legal)


@props(120)
@given(data=st.data())
def test_never_written_memory_reads_as_sentinel(data: st.DataObject) -> None:
    """Fresh SBUF/PSUM/HBM tensors read NaN (floats) or 4 (integers) wherever nothing was written;
    an output never written at all is ``err_tensor_output_not_written_to``."""
    name = data.draw(st.sampled_from(DTYPES), label="dtype")
    memory = data.draw(st.sampled_from(["sbuf", "psum", "shared_hbm"]), label="memory")
    shape = draw_tile_shape(data, "shape", p=data.draw(st.integers(1, PMAX), label="P"), budget=512)
    rows = data.draw(st.integers(0, shape[0]), label="memset_rows")
    value = data.draw(st.integers(0 if name.startswith("uint") else -20, 20), label="value")
    fill = float(value) if is_float(name) else value

    def kernel() -> Any:
        t = new_tile(shape, name, memory)
        if memory == "shared_hbm":
            if rows:
                staged = new_tile((rows,) + shape[1:], name, "sbuf")
                nisa.memset(dst=staged, value=fill)
                nisa.dma_copy(dst=t[0:rows], src=staged)
            return t
        if rows:
            nisa.memset(dst=t[0:rows], value=fill)
        return to_hbm(t)

    result = run(kernel)
    if memory == "shared_hbm" and rows == 0:
        assert isinstance(result, NkiError) and result.code == "err_tensor_output_not_written_to", result
        return
    expected = sentinel(shape, name)
    expected[:rows] = model_cast(np.array([value]), name)[0]
    check(result, expected, legal=memory != "psum" or name == "float32")


@props(150)
@given(data=st.data())
def test_low_precision_storage_rounds_like_ml_dtypes(data: st.DataObject) -> None:
    """fp32 bit patterns (NaN, ±inf, subnormals included) stored as bf16/fp16/fp8 — by DMA cast,
    tensor_copy or an ALU result — round exactly like ``np.float32 → ml_dtypes``; stored as
    integers they round to nearest and saturate (NaN → 0)."""
    dst = draw_choice(data, ["bfloat16"], ["float16", "float8_e4m3", "float8_e5m2", "int8", "uint16", "int32"], "dst")
    how = data.draw(st.sampled_from(["dma_copy", "tensor_copy", "tensor_scalar"]), label="how")
    shape = draw_tile_shape(data, "shape", p=data.draw(st.integers(1, PMAX), label="P"), budget=1024)
    bits = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed")).integers(0, 2**32, size=shape, dtype=np.uint64)
    x = bits.astype(np.uint32).view(np.float32)
    if data.draw(st.booleans(), label="moderate"):  # keep most values finite and in range
        with np.errstate(invalid="ignore"):
            x = np.where(np.isfinite(x), np.sign(x) * (bits % 100000).astype(np.float32) / np.float32(97.0), x)

    def kernel(src: Any) -> Any:
        out = new_tile(shape, dst, "sbuf")
        if how == "dma_copy":
            nisa.dma_copy(dst=out, src=src)
        elif how == "tensor_copy":
            nisa.tensor_copy(dst=out, src=on_chip(src, "sbuf"))
        else:
            nisa.tensor_scalar(dst=out, data=on_chip(src, "sbuf"), op0=nl.multiply, operand0=1.0)
        return to_hbm(out)

    result = run(kernel, x)
    expected = model_cast(x, dst)
    check(result, expected, legal=True)
    if is_float(dst):  # bit-exact (signed zeros, subnormals), NaN payloads aside
        keep = ~np.isnan(expected.astype(np.float32))
        assert np.array_equal(result.view(f"u{result.itemsize}")[keep], expected.view(f"u{expected.itemsize}")[keep])


# --------------------------------------------------------------------------------------------
# ISA compute ops
# --------------------------------------------------------------------------------------------
def _cmp(f: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    return lambda a, b: f(a, b).astype(np.float32)


ALU_MODEL: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "abs_max": lambda a, b: np.maximum(np.abs(a), np.abs(b)),
    "abs_min": lambda a, b: np.minimum(np.abs(a), np.abs(b)),
    "power": np.power,
    "equal": _cmp(np.equal),
    "not_equal": _cmp(np.not_equal),
    "greater": _cmp(np.greater),
    "greater_equal": _cmp(np.greater_equal),
    "less": _cmp(np.less),
    "less_equal": _cmp(np.less_equal),
    "logical_and": lambda a, b: ((a != 0) & (b != 0)).astype(np.float32),
    "logical_or": lambda a, b: ((a != 0) | (b != 0)).astype(np.float32),
    "logical_xor": lambda a, b: ((a != 0) ^ (b != 0)).astype(np.float32),
}
#: bitwise ops, modelled on non-negative operands (negative ones raise width questions: is a
#: logical right shift 8- or 32-bit?)
BITVEC_MODEL: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift,
    "right_shift": np.right_shift,
}
#: operators NumPy has and the ISA does not: every ISA op must refuse them
NOT_ON_HARDWARE = ("divide", "fmod", "mod")
ALU_NAMES = tuple(ALU_MODEL) + tuple(BITVEC_MODEL) + NOT_ON_HARDWARE


def model_store(op: str, values: np.ndarray, name: str) -> np.ndarray:
    """``model_cast`` for arithmetic results; integer results of bitwise ops keep their low bits
    (two's complement truncation: a bitwise result is a bit pattern, not a magnitude)."""
    if op in BITVEC_MODEL and not is_float(name):
        return values.astype(np_dtype(name))
    return model_cast(values, name)


def alu(name: str, a: Any, b: Any) -> np.ndarray:
    """The fp32 (or, for bitwise ops, int64) result of ALU op ``name``."""
    with np.errstate(all="ignore"):
        if name in BITVEC_MODEL:
            return BITVEC_MODEL[name](np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64))
        return np.asarray(ALU_MODEL[name](np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)), dtype=np.float32)


def operand_array(data: st.DataObject, shape: tuple[int, ...], name: str, op: str, label: str, second: bool = False) -> np.ndarray:
    """Input values for ``op``: small non-negative integers (shift amounts 0..3) for bitwise ops."""
    if op in BITVEC_MODEL and not is_float(name):
        return make_array(data, shape, name, label, lo=0, hi=3 if second else 15)
    return make_array(data, shape, name, label)


@props(300)
@given(data=st.data())
def test_tensor_tensor(data: st.DataObject) -> None:
    """``nisa.tensor_tensor`` with random ALU ops, dtypes, memories, engines, targets and shapes."""
    target = data.draw(st.sampled_from(TARGETS), label="target")
    op = data.draw(st.sampled_from(ALU_NAMES), label="op")
    n1, n2, nd = (data.draw(st.sampled_from(DTYPES), label=f"dtype{k}") for k in ("1", "2", "_dst"))
    s1 = draw_tile_shape(data, "s1")
    s2, sd = draw_other_shape(data, s1, "s2"), draw_other_shape(data, s1, "s_dst")
    m1, m2, md = draw_memory(data, "mem1"), draw_memory(data, "mem2"), draw_memory(data, "mem_dst")
    eng = draw_choice(data, COMMON_ENGINES, UNUSUAL_ENGINES, "engine")
    x = operand_array(data, s1, n1, op, "x")
    y = operand_array(data, s2, n2, op, "y", second=True)

    def kernel(a: Any, b: Any) -> Any:
        out = new_tile(sd, nd, md)
        nisa.tensor_tensor(dst=out, data1=on_chip(a, m1), data2=on_chip(b, m2), op=getattr(nl, op), engine=ENGINES[eng])
        return to_hbm(out)

    same_pp = s1[0] == s2[0] == sd[0] and x.size == y.size == math.prod(sd)
    valid = same_pp and not (op in BITVEC_MODEL and (is_float(n1) or is_float(n2))) and not (m1 == m2 == "psum") and op not in NOT_ON_HARDWARE
    expected = model_store(op, alu(op, x.reshape(s1[0], -1), y.reshape(s1[0], -1)), nd).reshape(sd) if valid else None
    legal = valid and s1[0] <= PMAX and m1 == m2 == md == "sbuf" and eng in COMMON_ENGINES
    rtol, atol = dtype_tol(nd)
    check(run(kernel, x, y, target=target), expected, legal=legal, rtol=rtol, atol=atol)


@props(300)
@given(data=st.data())
def test_tensor_scalar(data: st.DataObject) -> None:
    """``nisa.tensor_scalar`` with scalar or ``(P, 1)`` operands, reversed operands and a second op."""
    target = data.draw(st.sampled_from(TARGETS), label="target")
    op0 = data.draw(st.sampled_from(ALU_NAMES), label="op0")
    op1 = data.draw(st.one_of(st.none(), st.sampled_from(ALU_NAMES)), label="op1")
    name, nd = data.draw(st.sampled_from(DTYPES), label="dtype"), data.draw(st.sampled_from(DTYPES), label="dtype_dst")
    shape = draw_tile_shape(data, "shape")
    sd = draw_other_shape(data, shape, "s_dst")
    mem, md = draw_memory(data, "mem"), draw_memory(data, "mem_dst")
    eng = draw_choice(data, COMMON_ENGINES, UNUSUAL_ENGINES, "engine")
    x = operand_array(data, shape, name, op0, "x")
    p = shape[0]

    def draw_operand(label: str, op: str) -> tuple[str, Any]:
        """A Python scalar, a ``(P, 1)`` column (fp32, or rarely bf16) or, rarely, a ``(P, 2)`` tile."""
        kind = draw_choice(data, ["scalar", "column"], ["column bf16", "not a column"], f"{label}.kind")
        if kind == "scalar":
            return kind, data.draw(st.integers(0, 3) if op in BITVEC_MODEL else st.sampled_from([2.0, -0.5, 3, 0.0, 1e-3]), label=label)
        cshape = (p, 2) if kind == "not a column" else (p, 1)
        cname = "bfloat16" if kind == "column bf16" else "float32"
        if op in BITVEC_MODEL:  # shift amounts / masks 0..3, whatever the column's dtype
            return kind, make_array(data, cshape, "uint8", label, lo=0, hi=3).astype(np_dtype(cname))
        return kind, make_array(data, cshape, cname, label)

    k0, c0 = draw_operand("operand0", op0)
    k1, c1 = draw_operand("operand1", op1) if op1 is not None else ("none", None)
    r0, r1 = data.draw(st.booleans(), label="reverse0"), data.draw(st.booleans(), label="reverse1")
    columns = [c for c in (c0, c1) if isinstance(c, np.ndarray)]

    def kernel(a: Any, *cols: Any) -> Any:
        it = iter(cols)
        o0 = on_chip(next(it), "sbuf") if isinstance(c0, np.ndarray) else c0
        o1 = on_chip(next(it), "sbuf") if isinstance(c1, np.ndarray) else c1
        out = new_tile(sd, nd, md)
        nisa.tensor_scalar(dst=out, data=on_chip(a, mem), op0=getattr(nl, op0), operand0=o0, reverse0=r0,
                           op1=getattr(nl, op1) if op1 is not None else None, operand1=o1, reverse1=r1, engine=ENGINES[eng])
        return to_hbm(out)

    def value(c: Any) -> Any:
        return c.astype(np.float32) if isinstance(c, np.ndarray) else np.float32(c)

    bitvec = op0 in BITVEC_MODEL
    valid = (
        (op1 is None or bitvec == (op1 in BITVEC_MODEL))  # op0 and op1 of the same class
        and sd[0] == p
        and math.prod(sd) == x.size
        and not (bitvec and is_float(name))
        and "not a column" not in (k0, k1)
        and (bitvec or "column bf16" not in (k0, k1))  # arithmetic operands must be fp32
        and op0 not in NOT_ON_HARDWARE
        and op1 not in NOT_ON_HARDWARE
    )
    expected = None
    if valid:
        xv = x.reshape(p, -1)
        r = alu(op0, value(c0), xv) if r0 else alu(op0, xv, value(c0))
        if op1 is not None:
            r = alu(op1, value(c1), r) if r1 else alu(op1, r, value(c1))
        expected = model_store(op0, r, nd).reshape(sd)
    legal = valid and p <= PMAX and mem == md == "sbuf" and eng in COMMON_ENGINES
    rtol, atol = dtype_tol(nd)
    check(run(kernel, x, *columns, target=target), expected, legal=legal, rtol=rtol, atol=atol)


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


#: float64 references of the ScalarE activation functions
ACT_MODEL: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "copy": lambda x: x,
    "square": np.square,
    "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "gelu_dx": lambda x: 0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi),
    "gelu_apprx_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3))),
    "gelu_apprx_sigmoid": lambda x: x * _sigmoid(1.702 * x),
    "silu": lambda x: x * _sigmoid(x),
    "silu_dx": lambda x: _sigmoid(x) * (1.0 + x * (1.0 - _sigmoid(x))),
    "tanh": np.tanh,
    "softplus": lambda x: np.logaddexp(0.0, x),
    "mish": lambda x: x * np.tanh(np.logaddexp(0.0, x)),
    "erf": _erf,
    "erf_dx": lambda x: 2.0 / math.sqrt(math.pi) * np.exp(-x * x),
    "exp": np.exp,
    "sign": np.sign,
    "abs": np.abs,
    "negative": np.negative,
    "log": np.log,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "arctan": np.arctan,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "reciprocal": lambda x: 1.0 / x,
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": np.trunc,
    "logical_not": lambda x: (x == 0).astype(np.float64),
}


def act(name: str, x: np.ndarray) -> np.ndarray:
    """Activation ``name`` of fp32 inputs, evaluated in float64 and rounded to fp32."""
    with np.errstate(all="ignore"):
        return ACT_MODEL[name](x.astype(np.float64)).astype(np.float32)


@props(250)
@given(data=st.data())
def test_activation(data: st.DataObject) -> None:
    """``nisa.activation`` = ``f(data·scale + bias)`` with random functions, scales, biases and row sums."""
    target = data.draw(st.sampled_from(TARGETS), label="target")
    func = draw_choice(data, tuple(ACT_MODEL), ["add"], "func")  # nl.add is no activation function
    name, nd = data.draw(st.sampled_from(DTYPES), label="dtype"), data.draw(st.sampled_from(DTYPES), label="dtype_dst")
    shape = draw_tile_shape(data, "shape")
    sd = draw_other_shape(data, shape, "s_dst")
    mem = draw_memory(data, "mem")
    p = shape[0]
    x = make_array(data, shape, name, "x")
    scale_kind = draw_choice(data, ["scalar", "column"], ["column bf16", "matrix"], "scale_kind")
    bias_kind = draw_choice(data, ["none", "column", "column bf16", "scalar"], ["column int32", "row"], "bias_kind")
    reduce = data.draw(st.booleans(), label="reduce")
    scale_v = data.draw(st.sampled_from([1.0, 0.5, -2.0, 3]), label="scale")
    bias_v = data.draw(st.sampled_from([0.25, -1.0, 0]), label="bias")
    shapes = {"column": (p, 1), "column bf16": (p, 1), "column int32": (p, 1), "matrix": (p, 2), "row": (1, 2)}
    dts = {"column": "float32", "column bf16": "bfloat16", "column int32": "int32", "matrix": "float32", "row": "float32"}
    scale_arr = make_array(data, shapes[scale_kind], dts[scale_kind], "scale_arr") if scale_kind != "scalar" else None
    bias_arr = make_array(data, shapes[bias_kind], dts[bias_kind], "bias_arr") if bias_kind in shapes else None

    def kernel(a: Any, *args: Any) -> Any:
        it = iter(args)
        scale = on_chip(next(it), "sbuf") if scale_arr is not None else scale_v
        bias = on_chip(next(it), "sbuf") if bias_arr is not None else (bias_v if bias_kind == "scalar" else None)
        out = new_tile(sd, nd, "sbuf")
        acc = new_tile((p, 1), "float32", "sbuf") if reduce else None
        nisa.activation(dst=out, op=getattr(nl, func), data=on_chip(a, mem), bias=bias, scale=scale,
                        reduce_op=nl.add if reduce else None, reduce_res=acc)
        return (to_hbm(out), to_hbm(acc)) if reduce else to_hbm(out)

    valid = (
        func != "add"
        and sd[0] == p
        and math.prod(sd) == x.size
        and scale_kind in ("scalar", "column")  # scale: a scalar or an fp32 (P, 1) vector
        and bias_kind in ("none", "column", "column bf16", "scalar")  # bias: an fp32/fp16/bf16 (P, 1) vector
        and not (bias_kind == "scalar" and target == "trn1")  # scalar bias needs trn2+
    )
    result = run(kernel, x, *[v for v in (scale_arr, bias_arr) if v is not None], target=target)
    legal = valid and p <= PMAX and mem == "sbuf"
    if not valid:
        check(result, None, legal=False)
        return
    s = scale_arr.astype(np.float32) if scale_arr is not None else np.float32(scale_v)
    b = bias_arr.astype(np.float32) if bias_arr is not None else np.float32(bias_v if bias_kind == "scalar" else 0.0)
    with np.errstate(all="ignore"):
        pre = x.reshape(p, -1).astype(np.float32) * s + b
    y = act(func, pre)
    if reduce and not isinstance(result, NkiError):
        result, sums = result
        y64 = y.astype(np.float64)
        with np.errstate(all="ignore"):
            assert_same(sums, y64.sum(axis=1, keepdims=True).astype(np.float32), 1e-4, 1e-5 * (1.0 + np.abs(y64).sum(axis=1, keepdims=True)))
    rtol, atol = dtype_tol(nd)
    # transcendental functions: fp32 vs float64 evaluation, and the emulator's polynomial erf
    check(result, model_cast(y, nd).reshape(sd), legal=legal, rtol=rtol + 1e-5, atol=atol + 2e-5 * (1.0 + np.abs(pre)).reshape(sd))


REDUCE_MODEL: dict[str, Callable[[np.ndarray, tuple[int, ...]], np.ndarray]] = {
    "add": lambda v, ax: np.sum(v.astype(np.float64), axis=ax),
    "maximum": lambda v, ax: np.max(v, axis=ax),
    "minimum": lambda v, ax: np.min(v, axis=ax),
    "multiply": lambda v, ax: np.prod(v, axis=ax),
    "abs_max": lambda v, ax: np.max(np.abs(v), axis=ax),
    "abs_min": lambda v, ax: np.min(np.abs(v), axis=ax),
    "logical_and": lambda v, ax: np.all(v != 0, axis=ax).astype(np.float32),
    "logical_or": lambda v, ax: np.any(v != 0, axis=ax).astype(np.float32),
    "bitwise_and": lambda v, ax: np.bitwise_and.reduce(v, axis=ax),
    "bitwise_or": lambda v, ax: np.bitwise_or.reduce(v, axis=ax),
    "bitwise_xor": lambda v, ax: np.bitwise_xor.reduce(v, axis=ax),
}


def reduce_axes(axis: Any, ndim: int) -> tuple[int, ...] | None:
    """NKI's legal reduction axes: ints naming the last contiguous free dims (never the partition dim 0)."""
    if not isinstance(axis, (int, tuple, list)) or isinstance(axis, bool):
        return None
    axes = tuple(sorted(a + ndim if a < 0 else a for a in ((axis,) if isinstance(axis, int) else axis)))
    if not axes or axes != tuple(range(ndim - len(axes), ndim)) or axes[0] < 1:
        return None
    return axes


def draw_axis(data: st.DataObject, ndim: int) -> Any:
    """Usually a legal suffix of free axes (as an int, a negative int or a tuple); rarely anything."""
    if rare(data, "axis"):
        return data.draw(
            st.one_of(st.integers(-ndim - 1, ndim), st.lists(st.integers(-ndim, ndim), min_size=0, max_size=2).map(tuple),
                      st.none(), st.just(True), st.just(1.0)),
            label="axis",
        )
    k = data.draw(st.integers(1, ndim - 1), label="axis.count")
    axes = tuple(range(ndim - k, ndim))
    form = data.draw(st.sampled_from(["int", "negative", "tuple", "list"]) if k == 1 else st.sampled_from(["tuple", "negative", "list"]), label="axis.form")
    if form == "int":
        return axes[0]
    if form == "negative":
        return axes[0] - ndim if k == 1 else tuple(a - ndim for a in axes)
    return axes if form == "tuple" else list(axes)


def reduce_expectation(op: str, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """Reduction of fp32 (or integer, for bitwise ops) values over ``axes``."""
    v = x.astype(np.int64) if op.startswith("bitwise") else x.astype(np.float32)
    with np.errstate(all="ignore"):
        return np.asarray(REDUCE_MODEL[op](v, axes))


def reduce_tol(op: str, x: np.ndarray, axes: tuple[int, ...], name: str) -> tuple[float, Any]:
    """Output rounding, plus for sums the fp32 summation error (a few ulps of Σ|x|)."""
    rtol, atol = dtype_tol(name)
    if op != "add":
        return rtol, atol
    return rtol + 1e-6, atol + 1e-6 * np.sum(np.abs(x.astype(np.float64)), axis=axes)


@props(250)
@given(data=st.data())
def test_tensor_reduce(data: st.DataObject) -> None:
    """``nisa.tensor_reduce`` with random ops, axes (legal or not), negate and destination shapes."""
    target = data.draw(st.sampled_from(TARGETS), label="target")
    op = draw_choice(data, tuple(REDUCE_MODEL), ["subtract", "divide"], "op")
    name, nd = data.draw(st.sampled_from(DTYPES), label="dtype"), data.draw(st.sampled_from(DTYPES), label="dtype_dst")
    shape = draw_tile_shape(data, "shape")
    mem = draw_memory(data, "mem")
    axis = draw_axis(data, len(shape))
    # a negated bitwise result has no agreed integer rounding (wrap or saturate): only arithmetic ops negate
    negate = not op.startswith("bitwise") and data.draw(st.booleans(), label="negate")
    x = operand_array(data, shape, name, op, "x")
    axes = reduce_axes(axis, len(shape))
    kept = tuple(n for k, n in enumerate(shape) if axes is None or k not in axes)
    dst_kind = draw_choice(data, ["flat", "keepdims"], ["wrong"], "dst_kind")
    if dst_kind == "flat":
        sd = (shape[0], max(1, math.prod(kept[1:])))
    elif dst_kind == "keepdims":
        sd = tuple(1 if axes is not None and k in axes else n for k, n in enumerate(shape))
    else:
        sd = (shape[0], math.prod(kept[1:]) + 1)

    def kernel(a: Any) -> Any:
        out = new_tile(sd, nd, "sbuf")
        nisa.tensor_reduce(dst=out, op=getattr(nl, op), data=on_chip(a, mem), axis=axis, negate=negate)
        return to_hbm(out)

    result = run(kernel, x, target=target)
    valid = axes is not None and op in REDUCE_MODEL and dst_kind != "wrong" and not (op.startswith("bitwise") and is_float(name))
    if not valid:
        check(result, None, legal=False)
        return
    r = reduce_expectation(op, x, axes)
    rtol, atol = reduce_tol(op, x, axes, nd)
    legal = shape[0] <= PMAX and mem == "sbuf"
    check(result, model_store(op, -r if negate else r, nd).reshape(sd), legal=legal, rtol=rtol, atol=np.reshape(atol, sd) if np.ndim(atol) else atol)


@props(200)
@given(data=st.data())
def test_tensor_copy_casts(data: st.DataObject) -> None:
    """``nisa.tensor_copy`` between SBUF/PSUM tiles of any two dtypes (bool included) converts like
    fp32 → dtype; integer → integer stays exact but saturates."""
    target = data.draw(st.sampled_from(TARGETS), label="target")
    name, nd = data.draw(st.sampled_from(DTYPES + ("bool",)), label="dtype"), data.draw(st.sampled_from(DTYPES + ("bool",)), label="dtype_dst")
    shape = draw_tile_shape(data, "shape")
    sd = draw_other_shape(data, shape, "s_dst")
    ms, md = draw_memory(data, "mem_src"), draw_memory(data, "mem_dst")
    eng = draw_choice(data, COMMON_ENGINES, UNUSUAL_ENGINES, "engine")
    x = make_array(data, shape, "uint8", "x", lo=0, hi=1).astype(bool) if name == "bool" else make_array(data, shape, name, "x")

    def kernel(a: Any) -> Any:
        out = nl.ndarray(sd, dtype=nl.bool_ if nd == "bool" else getattr(nl, nd), buffer=getattr(nl, md))
        nisa.tensor_copy(dst=out, src=on_chip(a, ms), engine=ENGINES[eng])
        return to_hbm(out)

    result = run(kernel, x, target=target)
    if sd[0] != shape[0] or math.prod(sd) != x.size:
        check(result, None, legal=False)
        return
    vals = x if (not is_float(name) and not is_float(nd)) else x.astype(np.float32)
    expected = (vals != 0) if nd == "bool" else model_cast(vals, nd)
    check(result, expected.reshape(sd), legal=shape[0] <= PMAX and ms == md == "sbuf" and eng in COMMON_ENGINES)


@props(250)
@given(data=st.data())
def test_dma_copy_between_views_of_different_shapes(data: st.DataObject) -> None:
    """``dma_copy(out[j], a[i])`` copies element-for-element in row-major order whenever the counts
    agree (shapes may differ), casting through fp32, directly or staged through SBUF (``nl.load``);
    the rest of ``out`` stays never-written."""
    shape = draw_dims(data, data.draw(st.integers(1, 3), label="ndim"), 1 << 12, "shape")
    name = data.draw(st.sampled_from(DTYPES), label="dtype")
    nd = draw_choice(data, [name], DTYPES, "dtype_dst")
    a = make_array(data, shape, name, "a")
    ix = draw_index(data, shape, "src_index")
    src = numpy_view(a, ix)
    count = src.size if src is not None else data.draw(st.integers(1, 64), label="count")
    cols = data.draw(st.sampled_from([d for d in range(1, min(count, 64) + 1) if count % d == 0] or [1]), label="cols")
    rows = count // cols
    extra = data.draw(st.integers(0, 3), label="extra_rows")
    start = data.draw(st.integers(0, extra), label="start_row")
    dst_rows = rows + rare(data, "count_mismatch")
    out_shape = (rows + extra + 1, cols)
    via = data.draw(st.sampled_from(["direct", "sbuf tile", "nl.load"]), label="via")

    def kernel(x: Any) -> Any:
        out = nl.ndarray(out_shape, dtype=getattr(nl, nd), buffer=nl.shared_hbm)
        v = x[ix.nki]
        if via == "nl.load":
            v = nl.load(v)
        elif via == "sbuf tile" and len(v.shape) >= 2:
            t = nl.ndarray(v.shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=v)
            v = t
        nisa.dma_copy(dst=out[nl.ds(start, dst_rows), :], src=v)
        return out

    result = run(kernel, a)
    if src is None or dst_rows != rows:
        check(result, None, legal=False)
        return
    vals = src if (not is_float(name) and not is_float(nd)) else src.astype(np.float32)
    expected = sentinel(out_shape, nd)
    expected[start : start + rows] = model_cast(vals, nd).reshape(rows, cols)
    staged_rows = src.shape[0] if src.ndim >= 2 and via != "direct" else 1
    check(result, expected, legal=ix.legal and src.size > 0 and staged_rows <= PMAX)


# --------------------------------------------------------------------------------------------
# nki.language: elementwise functions, reductions, type promotion
# --------------------------------------------------------------------------------------------
_FLOAT_BITS = {"float8_e4m3": 8, "float8_e5m2": 8, "float16": 16, "bfloat16": 16, "float32": 32}
_INT_RANGE = {n: (int(np.iinfo(n).min), int(np.iinfo(n).max)) for n in INTS}


def nki_promote(a: str, b: str) -> str:
    """NKI's promotion table (§2.4): (float, int) → the float; fp32 wins; (fp16, bf16) → fp32;
    fp8 with a 16-bit float → the 16-bit float; two fp8 kinds → bf16; (int32, uint32) → fp32;
    other integers → the narrowest NKI integer holding both ranges, else fp32."""
    if a == b:
        return a
    if is_float(a) != is_float(b):
        return a if is_float(a) else b
    if is_float(a):
        bits = sorted((_FLOAT_BITS[a], _FLOAT_BITS[b]))
        if bits[1] == 32 or bits == [16, 16]:
            return "float32"
        if bits == [8, 8]:
            return "bfloat16"
        return a if _FLOAT_BITS[a] == 16 else b
    lo = min(_INT_RANGE[a][0], _INT_RANGE[b][0])
    hi = max(_INT_RANGE[a][1], _INT_RANGE[b][1])
    fits = [n for n in ("int8", "uint8", "int16", "uint16", "int32", "uint32") if _INT_RANGE[n][0] <= lo and hi <= _INT_RANGE[n][1]]
    return fits[0] if fits else "float32"


def weak_dtype(value: Any) -> str:
    """Python scalars are weakly typed: bool → uint8, int → int32, float → fp32."""
    if isinstance(value, bool):
        return "uint8"
    return "int32" if isinstance(value, int) else "float32"


WEAK_SCALARS = (True, 3, -2, 0.5, 2.0)


def test_promotion_table_every_pair() -> None:
    """``nl.add`` / ``nl.multiply`` of every pair of tile dtypes, and of every tile dtype with a weak
    Python scalar on either side, has NKI's promoted dtype (never one NKI lacks, like int64)."""
    got: dict[tuple[str, str], np.dtype] = {}

    def kernel() -> None:
        tiles = {n: new_tile((1, 1), n, "sbuf") for n in DTYPES}
        for t in tiles.values():
            nisa.memset(dst=t, value=1)
        for a, ta in tiles.items():
            for b, tb in tiles.items():
                got[(a, b)] = nl.add(ta, tb).dtype
            for s in WEAK_SCALARS:
                got[(a, repr(s))] = nl.multiply(ta, s).dtype
                got[(repr(s), a)] = nl.add(s, ta).dtype

    run_kernel(kernel, ())
    want = {(a, b): nki_promote(a, b) for a in DTYPES for b in DTYPES}
    for s in WEAK_SCALARS:
        want.update({(a, repr(s)): nki_promote(a, weak_dtype(s)) for a in DTYPES})
        want.update({(repr(s), a): nki_promote(weak_dtype(s), a) for a in DTYPES})
    wrong = {k: (str(got[k]), w) for k, w in want.items() if got[k] != np_dtype(w)}
    assert not wrong, f"(got, NKI) per operand pair: {wrong}"


NL_BINARY = (
    "add", "subtract", "multiply", "maximum", "minimum", "power", "mod", "equal", "less", "greater_equal", "logical_or",
    "bitwise_and", "bitwise_or", "left_shift", "right_shift",
)
#: Python operators on tiles dispatch to the same nl functions
OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add,
    "subtract": operator.sub,
    "multiply": operator.mul,
    "equal": operator.eq,
    "less": operator.lt,
    "greater_equal": operator.ge,
    "bitwise_and": operator.and_,
    "bitwise_or": operator.or_,
    "left_shift": operator.lshift,
    "right_shift": operator.rshift,
    "power": operator.pow,
    "mod": operator.mod,
}


@props(300)
@given(data=st.data())
def test_nl_binary_type_promotion(data: st.DataObject) -> None:
    """``nl.<op>(x, y)`` or ``x <op> y`` on two tiles or a tile and a weak Python scalar (either
    side): NKI's promoted dtype (or ``dtype=``) holding the fp32 result."""
    op = data.draw(st.sampled_from(NL_BINARY), label="op")
    n1 = data.draw(st.sampled_from(DTYPES), label="dtype1")
    scalar = data.draw(st.one_of(st.none(), st.sampled_from(WEAK_SCALARS)), label="scalar")
    if op in BITVEC_MODEL and scalar == -2:
        scalar = 2  # bitwise ops are modelled on non-negative operands
    n2 = data.draw(st.sampled_from(DTYPES), label="dtype2") if scalar is None else weak_dtype(scalar)
    scalar_first = scalar is not None and data.draw(st.booleans(), label="scalar_first")
    use_operator = op in OPERATORS and data.draw(st.booleans(), label="operator")
    explicit = None if use_operator else data.draw(st.one_of(st.none(), st.sampled_from(DTYPES)), label="dtype_kw")
    shape = draw_tile_shape(data, "shape", p=data.draw(st.integers(1, PMAX), label="P"), budget=256)
    x = operand_array(data, shape, n1, op, "x")
    y = operand_array(data, shape, n2, op, "y", second=True) if scalar is None else None

    def kernel(a: Any, *b: Any) -> Any:
        ta = on_chip(a, "sbuf")
        other = on_chip(b[0], "sbuf") if b else scalar
        lhs, rhs = (other, ta) if scalar_first else (ta, other)
        return to_hbm(OPERATORS[op](lhs, rhs) if use_operator else getattr(nl, op)(lhs, rhs, dtype=explicit))

    want = explicit or nki_promote(n1, n2)
    result = run(kernel, x, *([] if y is None else [y]))
    if op == "mod" or (op == "power" and scalar is not None):  # no remainder on the hardware; nl.power(tile, scalar) unsupported
        check(result, None, legal=False)
        return
    if op in BITVEC_MODEL and (is_float(n1) or is_float(n2)):  # float tiles or float scalars
        check(result, None, legal=False)
        return
    if scalar is None:
        r = alu(op, x, y)
    else:
        s = int(scalar) if op in BITVEC_MODEL else np.float32(scalar)
        r = alu(op, s, x) if scalar_first else alu(op, x, s)
    rtol, atol = dtype_tol(want)
    check(result, model_store(op, r, want), legal=True, rtol=rtol, atol=atol)


NL_UNARY = ("exp", "tanh", "sigmoid", "relu", "square", "abs", "negative", "sqrt", "rsqrt", "reciprocal", "sign", "floor", "sin", "log", "invert")


@props(200)
@given(data=st.data())
def test_nl_unary(data: st.DataObject) -> None:
    """``nl.<func>(x, dtype=…)`` returns a new tile of ``dtype`` (default: x's) holding func of fp32 x."""
    func = data.draw(st.sampled_from(NL_UNARY), label="func")
    name = data.draw(st.sampled_from(DTYPES), label="dtype")
    explicit = data.draw(st.one_of(st.none(), st.sampled_from(DTYPES)), label="dtype_kw")
    shape = draw_tile_shape(data, "shape", p=data.draw(st.integers(1, PMAX), label="P"), budget=256)
    x = make_array(data, shape, name, "x", lo=0, hi=100) if func == "invert" else make_array(data, shape, name, "x")

    def kernel(a: Any) -> Any:
        return to_hbm(getattr(nl, func)(on_chip(a, "sbuf"), dtype=explicit))

    out = explicit or name
    result = run(kernel, x)
    if func == "invert":
        if is_float(name):
            check(result, None, legal=False)
            return
        expected = model_store("bitwise_xor", np.bitwise_xor(x.astype(np.int64), -1), out)
    else:
        expected = model_cast(act(func, x.astype(np.float32)), out)
    rtol, atol = dtype_tol(out)
    check(result, expected, legal=True, rtol=rtol + 1e-5, atol=atol + 1e-6)


@props(200)
@given(data=st.data())
def test_nl_reductions(data: st.DataObject) -> None:
    """``nl.sum/max/min/prod/mean/all(x, axis, keepdims)``: NumPy's result (kept ≥ 2-D on chip)."""
    func = data.draw(st.sampled_from(["sum", "max", "min", "prod", "mean", "all"]), label="func")
    name = data.draw(st.sampled_from(DTYPES), label="dtype")
    explicit = data.draw(st.one_of(st.none(), st.sampled_from(["float32", "bfloat16", "int32"])), label="dtype_kw")
    shape = draw_tile_shape(data, "shape", p=data.draw(st.integers(1, PMAX), label="P"), budget=512)
    axis = draw_axis(data, len(shape))
    keepdims = data.draw(st.booleans(), label="keepdims")
    x = make_array(data, shape, name, "x")

    def kernel(a: Any) -> Any:
        return to_hbm(getattr(nl, func)(on_chip(a, "sbuf"), axis=axis, dtype=explicit, keepdims=keepdims))

    result = run(kernel, x)
    axes = reduce_axes(axis, len(shape))
    if axes is None:
        check(result, None, legal=False)
        return
    out = explicit or name
    op = {"sum": "add", "max": "maximum", "min": "minimum", "prod": "multiply", "all": "logical_and", "mean": "add"}[func]
    r = reduce_expectation(op, x, axes)
    count = math.prod(shape[a] for a in axes)
    if func == "mean":
        r = (r / count).astype(np.float32)
    keep_shape = tuple(1 if k in axes else n for k, n in enumerate(shape)) if keepdims else tuple(n for k, n in enumerate(shape) if k not in axes)
    expected = model_cast(np.asarray(r), out).reshape(keep_shape if len(keep_shape) >= 2 else (shape[0], 1))
    rtol, atol = reduce_tol(op, x, axes, out)
    if func == "mean":
        atol = atol / count
    check(result, expected, legal=True, rtol=rtol, atol=np.reshape(atol, expected.shape) if np.ndim(atol) else atol)


@props(60)
@given(data=st.data())
def test_partition_limit(data: st.DataObject) -> None:
    """On-chip tensors of more than 128 partitions are refused with an NkiError naming the limit."""
    p = data.draw(st.integers(PMAX + 1, 1024), label="P")
    memory = data.draw(st.sampled_from(["sbuf", "psum"]), label="memory")
    name = data.draw(st.sampled_from(DTYPES), label="dtype")

    def kernel() -> Any:
        return to_hbm(new_tile((p, 4), name, memory))

    result = run(kernel)
    assert isinstance(result, NkiError) and result.code == "err_num_partition_exceed_arch_limit", result


@pytest.mark.parametrize("dtype", ["float64", np.float64, np.int64, "int64", np.complex64, "bfloat17", object])
@pytest.mark.parametrize("memory", ["sbuf", "shared_hbm"])
def test_unsupported_dtypes_are_nki_errors(dtype: Any, memory: str) -> None:
    """Allocating a tensor of a dtype NKI lacks (float64, int64, complex, unknown names) is an NkiError."""

    def kernel() -> Any:
        return nl.ndarray((4, 4), dtype=dtype, buffer=getattr(nl, memory))

    assert isinstance(run(kernel), NkiError)


_INVALID_SHAPES: list[tuple[Any, tuple[str, ...]]] = [
    ((2.5, 3), ("sbuf", "shared_hbm")),
    (("4", 3), ("sbuf", "shared_hbm")),
    ((None, 3), ("sbuf", "shared_hbm")),
    (((2, 3), 3), ("sbuf", "shared_hbm")),
    ((True, 3), ("sbuf", "shared_hbm")),
    ((-1, 3), ("sbuf", "shared_hbm")),
    ((4, 0), ("sbuf", "psum", "shared_hbm")),
    ((3,), ("sbuf", "psum")),  # on-chip tensors are at least 2-D
    ((), ("sbuf", "psum")),
]


@pytest.mark.parametrize("shape, memory", [(shape, m) for shape, memories in _INVALID_SHAPES for m in memories])
def test_invalid_shapes_are_nki_errors(shape: Any, memory: str) -> None:
    """Non-integer, negative, zero-size or (on chip) rank < 2 shapes are refused with an NkiError."""

    def kernel() -> Any:
        return nl.ndarray(shape, dtype=nl.float32, buffer=getattr(nl, memory))

    assert isinstance(run(kernel), NkiError)
