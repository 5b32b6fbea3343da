"""``neuronxcc.nki.language``: the NKI 0.1 language on top of the 0.3 one.

Allocation understands block dimensions (``nl.par_dim``) and direct allocation; indexing has
``nl.arange`` / ``nl.mgrid`` grids; loops check that ``affine_range`` iterations are
independent; every math function takes ``mask=`` and ``dtype=``. The math is the 0.3 ``nl``
function run on the operands restricted to the mask's box, its result written into a
full-size result tile by the same instruction (see :func:`.runtime.retarget`), so the trace
is the one a 0.3 kernel doing the same work would give.
"""

from __future__ import annotations

import builtins as _builtins
import functools
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from .. import dtypes as _dt
from .. import isa as _isa03
from .. import language as _nl
from .. import ops as _ops
from ..dtypes import (  # noqa: F401  (re-exported as nl.float32 etc.)
    bfloat16,
    bool_,
    float8_e4m3,
    float8_e5m2,
    float16,
    float32,
    int8,
    int16,
    int32,
    tfloat32,
    uint8,
    uint16,
    uint32,
)
from ..errors import NkiTypeError as _TypeError
from ..errors import NkiUnsupportedError as _Unsupported
from ..errors import NkiValidationError as _Invalid
from ..errors import kernel_frame as _kernel_frame
from ..language import (  # noqa: F401  (the same in 0.1)
    device_print,
    ds,
    expand_dims,
    num_programs,
    program_id,
    program_ndim,
    shared_constant,
    shared_identity_matrix,
    tile_size,
)
from ..memory import BUFFERS as _BUFFERS
from ..memory import Buffer as _Buffer
from ..memory import current as _current
from ..memory import private_hbm, psum, sbuf, shared_hbm  # noqa: F401
from ..tensor import NkiTensor as _Tensor
from . import grid as _grid
from . import isa as _nisa
from . import runtime as _rt

hbm = private_hbm  #: in 0.1, ``nl.hbm`` is an alias of ``private_hbm``
mgrid = _grid.MGrid()
arange = _grid.arange


class par_dim(int):
    """Marks the partition dim of a tensor: ``(B0, B1, nl.par_dim(128), F)`` has block dims in front."""

    _nki_par_dim = True


class _FloatConsts:
    """``nl.fp32.min`` / ``nl.bfp16.min``: the most negative values of the 0.1 bit patterns."""

    def __init__(self, minimum: float) -> None:
        self.min = minimum


fp32 = _FloatConsts(float(np.finfo(np.float32).min))  # bit pattern 0xff7fffff
bfp16 = _FloatConsts(float(np.array([0xFF80], np.uint16).view(ml_dtypes.bfloat16)[0]))  # bit pattern 0xff80


def finfo(dtype: Any) -> Any:
    """Machine limits of a float dtype (``ml_dtypes.finfo``)."""
    return ml_dtypes.finfo(_dt.as_dtype(dtype))


# --------------------------------------------------------------------------------------------
# Allocation
# --------------------------------------------------------------------------------------------
def _buffer(buffer: Any) -> _Buffer:
    if buffer is None:
        return sbuf
    if isinstance(buffer, _Buffer):
        return private_hbm if buffer.name == "hbm" else buffer
    if isinstance(buffer, str) and buffer in _BUFFERS:
        return _buffer(_BUFFERS[buffer])
    raise _TypeError("err_buffer_type", f"buffer must be nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm, nl.private_hbm or an ncc allocation, got {buffer!r}")


def _default_name() -> str:
    """The variable a tensor is assigned to on the kernel line (``a = nl.ndarray(...)`` → ``a``), for messages."""
    target = _rt.assignment_target()
    return target[0] if target is not None and not target[1] else ""


