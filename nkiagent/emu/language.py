"""``nki.language``: allocation, loops, SPMD ids, and the tile-level math functions.

Functions that return a new tile allocate it in SBUF and lower to the same ISA ops a
kernel could call directly (``nl.add`` → ``tensor_tensor``, ``nl.exp`` → ``activation``,
``nl.sum`` → ``tensor_reduce``), so the trace and the cost model see one instruction set.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from . import dtypes as dt
from . import isa
from .alu import ACT, ALU
from .alu import NOT_ON_HARDWARE as _NOT_ON_HARDWARE
from .alu import not_on_hardware as _not_on_hardware
from .dtypes import (  # noqa: F401  (re-exported as nl.float32 etc.)
    bfloat16,
    bool_,
    float4_e2m1fn_x4,
    float8_e4m3,
    float8_e4m3fn,
    float8_e4m3fn_x4,
    float8_e5m2,
    float8_e5m2_x4,
    float8_e8m0fnu,
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
from .errors import NkiTypeError, NkiValidationError
from .memory import BUFFERS, Buffer, current, hbm, private_hbm, psum, running, sbuf, shared_hbm  # noqa: F401
from .memory import plain_ints as _plain_ints
from .ops import HBM, axis_tuple, not_emulated, record, require_tensor, tile, write
from .registry import lowering
from .targets import get_target
from .tensor import DynSlice, NkiTensor, ds  # noqa: F401
from .trace import NO_REORDER


class NKIObject:
    """The base class of a kernel's own Python helper objects (configs, tiling plans), as in AWS's NKI.

    The compiler traces a subclass's instances as plain Python values; the emulator runs
    kernels as Python, so it is an ordinary base class (subclasses are often dataclasses).
    """


# --------------------------------------------------------------------------------------------
# Allocation
# --------------------------------------------------------------------------------------------
class par_dim(int):
    """0.1 block-dimension marker: ``nl.ndarray((B, nl.par_dim(128), F), …)``."""

    _nki_par_dim = True


def _buffer(buffer: Any) -> Buffer:
    if isinstance(buffer, Buffer):
        return buffer
    if buffer is None:
        return sbuf
    if isinstance(buffer, str) and current().api == "0.1" and buffer in BUFFERS:
        return BUFFERS[buffer]
    raise NkiTypeError("err_buffer_type", f"buffer must be nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm or nl.private_hbm, got {buffer!r}")


def _shape(shape: Any) -> tuple[tuple[int, ...], int]:
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if _plain_ints(shape):  # the everyday case: no partition-dim markers, nothing to convert
        return shape, 0
    pdim = next((k for k, s in enumerate(shape) if getattr(s, "_nki_par_dim", False)), 0)
    if any(not isinstance(s, (int, np.integer)) or isinstance(s, bool) for s in shape):  # (nl.all shadows all())
        raise NkiTypeError("err_invalid_shape", f"tensor shape {list(shape)} must be a tuple of integers")
    return tuple(int(s) for s in shape), pdim


@lowering(example="nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)")
def ndarray(shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "", address: Any = None, **kwargs: Any) -> NkiTensor:
    """Allocate an uninitialized tensor (reads as NaN / 4 until written)."""
    ctx = current()
    shp, pdim = _shape(shape)
    alloc = ctx.allocate(shp, dt.as_dtype(dtype), _buffer(buffer), name, address, pdim)
    if alloc.memory == "shared_hbm":
        ctx.outputs.append(alloc)
    return NkiTensor._whole(alloc)


def _filled(shape: Any, value: Any, dtype: Any, buffer: Any, name: str) -> NkiTensor:
    buf = _buffer(buffer)
    if buf.name in HBM:
        raise NkiValidationError("err_hbm_tensor_with_init_value_not_supported", "Creating HBM tensor with init value is not supported.")
    t = ndarray(shape, dtype, buf, name)
    d = t.dtype
    whole = t if t._a.pdim == 0 else None
    views = [whole] if whole is not None else [t[i] for i in np.ndindex(*t.shape[: t._a.pdim])]
    for v in views:
        isa.memset(v, int(value) if dt.is_int(d) else float(value))
    return t


@lowering("memset", example="nl.zeros((128, 64), nl.float32)")
def zeros(shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "", **kwargs: Any) -> NkiTensor:
    """A tensor filled with 0 (one recorded memset)."""
    return _filled(shape, 0, dtype, buffer, name)


@lowering("memset", example="nl.ones((128, 64), nl.float32)")
def ones(shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "", **kwargs: Any) -> NkiTensor:
    """A tensor filled with 1."""
    return _filled(shape, 1, dtype, buffer, name)


@lowering("memset", example="nl.full((128, 64), 2.0, nl.float32)")
def full(shape: Any, fill_value: Any, dtype: Any, buffer: Any = sbuf, name: str = "", **kwargs: Any) -> NkiTensor:
    """A tensor filled with ``fill_value``."""
    return _filled(shape, fill_value, dtype, buffer, name)


@lowering("memset", example="nl.zeros_like(x)")
def zeros_like(x: NkiTensor, dtype: Any = None, buffer: Any = None, name: str = "") -> NkiTensor:
    """A tensor of ``x``'s shape filled with 0 (``x``'s dtype and memory unless given)."""
    return zeros(x.shape, dtype or x.dtype, buffer or x.buffer, name)


@lowering(example="nl.empty_like(x)")
def empty_like(x: NkiTensor, dtype: Any = None, buffer: Any = None, name: str = "") -> NkiTensor:
    """An uninitialized tensor of ``x``'s shape (``x``'s dtype and memory unless given)."""
    return ndarray(x.shape, dtype or x.dtype, buffer or x.buffer, name)


@lowering("memset", "affine_select", example="nl.shared_identity_matrix(128)")
def shared_identity_matrix(n: int, dtype: Any = uint8, dst: Any = None) -> NkiTensor:
    """An ``n × n`` identity matrix in SBUF (built on GpSimd)."""
    out = dst if dst is not None else ndarray((n, n), dtype, sbuf, "identity")
    isa.affine_select(out, [[-1, n]], 1, _ones_like(out), 0, cmp_op=equal)
    return out


def _ones_like(t: NkiTensor) -> NkiTensor:
    return ones(t.shape, t.dtype)


@lowering(example="nl.shared_constant([[1.0, 2.0], [3.0, 4.0]])")
def shared_constant(constant: Any, dtype: Any = None) -> NkiTensor:
    """A compile-time constant array placed in HBM."""
    ctx = current()
    arr = np.asarray(constant)
    d = dt.as_dtype(dtype) if dtype is not None else dt.as_dtype(arr.dtype)
    alloc = ctx.allocate(arr.shape, d, hbm, "constant")
    if alloc.has_data:
        alloc.overwrite_all()
        alloc.data[...] = dt.store_cast(arr.reshape(-1), d)
    alloc.written = True
    return NkiTensor._whole(alloc)


@lowering(example="nl.is_hbm(nl.shared_hbm)")
def is_hbm(buffer: Any) -> bool:
    """Whether ``buffer`` is an HBM memory (``nl.hbm``, ``nl.shared_hbm``, ``nl.private_hbm``)."""
    return _buffer(buffer).name in HBM


@lowering(example="nl.is_sbuf(nl.sbuf)")
def is_sbuf(buffer: Any) -> bool:
    """Whether ``buffer`` is ``nl.sbuf``."""
    return _buffer(buffer).name == "sbuf"


@lowering(example="nl.is_psum(nl.psum)")
def is_psum(buffer: Any) -> bool:
    """Whether ``buffer`` is ``nl.psum``."""
    return _buffer(buffer).name == "psum"


@lowering(example="nl.is_on_chip(nl.sbuf)")
def is_on_chip(buffer: Any) -> bool:
    """Whether ``buffer`` is on chip (SBUF or PSUM)."""
    return _buffer(buffer).on_chip


# --------------------------------------------------------------------------------------------
# tile_size, SPMD, loops
# --------------------------------------------------------------------------------------------
class _TileSize:
    """``nl.tile_size``: per-target constants (the running kernel's target, else the default)."""

    def _t(self) -> Any:
        ctx = running()
        return ctx.target if ctx is not None else get_target()

    pmax = property(lambda self: self._t().pmax)
    psum_fmax = property(lambda self: self._t().psum_fmax)
    gemm_stationary_fmax = property(lambda self: self._t().gemm_stationary_fmax)
    gemm_moving_fmax = property(lambda self: self._t().gemm_moving_fmax)
    bn_stats_fmax = property(lambda self: self._t().bn_stats_fmax)
    psum_min_align = property(lambda self: 4)
    sbuf_min_align = property(lambda self: 1)
    total_available_sbuf_size = property(lambda self: self._t().sbuf_usable_bytes)
    sbuf_size_bytes = property(lambda self: self._t().sbuf_usable_bytes)
    psum_bank_fmax = property(lambda self: self._t().psum_bank_bytes // 4)
    psum_bank_fmax_bytes = property(lambda self: self._t().psum_bank_bytes)
    psum_num_banks = property(lambda self: self._t().psum_banks)


tile_size = _TileSize()


@lowering(example="nl.program_id(0)")
def program_id(axis: int = 0) -> int:
    """This SPMD instance's index along ``axis``."""
    ctx = current()
    if not ctx.program_id:
        return 0
    if not 0 <= axis < len(ctx.program_id):
        raise NkiValidationError("err_program_axis", f"program_id axis {axis} out of range for a launch grid of {len(ctx.grid)} dims")
    return ctx.program_id[axis]


@lowering(example="nl.num_programs()")
def num_programs(axes: Any = None) -> int:
    """Grid size along ``axes`` (None: all instances)."""
    ctx = current()
    grid = ctx.grid or (1,)
    if axes is None:
        return math.prod(grid)
    if isinstance(axes, (tuple, list)):
        return math.prod(grid[a] for a in axes)
    return grid[axes] if axes < len(grid) else 1


@lowering(example="nl.program_ndim()")
def program_ndim() -> int:
    """The number of dimensions of the SPMD launch grid (0 for a plain call)."""
    return len(current().grid)


class _Range:
    """An NKI loop: iterates like ``range`` and tells the trace which loop and iteration ran."""

    __slots__ = ("kind", "rng")

    def __init__(self, kind: str, start: Any, stop: Any = None, step: Any = 1, **kwargs: Any) -> None:
        if kwargs:
            ctx = running()
            if ctx is None or ctx.api != "0.1":
                raise TypeError(f"{kind}() got an unexpected keyword argument '{next(iter(kwargs))}'")
        self.kind = kind
        self.rng = range(int(start)) if stop is None else range(int(start), int(stop), int(step))

    def __len__(self) -> int:
        return len(self.rng)

    def __iter__(self) -> Iterator[int]:
        ctx = running()
        if ctx is None:
            yield from self.rng
            return
        uid, kind = ctx.next_loop, self.kind
        if kind == "dynamic" and NO_REORDER in ctx.loops_now:
            raise NkiValidationError(
                "err_dynamic_loop_in_no_reorder",
                "a dynamic loop (nl.dynamic_range, nl.fori_loop) is not supported inside a no_reorder block: its trip count is "
                "only known at run time, so the compiler cannot keep its instructions in program order. Use nl.affine_range, "
                "nl.sequential_range or nl.static_range there (unrolled at compile time), or move the loop out of the block",
            )
        frame = [uid, kind, 0]
        ctx.next_loop += 1
        ctx.loops.append(frame)
        outer = ctx.loops_now  # (the enclosing loops stay put while this one runs)
        try:
            if ctx.trace is None:  # only trace records carry ``loops_now``
                for i in self.rng:
                    frame[2] = i
                    yield i
                return
            for i in self.rng:
                frame[2] = i
                ctx.loops_now = (*outer, (uid, kind, i))
                yield i
        finally:
            ctx.loops.remove(frame)
            ctx.loops_now = outer


@lowering(example="nl.affine_range(4)")
def affine_range(start: Any, stop: Any = None, step: Any = 1, **kwargs: Any) -> _Range:
    """Parallel loop: iterations must be independent (the cost model may overlap them)."""
    return _Range("affine", start, stop, step, **kwargs)


@lowering(example="nl.sequential_range(4)")
def sequential_range(start: Any, stop: Any = None, step: Any = 1, **kwargs: Any) -> _Range:
    """Ordered loop: iterations may depend on each other."""
    return _Range("sequential", start, stop, step, **kwargs)


@lowering(example="nl.static_range(4)")
def static_range(start: Any, stop: Any = None, step: Any = 1, **kwargs: Any) -> _Range:
    """Fully unrolled loop."""
    return _Range("static", start, stop, step, **kwargs)


@lowering(example="nl.dynamic_range(4)")
def dynamic_range(start: Any, stop: Any = None, step: Any = 1) -> _Range:
    """On-device loop with runtime bounds; emulated as an ordered loop."""
    return _Range("dynamic", start, stop, step)


@lowering(example="nl.fori_loop(0, 4, lambda i: None)")
def fori_loop(lower: Any, upper: Any, body_fun: Callable[[int], Any], step: Any = 1) -> None:
    """0.6 on-device counted loop: calls ``body_fun(i)`` for each ``i``."""
    for i in _Range("dynamic", lower, upper, step):
        body_fun(i)


@lowering(example="nl.no_reorder()")
@contextmanager
def no_reorder() -> Iterator[None]:
    """Keep program order: the compiler reorders independent instructions elsewhere, not in here.

    The emulator executes in program order anyway; the trace marks the instructions inside (their
    ``loops`` hold :data:`~nkiagent.emu.trace.NO_REORDER`) so that the cost model issues them in order.
    """
    ctx = running()
    if ctx is None or NO_REORDER in ctx.loops_now:  # (a nested block changes nothing)
        yield
        return
    outer = ctx.loops_now
    ctx.loops_now = (*outer, NO_REORDER)
    try:
        yield
    finally:
        ctx.loops_now = outer


# --------------------------------------------------------------------------------------------
# Data movement
# --------------------------------------------------------------------------------------------
def _onchip_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    return shape if len(shape) >= 2 else (1, shape[0]) if shape else (1, 1)


@lowering("dma_copy", example="nl.load(src)")
def load(src: Any, dtype: Any = None, **kwargs: Any) -> NkiTensor:
    """HBM → a new SBUF tile (a ``dma_copy``)."""
    src = require_tensor("load", "src", src)
    if src._a.memory not in HBM:
        raise NkiValidationError(
            "err_unsupported_memory", f"Expected operand 'src' of 'load' to be in address space 'hbm', but got a tile in '{src._a.memory}' instead."
        )
    out = tile(_onchip_shape(src.shape), dtype or src.dtype)
    isa.dma_copy(dst=out, src=src)
    return out


@lowering("dma_copy", "tensor_copy", example="nl.store(dst, x)")
def store(dst: Any, value: Any, **kwargs: Any) -> None:
    """A tile → HBM (a ``dma_copy``)."""
    dst = require_tensor("store", "dst", dst)
    if dst._a.memory not in HBM:
        raise NkiValidationError(
            "err_unsupported_memory", f"Expected operand 'dst' of 'store' to be in address space 'hbm', but got a tile in '{dst._a.memory}' instead."
        )
    value = require_tensor("store", "value", value)
    if value._a.memory == "psum":
        staged = tile(value.shape, value.dtype)
        isa.tensor_copy(dst=staged, src=value)
        value = staged
    isa.dma_copy(dst=dst, src=value)


@lowering("dma_transpose", example="nl.load_transpose2d(src)")
def load_transpose2d(src: Any, dtype: Any = None) -> NkiTensor:
    """HBM [a, b] → SBUF [b, a] by DMA transpose."""
    src = require_tensor("load_transpose2d", "src", src)
    if src.ndim != 2:
        raise NkiValidationError("err_load_transpose2d_rank", f"load_transpose2d needs a 2-D source, got {list(src.shape)}")
    out = tile((src.shape[1], src.shape[0]), dtype or src.dtype)
    isa.dma_transpose(dst=out, src=src)
    return out


@lowering("tensor_copy", "activation", example="nl.copy(x, dtype=nl.bfloat16)")
def copy(x: Any, dtype: Any = None, **kwargs: Any) -> NkiTensor:
    """A new SBUF tile with ``x``'s values (cast to ``dtype``)."""
    x = require_tensor("copy", "x", x)
    out = tile(x.shape, dtype or x.dtype)
    if x._a.memory == "psum" or (dt.is_int(x.dtype) and dt.is_int(out.dtype)):
        isa.tensor_copy(dst=out, src=x)
    else:
        isa.activation(dst=out, op=copy, data=x)
    return out


copy._nki_op = "copy"  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------------
# Element-wise math
# --------------------------------------------------------------------------------------------
_SCALARS = (int, float, bool, np.integer, np.floating)


def _binary(name: str, x: Any, y: Any, dtype: Any) -> Any:
    xt, yt = isinstance(x, NkiTensor), isinstance(y, NkiTensor)
    if xt or yt:
        _check_on_hardware(name, xt and yt)
    fn = globals()[name]
    if xt and yt:
        out_dtype = dt.as_dtype(dtype) if dtype is not None else dt.promote(x.dtype, y.dtype)
        if x.size != y.size and current().api == "0.1":
            return _broadcast_binary(fn, x, y, out_dtype)
        out = tile(x.shape, out_dtype)
        isa.tensor_tensor(dst=out, data1=x, data2=y, op=fn)
        return out
    if xt or yt:
        t, s = (x, y) if xt else (y, x)
        if not isinstance(s, _SCALARS):
            raise NkiTypeError("err_operand_type", f"nl.{name}: operands must be tiles or numbers, got {type(s).__name__}")
        out_dtype = dt.as_dtype(dtype) if dtype is not None else dt.promote(t.dtype, dt.weak_scalar_dtype(s))
        out = tile(t.shape, out_dtype)
        if ALU[name].kind == "bitvec":
            if isinstance(s, (float, np.floating)):
                raise NkiTypeError("err_bitvec_dtype", f"nl.{name}: bitwise operations need integer operands, got the float {s!r}")
            s = int(s)
        else:
            s = float(s)
        isa.tensor_scalar(dst=out, data=t, op0=fn, operand0=s, reverse0=not xt)
        return out
    return ALU[name].fn(np.asarray(x), np.asarray(y)).item()


def _check_on_hardware(name: str, two_tiles: bool) -> None:
    """Refuse the ``nl`` element-wise ops the 0.3 release notes list as not working on hardware.

    ``nl.divide``, ``nl.mod`` and ``nl.fmod`` (``/`` and ``%`` on tiles) have no ISA operator;
    ``nl.power(tile, scalar)`` is "not supported". A kernel that only runs in simulation is not
    a Trainium kernel, and must not be timed as one. The 0.1 front-end lowers the first three itself.
    """
    if name in _NOT_ON_HARDWARE:
        raise _not_on_hardware(name, f"nl.{name}")
    if name == "power" and not two_tiles and current().api != "0.1":
        raise NkiValidationError(
            "err_op_not_on_hardware",
            "nl.power(tile, scalar): not supported on hardware (NKI 0.3 release notes); square with nl.square "
            "(or nisa.activation(op=nl.square)), or raise to a tile of exponents with nl.power(tile, tile)",
        )


def _broadcast_binary(fn: Any, x: NkiTensor, y: NkiTensor, out_dtype: Any) -> NkiTensor:
    """0.1 kernels may combine a (P, F) tile with a (P, 1) column: lowered to tensor_scalar."""
    big, col, rev = (x, y, False) if x.size > y.size else (y, x, True)
    if col.size != col.shape[0] or col.shape[0] != big.shape[0]:
        raise NkiValidationError(
            "err_num_partition_mismatch", f"cannot broadcast {list(x.shape)} with {list(y.shape)} in nl.{fn._nki_op}: only [P, 1] columns broadcast"
        )
    if col.dtype != dt.float32:
        col = _as_f32(col)
    out = tile(big.shape, out_dtype)
    isa.tensor_scalar(dst=out, data=big, op0=fn, operand0=col, reverse0=rev)
    return out


def _as_f32(t: NkiTensor) -> NkiTensor:
    out = tile(t.shape, float32)
    isa.tensor_copy(dst=out, src=t)
    return out


#: What an element-wise ``nl`` function of two operands issues: one instruction for two tiles or a
#: tile and a number (a fp32 copy first where a 0.1 kernel broadcasts a non-fp32 ``[P, 1]`` column).
_BINARY_LOWERS_TO = ("tensor_tensor", "tensor_scalar", "tensor_copy")


def _make_binary(name: str, doc: str) -> Callable[..., Any]:
    def fn(x: Any, y: Any, dtype: Any = None, **kwargs: Any) -> Any:
        return _binary(name, x, y, dtype)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    fn._nki_op = name  # type: ignore[attr-defined]
    if name in _NOT_ON_HARDWARE:  # refused on tiles (no ISA operator): computes numbers at trace time only
        return lowering(example=f"nl.{name}(7.0, 2.0)")(fn)
    operands = "(i, j)" if ALU[name].kind == "bitvec" else "(x, y)"
    return lowering(*_BINARY_LOWERS_TO, example=f"nl.{name}{operands}")(fn)


def _unary(name: str, x: Any, dtype: Any) -> Any:
    x = require_tensor(name, "x", x)
    out = tile(x.shape, dtype or x.dtype)
    if name == "reciprocal":
        isa.reciprocal(dst=out, data=x)
    elif name in ("invert",):
        isa.tensor_scalar(dst=out, data=x, op0=bitwise_xor, operand0=-1)
    else:
        isa.activation(dst=out, op=globals()[name], data=x)
    return out


#: The instruction each element-wise ``nl`` function of one tile issues (see :func:`_unary`); ``activation`` for the rest.
_UNARY_LOWERS_TO = {"reciprocal": "reciprocal", "invert": "tensor_scalar"}


def _make_unary(name: str, doc: str) -> Callable[..., Any]:
    def fn(x: Any, dtype: Any = None, **kwargs: Any) -> Any:
        return _unary(name, x, dtype)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    fn._nki_op = name  # type: ignore[attr-defined]
    return lowering(_UNARY_LOWERS_TO.get(name, "activation"), example=f"nl.{name}({'i' if name == 'invert' else 'x'})")(fn)


add = _make_binary("add", "x + y element-wise.")
subtract = _make_binary("subtract", "x - y element-wise.")
multiply = _make_binary("multiply", "x * y element-wise.")
divide = _make_binary("divide", "x / y element-wise: not on hardware (refused on tiles); write nl.multiply(x, nl.reciprocal(y)).")
maximum = _make_binary("maximum", "Element-wise maximum.")
minimum = _make_binary("minimum", "Element-wise minimum.")
abs_max = _make_binary("abs_max", "max(|x|, |y|).")
abs_min = _make_binary("abs_min", "min(|x|, |y|).")
power = _make_binary("power", "x ** y for two tiles (GpSimd); nl.power(tile, scalar) is not supported on hardware.")
fmod = _make_binary("fmod", "C fmod: simulation only, fails on hardware (refused on tiles).")
mod = _make_binary("mod", "Python-style modulo: simulation only, fails on hardware (refused on tiles).")
equal = _make_binary("equal", "1 where x == y else 0.")
not_equal = _make_binary("not_equal", "1 where x != y else 0.")
greater = _make_binary("greater", "1 where x > y else 0.")
greater_equal = _make_binary("greater_equal", "1 where x >= y else 0.")
less = _make_binary("less", "1 where x < y else 0.")
less_equal = _make_binary("less_equal", "1 where x <= y else 0.")
logical_and = _make_binary("logical_and", "Logical and of non-zero values.")
logical_or = _make_binary("logical_or", "Logical or of non-zero values.")
logical_xor = _make_binary("logical_xor", "Logical xor of non-zero values.")
bitwise_and = _make_binary("bitwise_and", "Bitwise and (integer tiles).")
bitwise_or = _make_binary("bitwise_or", "Bitwise or (integer tiles).")
bitwise_xor = _make_binary("bitwise_xor", "Bitwise xor (integer tiles).")
left_shift = _make_binary("left_shift", "x << y.")
right_shift = _make_binary("right_shift", "Logical x >> y.")

exp = _make_unary("exp", "e ** x (ScalarE).")
log = _make_unary("log", "Natural log; valid input range [2^-64, 2^64].")
sqrt = _make_unary("sqrt", "Square root; valid input range [2^-116, 2^118].")
rsqrt = _make_unary("rsqrt", "1 / sqrt(x); valid input range [2^-87, 2^97].")
reciprocal = _make_unary("reciprocal", "1 / x (VectorE).")
sin = _make_unary("sin", "Sine; valid input range [-pi, pi].")
cos = _make_unary("cos", "Cosine.")
tan = _make_unary("tan", "Tangent.")
tanh = _make_unary("tanh", "Hyperbolic tangent.")
arctan = _make_unary("arctan", "Arc tangent; valid input range [-pi/2, pi/2].")
sigmoid = _make_unary("sigmoid", "1 / (1 + e^-x).")
relu = _make_unary("relu", "max(x, 0).")
gelu = _make_unary("gelu", "GELU (erf form).")
gelu_dx = _make_unary("gelu_dx", "Derivative of GELU.")
gelu_apprx_tanh = _make_unary("gelu_apprx_tanh", "GELU, tanh approximation.")
gelu_apprx_sigmoid = _make_unary("gelu_apprx_sigmoid", "GELU, sigmoid approximation x·sigmoid(1.702x).")
gelu_apprx_sigmoid_dx = _make_unary("gelu_apprx_sigmoid_dx", "Derivative of the sigmoid GELU approximation.")
silu = _make_unary("silu", "x · sigmoid(x).")
silu_dx = _make_unary("silu_dx", "Derivative of SiLU.")
softplus = _make_unary("softplus", "log(1 + e^x).")
mish = _make_unary("mish", "x · tanh(softplus(x)).")
erf = _make_unary("erf", "Error function.")
erf_dx = _make_unary("erf_dx", "Derivative of erf.")
sign = _make_unary("sign", "Sign of x.")
abs = _make_unary("abs", "|x|.")
square = _make_unary("square", "x².")
negative = _make_unary("negative", "-x.")
floor = _make_unary("floor", "Round down.")
ceil = _make_unary("ceil", "Round up.")
trunc = _make_unary("trunc", "Round toward zero.")
logical_not = _make_unary("logical_not", "1 where x == 0 else 0.")
invert = _make_unary("invert", "Bitwise not (integer tiles).")


# --------------------------------------------------------------------------------------------
# Reductions and composites
# --------------------------------------------------------------------------------------------
def _reduce(name: str, x: Any, axis: Any, dtype: Any, keepdims: bool, negate: bool = False) -> NkiTensor:
    x = require_tensor(name, "x", x)
    axes = tuple(a + x.ndim if a < 0 else a for a in axis_tuple(f"nl.{name}", axis))
    if any(not 0 <= a < x.ndim for a in axes):
        raise NkiValidationError("err_reduce_axis", f"nl.{name} axis {axis} is out of range for a {x.ndim}-D tile {list(x.shape)}")
    shape = tuple((1 if keepdims else None) if k in axes else n for k, n in enumerate(x.shape))
    shape = tuple(s for s in shape if s is not None)
    out = tile(_onchip_shape(shape) if len(shape) >= 2 else (x.shape[0], 1), dtype or x.dtype)
    isa.tensor_reduce(dst=out, op=globals()[_REDUCE_OP[name]], data=x, axis=axes, negate=negate, keepdims=keepdims)
    return out


_REDUCE_OP = {"sum": "add", "max": "maximum", "min": "minimum", "prod": "multiply", "all": "logical_and"}


@lowering("tensor_reduce", example="nl.sum(x, axis=1)")
def sum(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, **kwargs: Any) -> NkiTensor:
    """Sum along free axes."""
    return _reduce("sum", x, axis, dtype, keepdims)


@lowering("tensor_reduce", example="nl.max(x, axis=1)")
def max(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, **kwargs: Any) -> NkiTensor:
    """Maximum along free axes."""
    return _reduce("max", x, axis, dtype, keepdims)


@lowering("tensor_reduce", example="nl.min(x, axis=1)")
def min(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, **kwargs: Any) -> NkiTensor:
    """Minimum along free axes."""
    return _reduce("min", x, axis, dtype, keepdims)


@lowering("tensor_reduce", example="nl.prod(x, axis=1)")
def prod(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, **kwargs: Any) -> NkiTensor:
    """Product along free axes."""
    return _reduce("prod", x, axis, dtype, keepdims)


@lowering("tensor_reduce", example="nl.all(x, axis=1)")
def all(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, **kwargs: Any) -> NkiTensor:
    """1 where every element along the axes is non-zero."""
    return _reduce("all", x, axis, dtype, keepdims)


sum._nki_op, max._nki_op, min._nki_op, prod._nki_op = "add", "maximum", "minimum", "multiply"  # type: ignore[attr-defined]


def _count(x: NkiTensor, axis: Any) -> int:
    return math.prod(x.shape[a] for a in axis_tuple("nl.mean", axis))


@lowering("tensor_reduce", "tensor_scalar", example="nl.mean(x, axis=1)")
def mean(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, **kwargs: Any) -> NkiTensor:
    """Mean along free axes (a reduction and a scale)."""
    s = _reduce("sum", x, axis, float32, keepdims)
    out = tile(s.shape, dtype or x.dtype)
    isa.tensor_scalar(dst=out, data=s, op0=multiply, operand0=1.0 / _count(x, axis))
    return out


@lowering("tensor_reduce", "tensor_scalar", "tensor_tensor", "activation", example="nl.var(x, axis=1)")
def var(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, **kwargs: Any) -> NkiTensor:
    """Population variance along the last free axis."""
    m = mean(x, axis, float32, keepdims=True)
    centered = tile(x.shape, float32)
    if m.size == m.shape[0]:
        isa.tensor_scalar(dst=centered, data=x, op0=subtract, operand0=m)
    else:  # one mean per row of a 3-D+ tile is no (P, 1) column: subtract a stride-0 broadcast view instead
        for d, n in enumerate(x.shape):
            m = m.broadcast(d, n) if m.shape[d] != n else m
        isa.tensor_tensor(dst=centered, data1=x, data2=m, op=subtract)
    sq = tile(x.shape, float32)
    isa.activation(dst=sq, op=square, data=centered)
    return mean(sq, axis, dtype or x.dtype, keepdims)


@lowering("tensor_reduce", "activation", "reciprocal", "tensor_scalar", example="nl.softmax(x, axis=1)")
def softmax(x: Any, axis: Any = -1, dtype: Any = None, **kwargs: Any) -> NkiTensor:
    """Softmax along the last axis: max, exp with the max as bias, row sum, reciprocal, scale."""
    x = require_tensor("softmax", "x", x)
    if [a % x.ndim for a in axis_tuple("nl.softmax", axis)] != [x.ndim - 1]:
        raise NkiValidationError("err_softmax_axis", f"nl.softmax supports only the last axis, got axis={axis} for a {x.ndim}-D tile")
    p = x.shape[0]
    neg_max = tile((p, 1), float32)
    isa.tensor_reduce(dst=neg_max, op=maximum, data=x, axis=(x.ndim - 1,), negate=True, keepdims=True)
    e = tile(x.shape, float32)
    total = tile((p, 1), float32)
    isa.activation(dst=e, op=exp, data=x, bias=neg_max, reduce_op=add, reduce_res=total)
    inv = tile((p, 1), float32)
    isa.reciprocal(dst=inv, data=total)
    out = tile(x.shape, dtype or x.dtype)
    isa.tensor_scalar(dst=out, data=e, op0=multiply, operand0=inv)
    return out


@lowering("activation", "tensor_scalar", "tensor_tensor", example="nl.rms_norm(x, y, axis=1, n=64)")
def rms_norm(x: Any, w: Any, axis: Any, n: Any, epsilon: float = 1e-6, dtype: Any = None, compute_dtype: Any = None) -> NkiTensor:
    """x · rsqrt(mean(x²) + eps) · w along the last axis (w is a tile of x's shape: 0.3+ binary ops do not broadcast)."""
    x = require_tensor("rms_norm", "x", x)
    p = x.shape[0]
    sq = tile(x.shape, float32)
    ss = tile((p, 1), float32)
    isa.activation(dst=sq, op=square, data=x, reduce_op=add, reduce_res=ss)
    r = tile((p, 1), float32)
    isa.tensor_scalar(dst=r, data=ss, op0=multiply, operand0=1.0 / float(n), op1=add, operand1=float(epsilon))
    inv = tile((p, 1), float32)
    isa.activation(dst=inv, op=rsqrt, data=r)
    y = tile(x.shape, float32)
    isa.tensor_scalar(dst=y, data=x, op0=multiply, operand0=inv)
    out = tile(x.shape, dtype or x.dtype)
    isa.tensor_tensor(dst=out, data1=y, data2=w, op=multiply)
    return out


@lowering("nc_matmul", "nc_transpose", "tensor_copy", "activation", example="nl.matmul(x, y, transpose_x=True)")
def matmul(x: Any, y: Any, transpose_x: bool = False, **kwargs: Any) -> NkiTensor:
    """``xᵀ·y`` on TensorE into a new PSUM tile (0.3+ requires ``transpose_x=True``)."""
    x = require_tensor("matmul", "x", x)
    y = require_tensor("matmul", "y", y)
    if not transpose_x:
        if current().api != "0.1":
            raise NkiValidationError(
                "err_matmul_transpose_x", "nl.matmul(x, y) requires transpose_x=True in NKI 0.3+: pass x already transposed as [K, M]"
            )
        x = transpose(x)
        if x._a.memory == "psum":
            x = copy(x)
    m = x.size // x.shape[0]
    n = y.size // y.shape[0]
    out = tile((m, n), float32, psum)
    isa.nc_matmul(dst=out, stationary=x, moving=y, accumulate=False)
    return out


@lowering("nc_transpose", example="nl.transpose(x)")
def transpose(x: Any, dtype: Any = None, **kwargs: Any) -> NkiTensor:
    """2-D transpose: VectorE for ≤ 32×32 tiles, else TensorE into PSUM."""
    x = require_tensor("transpose", "x", x)
    p, f = x.shape[0], x.size // x.shape[0]
    small = p <= 32 and f <= 32
    out = tile((f, p), dtype or x.dtype, sbuf if small else psum)
    isa.nc_transpose(dst=out, data=x, engine=isa.engine.vector if small else isa.engine.tensor)
    return out


@lowering("tensor_copy", "memset", "tensor_copy_predicated", example="nl.where(x, x, y)")
def where(condition: Any, x: Any, y: Any, dtype: Any = None, **kwargs: Any) -> NkiTensor:
    """``x`` where ``condition`` is non-zero, else ``y`` (tiles or numbers)."""
    ctx = current()
    cond = require_tensor("where", "condition", condition)
    ref = x if isinstance(x, NkiTensor) else y if isinstance(y, NkiTensor) else cond
    out_dtype = dtype or (dt.promote(x.dtype, y.dtype) if isinstance(x, NkiTensor) and isinstance(y, NkiTensor) else ref.dtype)
    out = tile(cond.shape, out_dtype)
    if isinstance(y, NkiTensor):
        isa.tensor_copy(dst=out, src=y)
    else:
        isa.memset(dst=out, value=int(y) if dt.is_int(out.dtype) else float(y))
    reads = [("predicate", cond)] + ([("src", x)] if isinstance(x, NkiTensor) else [])
    from .ops import check_compute_operand, check_same_shape_pp

    check_compute_operand(ctx, "tensor_copy_predicated", "predicate", cond, "vector")
    if isinstance(x, NkiTensor):
        check_same_shape_pp("tensor_copy_predicated", [("dst", out), ("src", x), ("predicate", cond)])
    record(ctx, "tensor_copy_predicated", "vector", reads, [("dst", out)])
    if ctx.compute:
        xv = (x._np().astype(np.float32).reshape(out.shape) if isinstance(x, NkiTensor) else np.float32(x))
        write(ctx, out, np.where(cond._np().reshape(out.shape) != 0, xv, out._np().astype(np.float32)))
    return out


@lowering("tensor_copy", "dma_copy", example="nl.broadcast_to(col, (128, 64))")
def broadcast_to(x: Any, shape: Any, dtype: Any = None, **kwargs: Any) -> NkiTensor:
    """Broadcast a ``[P, 1]`` column along the free dim (or a ``[1, F]`` row across partitions)."""
    x = require_tensor("broadcast_to", "x", x)
    shape = tuple(int(s) for s in shape)
    if len(shape) != 2 or x.ndim != 2:
        raise NkiValidationError("err_broadcast_shape", f"broadcast_to supports 2-D tiles, got {list(x.shape)} → {list(shape)}")
    out = tile(shape, dtype or x.dtype)
    view = x
    if x.shape[1] == 1 and shape[1] != 1:
        view = view.broadcast(1, shape[1])
    if x.shape[0] == 1 and shape[0] != 1:
        view = view.broadcast(0, shape[0])
        isa.dma_copy(dst=out, src=view)
        return out
    if tuple(view.shape) != shape:
        raise NkiValidationError("err_broadcast_shape", f"cannot broadcast {list(x.shape)} to {list(shape)}")
    isa.tensor_copy(dst=out, src=view)
    return out


@lowering(example="nl.expand_dims(x, 1)")
def expand_dims(x: Any, axis: int) -> NkiTensor:
    """A view with a new size-1 dim at ``axis``."""
    return require_tensor("expand_dims", "x", x).expand_dim(axis)


@lowering(example="nl.device_print('x =', x)")
def device_print(print_prefix: str, tensor: Any, **kwargs: Any) -> None:
    """Print a tensor's values during simulation (like the real simulator's device_print)."""
    t = require_tensor("device_print", "tensor", tensor)
    ctx = current()
    if ctx.compute:
        print(print_prefix, np.array2string(t._np().astype(np.float32), threshold=64))


@lowering("tensor_copy", "activation", example="nl.static_cast(x, nl.bfloat16)")
def static_cast(x: Any, dtype: Any) -> Any:
    """``x`` as ``dtype``: a tile is copied (``nl.copy``), a number passes through."""
    return copy(x, dtype) if isinstance(x, NkiTensor) else x


lowering(example="nl.ds(0, 64)")(ds)  # (defined with the tensor views it makes)

_IMPLEMENTED = {k for k, v in dict(globals()).items() if not k.startswith("_")} | set(ACT)


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)  # the import system's probes (``__path__`` for ``from .x import y``) must see a plain miss
    raise not_emulated(name, "nki.language", _IMPLEMENTED)