def _allocate(shape: Any, dtype: Any, buffer: Any, name: str, fill: Any) -> Any:
    ctx = _current()
    buf = _buffer(buffer)
    shp, pdim = _nl._shape(shape)
    d = _dt.as_dtype(dtype)
    name = name or _default_name()
    if not buf.on_chip:
        if fill is not None:
            raise _Invalid("err_hbm_tensor_with_init_value_not_supported", "Creating HBM tensor with init value is not supported.")
        if buf.name == "shared_hbm":
            # Inside an NKI loop or a helper function, or the same line a second time (a Python loop): not top level.
            st = _rt.state(ctx)
            f = _kernel_frame()
            line = (ctx.program_id, f.f_code.co_filename, f.f_lineno) if f is not None else None
            if ctx.loops or (f is not None and f.f_code is not st.kernel_code) or line in st.shared_lines:
                raise _Invalid("err_shared_hbm_must_in_kernel_level", "shared_hbm buffer can only be created top level kernel scope")
            st.shared_lines.add(line)
        return _nl.ndarray(shp, d, buf, name)
    if pdim > 0:
        return _rt.BlockTensor(shp, pdim, d, buf, name, fill)
    address = None
    if isinstance(buf, _rt.DirectAlloc):
        address = buf.address(buf.physical(()), shp[0], int(np.prod(shp[1:])) * _dt.storage_dtype(d).itemsize)
    t = _nl.ndarray(shp, d, buf, name, address)
    if fill is not None:
        _isa03.memset(dst=t, value=int(fill) if _dt.is_int(d) else float(fill))
    return t


def ndarray(shape: Any, dtype: Any, *, buffer: Any = None, name: str = "", **kwargs: Any) -> Any:
    """An uninitialized tensor; on chip, leading dims before ``nl.par_dim`` are block dims (a list of tiles)."""
    return _allocate(shape, dtype, buffer, name, None)


def zeros(shape: Any, dtype: Any, *, buffer: Any = None, name: str = "", **kwargs: Any) -> Any:
    """A tensor of zeros (each block tile is filled when first used)."""
    return _allocate(shape, dtype, buffer, name, 0)


def ones(shape: Any, dtype: Any, *, buffer: Any = None, name: str = "", **kwargs: Any) -> Any:
    """A tensor of ones."""
    return _allocate(shape, dtype, buffer, name, 1)


def full(shape: Any, fill_value: Any, dtype: Any, *, buffer: Any = None, name: str = "", **kwargs: Any) -> Any:
    """A tensor filled with ``fill_value``."""
    return _allocate(shape, dtype, buffer, name, fill_value)


def zeros_like(a: Any, dtype: Any = None, *, buffer: Any = None, name: str = "", **kwargs: Any) -> Any:
    return _allocate(a.shape, dtype or a.dtype, buffer or a.buffer, name, 0)


def empty_like(a: Any, dtype: Any = None, *, buffer: Any = None, name: str = "", **kwargs: Any) -> Any:
    return _allocate(a.shape, dtype or a.dtype, buffer or a.buffer, name, None)


# --------------------------------------------------------------------------------------------
# Loops and SPMD grids
# --------------------------------------------------------------------------------------------
def affine_range(*args: Any, **kwargs: Any) -> _rt.LegacyRange:
    """Parallel loop: iterations must write disjoint memory (except ``+=`` accumulation)."""
    return _rt.LegacyRange("affine", *args, **kwargs)


def sequential_range(*args: Any, **kwargs: Any) -> _rt.LegacyRange:
    """Ordered loop: iterations may depend on each other."""
    return _rt.LegacyRange("sequential", *args, **kwargs)


def static_range(*args: Any, **kwargs: Any) -> _rt.LegacyRange:
    """Loop unrolled at trace time."""
    return _rt.LegacyRange("static", *args, **kwargs)


class _GridDim:
    """A launch-grid dimension (``nl.nc(2)``, ``nl.nc(2) * 2``, ``nl.spmd_dim(...)``); ``kernel[...]`` reads ``_nki_grid``."""

    def __init__(self, size: int) -> None:
        self._nki_grid = (int(size),)

    def __mul__(self, other: Any) -> _GridDim:
        return _GridDim(self._nki_grid[0] * _grid_size(other))

    __rmul__ = __mul__

    def __repr__(self) -> str:
        return f"spmd_dim({self._nki_grid[0]})"


def _grid_size(d: Any) -> int:
    return d._nki_grid[0] if isinstance(d, _GridDim) else int(d)


def nc(n: int) -> _GridDim:
    """A grid dimension distributed over ``n`` physical NeuronCores (instances still run one after another here)."""
    return _GridDim(n)


def spmd_dim(*dims: Any) -> _GridDim:
    """One grid dimension made of sub-dimensions, e.g. ``nl.spmd_dim(nl.nc(2), 2)`` (size 4)."""
    return _GridDim(int(np.prod([_grid_size(d) for d in dims])))


def loop_reduce(x: Any, op: Any, loop_indices: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Any:
    """``dst = op(dst, x)`` where ``dst`` is the assignment target (``b[...] = nl.loop_reduce(a, np.add, [i])``)."""
    x = _rt.tile_arg("loop_reduce", "x", x)
    reduce = _rt.LoopReduce(x, op, _grid.mask_box(mask, x.shape, [x]))
    target = _rt.assignment_target()
    if target is None:
        raise _Unsupported("err_loop_reduce_target", "nl.loop_reduce must be assigned to its destination: `b[...] = nl.loop_reduce(a, op, [i])`")
    name, subscripted = target
    if subscripted:
        return reduce  # the assignment applies it
    f = _kernel_frame()
    dst = f.f_locals.get(name) if f is not None else None
    if not isinstance(dst, _Tensor):
        raise _Unsupported("err_loop_reduce_target", f"nl.loop_reduce: the destination `{name}` must be a tile defined before the loop")
    return reduce.into(dst)


# --------------------------------------------------------------------------------------------
# Running a 0.3 nl function under a mask
# --------------------------------------------------------------------------------------------
def _lower(
    shape: tuple[int, ...],
    dtype: Any,
    mask: Any,
    tiles: Sequence[Any],
    call: Callable[[Callable[[Any], Any]], _Tensor],
    *,
    out_shape: tuple[int, ...] | None = None,
    out_dims: Sequence[int | None] | None = None,
    buffer: Any = sbuf,
) -> _Tensor:
    """``call(arg)`` runs the 0.3 function with each operand passed through ``arg`` (restricted to the mask's box).

    Unmasked, its result is returned as is; masked, the instruction that produced it is made to
    write the box of a full-size result instead.
    """
    ctx = _current()
    box = _grid.mask_box(mask, shape, tiles)
    if box is None:
        return _rt.mark_result(call(lambda x: _rt.operand(x, None, shape)))
    out_shape = shape if out_shape is None else out_shape
    dims = tuple(out_dims) if out_dims is not None else _grid.same_dims(out_shape, shape)
    out_box = tuple(box[d] if d is not None else (0, n) for d, n in zip(dims, out_shape))
    if _grid.is_empty(box):
        return _rt.new_result(out_shape, dtype, buffer, out_box)
    small = call(lambda x: _rt.operand(x, box, shape))
    out = _rt.new_result(out_shape, small.dtype, small.buffer, out_box)
    target = _grid.restrict(out, out_box)
    if not _rt.retarget(ctx, small, target):
        _ops.assign(target, small)
    return out


def _compute_arg(op: str, role: str, x: Any, scalar_hbm: bool = False) -> Any:
    """A math operand: a number, or a tile in SBUF/PSUM (``err_unsupported_memory`` in 0.1's wording otherwise).

    With ``scalar_hbm``, a one-element HBM tensor (a kernel parameter such as NKIBench's
    ``eps``) is loaded into a ``[1, 1]`` tile, which the binary ops broadcast.
    """
    if not isinstance(x, (_Tensor, _rt.BlockTensor)):
        return x
    t = _rt.tile_arg(op, role, x)
    if t.buffer.on_chip:
        return t
    if scalar_hbm and t.size == 1:
        return _nl.load(_grid.restrict(t, None).reshape((1, 1)))
    raise _Invalid(
        "err_unsupported_memory", f"Expected operand '{role}' of '{op}' to be in address space 'psum|sbuf', but got a tile in 'hbm' instead."
    )


def _result_dtype(dtype: Any, *args: Any) -> Any:
    """NKI's promotion over the operands (numbers are weakly typed); None when no operand has a dtype."""
    if dtype is not None:
        return _dt.as_dtype(dtype)
    out = None
    for a in args:
        if isinstance(a, _Tensor):
            d = a.dtype
        elif isinstance(a, (int, float, bool, np.number)):
            d = _dt.weak_scalar_dtype(a)
        else:
            continue
        out = d if out is None else _dt.promote(out, d)
    return out


_BOOL_RESULT = frozenset({"equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_and", "logical_or", "logical_xor"})


def _broadcast_free(t: _Tensor, other: Sequence[int]) -> _Tensor:
    """``t`` with its size-1 free dims stretched (stride 0) to ``other``'s sizes: 0.1's NumPy-style broadcast."""
    for d in range(1, t.ndim):
        if t.shape[d] == 1 and other[d] > 1:
            t = _grid.restrict(t, None).broadcast(d, other[d])
    return t


def _divide(x: Any, y: Any, dtype: Any = None) -> _Tensor:
    """``nl.divide`` as Trainium computes it, having no divide operator: ``x · reciprocal(y)``.

    A tile divisor costs VectorE's ``reciprocal`` and then the multiply, what a 0.3 kernel must
    write by hand; a number divisor folds to a multiply by ``1 / y``, as a compiler does.
    """
    if isinstance(y, _Tensor):
        return _nl.multiply(x, _nl.reciprocal(y, dtype=float32), dtype=dtype)
    return _nl.multiply(x, 1.0 / y, dtype=dtype)


def _remainder(rounding: str) -> Callable[..., _Tensor]:
    """``nl.mod`` (``rounding="floor"``) or ``nl.fmod`` (``"trunc"``) as ``x - y · rounding(x / y)`` from hardware instructions.

    The ISA has no remainder operator and AWS documents no lowering for one, so this is the
    sequence a kernel would write: :func:`_divide`, the rounding on ScalarE, a multiply and a subtract.
    """

    def lowered(x: Any, y: Any, dtype: Any = None) -> _Tensor:
        q = getattr(_nl, rounding)(_divide(x, y, float32), dtype=float32)
        return _nl.subtract(x, _nl.multiply(q, y, dtype=float32), dtype=dtype)

    lowered.__doc__ = f"``x - y · {rounding}(x / y)``: reciprocal, multiplies, {rounding} and a subtract."
    return lowered


def _tagged(what: str, impl: Callable[..., _Tensor]) -> Callable[..., _Tensor]:
    """``impl``, marking every instruction it issues with ``lowered_from=what`` in the trace (a profile shows where they came from)."""

    def run(x: Any, y: Any, dtype: Any = None) -> _Tensor:
        trace = _current().trace
        start = len(trace.instructions) if trace is not None else 0
        out = impl(x, y, dtype=dtype)
        for ins in trace.instructions[start:] if trace is not None else ():
            ins.attrs["lowered_from"] = what
        return out

    return run


#: 0.1 operators the hardware has no instruction for, and the instructions they are lowered to
#: (0.1 kernels use them: the 0.3 ``nl`` refuses them, as AWS's 0.3 front-end does).
_LOWERED = {"divide": _divide, "mod": _remainder("floor"), "fmod": _remainder("trunc")}


def _make_binary(name: str) -> Callable[..., Any]:
    host = getattr(_nl, name)  # numbers only: evaluated at trace time
    impl = _tagged(f"nl.{name}", _LOWERED[name]) if name in _LOWERED else host

    def fn(x: Any, y: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Any:
        x, y = _compute_arg(name, "x", x, True), _compute_arg(name, "y", y, True)
        tiles = [t for t in (x, y) if isinstance(t, _Tensor)]
        if not tiles:
            return host(x, y)
        if len(tiles) == 2 and x.shape != y.shape and (1, 1) in (tuple(x.shape), tuple(y.shape)):  # a [1, 1] scalar tile
            x, y = (broadcast_to(x, shape=(y.shape[0], 1)), y) if x.size == 1 else (x, broadcast_to(y, shape=(x.shape[0], 1)))
        elif len(tiles) == 2 and x.shape != y.shape and x.ndim == y.ndim and x.shape[0] == y.shape[0] and _builtins.min(x.size, y.size) > x.shape[0]:
            x, y = _broadcast_free(x, y.shape), _broadcast_free(y, x.shape)  # [P, 56, 1, 1] with [P, 56, 3, 3]
        if dtype is None and name in _BOOL_RESULT:
            dtype = bool_
        big = _builtins.max(tiles, key=lambda t: t.size)  # (nl.max shadows max)
        d = _result_dtype(dtype, x, y)
        if name == "divide" and dtype is None and d is not None and _dt.is_int(d):
            d = float32  # true division, as in NumPy: position / width stays fractional until nl.floor (resize_nearest)
        return _lower(big.shape, d, mask, tiles, lambda a: impl(a(x), a(y), dtype=d))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name} element-wise, lowered to hardware instructions: {_LOWERED[name].__doc__}" if name in _LOWERED else host.__doc__
    fn._nki_op = name  # type: ignore[attr-defined]
    return fn


def _make_unary(name: str) -> Callable[..., Any]:
    impl = getattr(_nl, name)

    def fn(x: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Any:
        t = _compute_arg(name, "x", x)
        _ops.require_tensor(name, "x", t)
        d = _dt.as_dtype(dtype) if dtype is not None else t.dtype
        return _lower(t.shape, d, mask, [t], lambda a: impl(a(t), dtype=d))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = impl.__doc__
    fn._nki_op = name  # type: ignore[attr-defined]
    return fn


add = _make_binary("add")
subtract = _make_binary("subtract")
multiply = _make_binary("multiply")
divide = _make_binary("divide")
maximum = _make_binary("maximum")
minimum = _make_binary("minimum")
power = _make_binary("power")
fmod = _make_binary("fmod")
mod = _make_binary("mod")
equal = _make_binary("equal")
not_equal = _make_binary("not_equal")
greater = _make_binary("greater")
greater_equal = _make_binary("greater_equal")
less = _make_binary("less")
less_equal = _make_binary("less_equal")
logical_and = _make_binary("logical_and")
logical_or = _make_binary("logical_or")
logical_xor = _make_binary("logical_xor")
bitwise_and = _make_binary("bitwise_and")
bitwise_or = _make_binary("bitwise_or")
bitwise_xor = _make_binary("bitwise_xor")
left_shift = _make_binary("left_shift")
right_shift = _make_binary("right_shift")

exp = _make_unary("exp")
log = _make_unary("log")
sqrt = _make_unary("sqrt")
rsqrt = _make_unary("rsqrt")
reciprocal = _make_unary("reciprocal")
sin = _make_unary("sin")
cos = _make_unary("cos")
tan = _make_unary("tan")
tanh = _make_unary("tanh")
arctan = _make_unary("arctan")
sigmoid = _make_unary("sigmoid")
relu = _make_unary("relu")
gelu = _make_unary("gelu")
gelu_dx = _make_unary("gelu_dx")
gelu_apprx_tanh = _make_unary("gelu_apprx_tanh")
gelu_apprx_sigmoid = _make_unary("gelu_apprx_sigmoid")
silu = _make_unary("silu")
silu_dx = _make_unary("silu_dx")
softplus = _make_unary("softplus")
mish = _make_unary("mish")
erf = _make_unary("erf")
erf_dx = _make_unary("erf_dx")
sign = _make_unary("sign")
abs = _make_unary("abs")
square = _make_unary("square")
negative = _make_unary("negative")
floor = _make_unary("floor")
ceil = _make_unary("ceil")
trunc = _make_unary("trunc")
logical_not = _make_unary("logical_not")
invert = _make_unary("invert")


def _reduction(name: str, result_dtype: Any = None) -> Callable[..., Any]:
    impl = getattr(_nl, name)

    def fn(x: Any, axis: Any, *, dtype: Any = None, mask: Any = None, keepdims: bool = False, **kwargs: Any) -> Any:
        t = _ops.require_tensor(name, "x", _compute_arg(name, "x", x))
        axes = tuple(a + t.ndim if a < 0 else a for a in _ops.axis_tuple(f"nl.{name}", axis))
        out_shape, dims = _rt.reduced_shape(t.shape, axes, keepdims)
        d = _dt.as_dtype(dtype) if dtype is not None else result_dtype or t.dtype

        def call(a: Callable[[Any], Any]) -> _Tensor:
            xr = a(t)
            shape = _rt.reduced_shape(xr.shape, axes, keepdims)[0]
            x, last = _rt.trailing_axes(xr, axes)
            res = impl(x, last, dtype=d)
            return res if res.shape == shape else res.reshape(shape)

        return _lower(t.shape, d, mask, [t], call, out_shape=out_shape, out_dims=dims)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = impl.__doc__
    fn._nki_op = getattr(impl, "_nki_op", name)  # type: ignore[attr-defined]
    return fn


sum = _reduction("sum")
max = _reduction("max")
min = _reduction("min")
prod = _reduction("prod")
mean = _reduction("mean")
var = _reduction("var")
all = _reduction("all", bool_)


def softmax(x: Any, axis: Any, *, dtype: Any = None, compute_dtype: Any = None, mask: Any = None, **kwargs: Any) -> _Tensor:
    """Softmax along the last axis."""
    t = _ops.require_tensor("softmax", "x", _compute_arg("softmax", "x", x))
    d = _dt.as_dtype(dtype) if dtype is not None else t.dtype
    return _lower(t.shape, d, mask, [t], lambda a: _nl.softmax(a(t), axis, dtype=d))


def rms_norm(x: Any, w: Any, axis: Any, n: Any, epsilon: float = 1e-6, *, dtype: Any = None, compute_dtype: Any = None, mask: Any = None,
             **kwargs: Any) -> _Tensor:
    """``x · rsqrt(mean(x²) + eps) · w`` along the last axis."""
    t = _ops.require_tensor("rms_norm", "x", _compute_arg("rms_norm", "x", x))
    d = _dt.as_dtype(dtype) if dtype is not None else t.dtype
    return _lower(t.shape, d, mask, [t], lambda a: _nl.rms_norm(a(t), a(w), axis, n, epsilon, dtype=d))


def copy(src: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> _Tensor:
    """A new SBUF tile with ``src``'s values (cast to ``dtype``)."""
    t = _ops.require_tensor("copy", "src", _compute_arg("copy", "src", src))
    d = _dt.as_dtype(dtype) if dtype is not None else t.dtype
    return _lower(t.shape, d, mask, [t], lambda a: _nl.copy(a(t), dtype=d))


copy._nki_op = "copy"  # type: ignore[attr-defined]


def where(condition: Any, x: Any, y: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> _Tensor:
    """``x`` where ``condition`` is non-zero, else ``y``."""
    c = _ops.require_tensor("where", "condition", _compute_arg("where", "condition", condition))
    d = _result_dtype(dtype, *(v for v in (x, y) if isinstance(v, _Tensor))) or c.dtype
    return _lower(c.shape, d, mask, [c], lambda a: _nl.where(a(c), a(x), a(y), dtype=d))


def dropout(x: Any, rate: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> _Tensor:
    """Zero each element with probability ``rate``."""
    return _nisa.dropout(x, rate, mask=mask, dtype=dtype)


def static_cast(x: Any, dtype: Any) -> Any:
    """A tile's copy in ``dtype``; on the host (tests prepare inputs so), a NumPy array cast to ``dtype``."""
    if isinstance(x, _Tensor):
        return copy(x, dtype=dtype)
    if isinstance(x, np.ndarray):
        return x.astype(_dt.as_dtype(dtype))
    return x


def broadcast_to(src: Any, *, shape: Any, **kwargs: Any) -> _Tensor:
    """A ``[P, 1]`` column broadcast along the free dim, or a ``[1, F]`` row across partitions (also ``tile.broadcast_to(shape)``)."""
    t = _ops.require_tensor("broadcast_to", "src", _compute_arg("broadcast_to", "src", src))
    return _rt.mark_result(_nl.broadcast_to(_grid.restrict(t, None), shape))


# --------------------------------------------------------------------------------------------
# Data movement
# --------------------------------------------------------------------------------------------
def load(src: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> _Tensor:
    """HBM → a new SBUF tile."""
    t = _rt.tile_arg("load", "src", src)
    d = _dt.as_dtype(dtype) if dtype is not None else t.dtype
    if t.ndim < 2:
        return _rt.mark_result(_nl.load(_grid.restrict(t, None), dtype=d))
    return _lower(t.shape, d, mask, [t], lambda a: _nl.load(a(t), dtype=d))


def store(dst: Any, value: Any, *, mask: Any = None, **kwargs: Any) -> None:
    """A tile (or a number) → HBM."""
    d = _rt.tile_arg("store", "dst", dst)
    box = _grid.mask_box(mask, d.shape, [value])
    if _grid.is_empty(box):
        return
    target = _rt.operand(d, box, d.shape)
    if not isinstance(value, (_Tensor, _rt.BlockTensor)):
        tile = _nl.full(target.shape if target.ndim >= 2 else (1, target.size), value, d.dtype)
        _nl.store(target, tile)
        return
    _nl.store(target, _rt.operand(_rt.tile_arg("store", "value", value), box, d.shape))


def load_transpose2d(src: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> _Tensor:
    """HBM ``[a, b]`` → an SBUF tile ``[b, a]``."""
    t = _rt.tile_arg("load_transpose2d", "src", src)
    d = _dt.as_dtype(dtype) if dtype is not None else t.dtype
    return _lower(t.shape, d, mask, [t], lambda a: _nl.load_transpose2d(a(t), dtype=d), out_shape=tuple(reversed(t.shape)), out_dims=(1, 0))


# --------------------------------------------------------------------------------------------
# TensorE
# --------------------------------------------------------------------------------------------
def matmul(x: Any, y: Any, *, transpose_x: bool = False, mask: Any = None, **kwargs: Any) -> _Tensor:
    """``x @ y`` (``xᵀ @ y`` with ``transpose_x``) into a new PSUM tile; ``psum += nl.matmul(...)`` accumulates."""
    x = _rt.tile_arg("matmul", "x", x)
    if not transpose_x:
        if mask is not None:
            raise _Unsupported("err_matmul_mask", "nl.matmul(..., mask=...) needs transpose_x=True in the emulator (mask the [K, M] operand)")
        x = _nl.transpose(_grid.restrict(x, None))
    return _nisa.nc_matmul(x, y, mask=mask)  # (which stages PSUM operands, such as the transpose's, through SBUF)


def transpose(x: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> _Tensor:
    """2-D transpose (VectorE for ≤ 32×32, else TensorE into PSUM)."""
    t = _ops.require_tensor("transpose", "x", _compute_arg("transpose", "x", x))
    desc = f"'x[{', '.join(map(str, t.shape))}]'"
    if t.ndim > 2:
        raise _Invalid("err_exceed_max_supported_dimension", f"parameter {desc} of 'transpose' exceed max supported number of dimensions of 2.")
    limit = _current().target.pmax
    for dim, n in enumerate(t.shape):
        if n > limit:
            raise _Invalid(
                "err_size_of_dimension_exceed_arch_limit", f"size of dimension {dim} in {desc} of 'transpose' exceed architecture limitation of {limit}."
            )
    out = _nisa.nc_transpose(t, mask=mask)
    if dtype is not None and _dt.as_dtype(dtype) != out.dtype:
        out = copy(out, dtype=dtype)
    return out


# --------------------------------------------------------------------------------------------
# 0.1 tile methods (``tile.broadcast_to(shape)``), reached through NkiTensor.__getattr__
# --------------------------------------------------------------------------------------------
_TILE_METHODS = {"broadcast_to": lambda t, shape, **kw: broadcast_to(t, shape=shape, **kw)}


def _tile_method(t: _Tensor, name: str) -> Any:
    fn = _TILE_METHODS.get(name)
    if fn is None:
        raise AttributeError(f"'NkiTensor' object has no attribute '{name}'")
    return functools.partial(fn, t)
