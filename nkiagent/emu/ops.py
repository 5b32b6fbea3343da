"""Shared machinery of every emulated instruction: operand checks, recording, numerics.

Each NKI op follows the same three steps — validate operands against the hardware
rules, append one :class:`~nkiagent.emu.trace.Instruction` to the caller's trace, then
(unless timing-only) compute with one or a few NumPy calls. The helpers here keep those
steps uniform, so error texts and trace records look the same across ops.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from . import dtypes as dt
from .errors import NkiTypeError, NkiUnsupportedError, NkiValidationError, kernel_location, warn
from .memory import KernelContext, current, sbuf
from .tensor import NkiTensor
from .trace import Access, Instruction, Region, pseudo_access

__all__ = [
    "CHECKED_GEOMETRIES_MAX",
    "F32",
    "Checked",
    "MatmulGroup",
    "accumulate_into",
    "assign",
    "axis_tuple",
    "check_compute_operand",
    "check_memory",
    "check_partitions",
    "check_same_shape_pp",
    "convert",
    "data_read",
    "f32",
    "flush_matmul_group",
    "mark_written",
    "read_scalar_index",
    "read_vector_index",
    "record",
    "require_tensor",
    "scalar_or_column",
    "tile",
    "write",
]

ON_CHIP = frozenset({"sbuf", "psum"})
SBUF_ONLY = frozenset({"sbuf"})
HBM = frozenset({"hbm", "shared_hbm", "private_hbm"})
ANY = ON_CHIP | HBM

def _access(role: str, t: NkiTensor) -> Access:
    """The trace record of one operand in one role.

    Records are immutable, so each is built once per distinct view of a storage and role and
    then shared: a loop that touches the same tiles again and again only looks them up.
    """
    accs = t._meta
    if accs is None:
        key = (t._offset, t._shape, t._strides, t._dtype) if t._addr is None else None
        accs = t._a.metas.get(key) if key is not None else None
        if accs is None:
            accs = {}
            if key is not None:
                t._a.metas[key] = accs
        t._meta = accs
    acc = accs.get(role)
    if acc is None:
        # (tuple.__new__ skips the generated NamedTuple constructor: this runs for every fresh view)
        acc = accs[role] = _new_tuple(Access, (role, *(next(iter(accs.values()))[1:] if accs else _facts(t))))
    return acc


_new_tuple = tuple.__new__


#: What an access record says about a view's geometry (all but its role and region), by
#: (memory, shape, strides, dtype): loops touch the same shapes at many offsets.
_GEOMETRY: dict[tuple[Any, ...], tuple[Any, ...]] = {}

#: A direct view's geometry facts and region within its storage (rows and bytes, without the
#: allocation), by where the view lies in a storage of its memory and row size: loops touch the
#: same places of tile after tile, and working out a region costs more than looking it up.
_PLACES: dict[tuple[Any, ...], tuple[tuple[Any, ...], tuple[int, int, int, int]]] = {}


def _facts(t: NkiTensor) -> tuple[Any, ...]:
    """Everything :class:`Access` records about a view except its role."""
    a = t._a
    if t._addr is not None:
        return (*_geometry(t), t.region(), True, _descriptors(t._addr))
    key = (a.memory, a.bytes_pp if a.on_chip else (a.shape[-1] if a.shape else 1) * a.itemsize, t._offset, t._shape, t._strides, t._dtype)
    hit = _PLACES.get(key)
    if hit is None:
        if len(_PLACES) >= 65536:  # bounded: a long-lived process runs kernel after kernel
            _PLACES.clear()
        hit = _PLACES[key] = (_geometry(t), t.region()[1:])
    return (*hit[0], _new_tuple(Region, (a.uid, *hit[1])), False, 0)


def _fresh_facts(t: NkiTensor) -> tuple[Any, ...]:
    """:func:`_facts` computed from scratch: no geometry, place or region cache consulted."""
    return (*_geometry(t, cached=False), t._region(), t._addr is not None, 0 if t._addr is None else _descriptors(t._addr))


def _descriptors(addr: np.ndarray) -> int:
    """DMA descriptors an explicit-address view takes: one per run of consecutive element addresses
    within a row (its first dim). The descriptor generator makes every index of a gather (every
    row) its own descriptor, so rows never coalesce, even where the indices happen to be consecutive."""
    rows = addr.reshape(addr.shape[0] if addr.ndim else 1, -1)
    return rows.shape[0] + int(np.count_nonzero(np.diff(rows, axis=1) != 1))


def _geometry(t: NkiTensor, cached: bool = True) -> tuple[Any, ...]:
    a = t._a
    gkey = (a.memory, t._shape, t._strides, t._dtype)
    geo = _GEOMETRY.get(gkey) if cached else None
    if geo is None:
        shape = t._shape
        size = math.prod(shape)
        parts = (shape[0] if shape else 1) if a.on_chip else 1
        strides = t._strides if t._strides is not None else ()
        geo = (
            a.memory,
            shape,
            dt.dtype_name(t._dtype),
            parts,
            size // max(parts, 1),
            size * t._dtype.itemsize,
            strides,
            bool(strides) and (strides[-1] == 1 or shape[-1] == 1),
        )
        if cached and len(_GEOMETRY) < 65536:  # bounded: a kernel generator cannot grow it without limit
            _GEOMETRY[gkey] = geo
    return geo


def record(
    ctx: KernelContext,
    op: str,
    engine: str,
    reads: Sequence[tuple[str, NkiTensor]],
    writes: Sequence[tuple[str, NkiTensor]],
    *,
    state_reads: tuple[Access, ...] = (),
    state_writes: tuple[Access, ...] = (),
    **attrs: Any,
) -> None:
    """Append one instruction to the caller's trace (if tracing), count it, and mark its outputs written.

    Marking happens here, not in the numeric path, so timing-only runs know outputs were written too.
    Besides its operands the instruction reads what their addresses come from (index tiles and
    registers, ``NkiTensor._ix``), the registers that decided control flow so far (``ctx.control``)
    and ``state_reads``, and writes ``state_writes``: register accesses (``trace.pseudo_access``).
    """
    if ctx.mm_group is not None and op != "nc_matmul":
        flush_matmul_group(ctx)
    hook = ctx.write_hook
    if hook is not None:
        hook(ctx, op, engine, writes)
    seq = ctx.seq
    pid = ctx.program_id
    ix: tuple[Any, ...] = ()
    for role, t in writes:
        a = t._a
        a.written = True
        if a.is_input:
            ctx.input_writes += 1
        rec = a.rec
        if rec is not None:
            if rec.program != pid:
                raise _foreign_tile(op, role, rec, pid)
            if rec.first < 0:
                rec.first = seq
            rec.last = seq
        if t._ix is not None:
            ix += t._ix
    for role, t in reads:
        rec = t._a.rec
        if rec is not None:
            if rec.program != pid:
                raise _foreign_tile(op, role, rec, pid)
            if rec.first < 0:
                rec.first = seq
            rec.last = seq
        if t._ix is not None:
            ix += t._ix
    state = ctx.control + state_reads if ctx.control else state_reads
    if ix:  # what operand addresses come from is read too: the instruction waits for it
        tiles = []
        for item in ix:
            if type(item) is Access:  # a register
                state += (item,)
                continue
            tiles.append(item)
            rec = item[1]._a.rec
            if rec is not None:
                rec.last = seq
        reads = (*reads, *tiles)
    trace = ctx.trace
    if trace is not None:
        trace.append(
            Instruction(
                seq, op, engine, _accesses(reads, ctx.fast) + state if state else _accesses(reads, ctx.fast),
                _accesses(writes, ctx.fast) + state_writes if state_writes else _accesses(writes, ctx.fast), kernel_location(sys._getframe(1)), ctx.program_id,
                ctx.loops_now, attrs
            )
        )
    ctx.seq = seq + 1


def _foreign_tile(op: str, role: str, rec: Any, pid: tuple[int, ...]) -> NkiValidationError:
    """One SPMD program used an SBUF/PSUM tile another allocated: each program runs on its own core's memories."""
    return NkiValidationError(
        "err_tile_of_another_program",
        f"{op} {role}: tile `{rec.name}` was allocated by SPMD program {list(rec.program)} and program {list(pid)} cannot use it: "
        "each program has its own SBUF and PSUM. Allocate the tile in every program (a cached or module-level helper must not "
        "hand one program's tiles to another)",
    )


def _accesses(operands: Sequence[tuple[str, NkiTensor]], fast: bool = True) -> tuple[Access, ...]:
    """The trace records of ``(role, view)`` operands; the records a view already has are looked up here.

    Without the fast paths every record is worked out afresh, from no cache (the reference the
    caches must agree with).
    """
    if not fast:
        return tuple([_new_tuple(Access, (role, *_fresh_facts(t))) for role, t in operands])
    out = []
    for role, t in operands:
        known = t._meta
        acc = known.get(role) if known is not None else None
        out.append(acc if acc is not None else _access(role, t))
    return tuple(out)


def tile(shape: Sequence[int], dtype: Any, buffer: Any = sbuf, name: str = "") -> NkiTensor:
    """Allocate a fresh tile (used by ``nl.*`` functions that return new tensors)."""
    ctx = current()
    alloc = ctx.allocate(tuple(shape), dt.as_dtype(dtype), buffer, name)
    return NkiTensor._whole(alloc)


def require_tensor(op: str, role: str, t: Any) -> NkiTensor:
    if not isinstance(t, NkiTensor):
        raise NkiTypeError("err_expected_tensor", f"{op}: operand '{role}' must be an NKI tensor, got {type(t).__name__}")
    return t


def check_memory(op: str, role: str, t: NkiTensor, allowed: frozenset[str]) -> None:
    """``err_unsupported_memory`` in AWS's wording when ``t`` lives in the wrong memory."""
    mem = t._a.memory
    if mem not in allowed:
        want = "|".join(sorted({"hbm" if m in HBM else m for m in allowed}, reverse=True))
        got = "hbm" if mem in HBM else mem
        raise NkiValidationError(
            "err_unsupported_memory",
            f"Expected operand '{role}' of '{op}' to be in address space '{want}', but got a tile in '{got}' instead.",
        )


def check_partitions(ctx: KernelContext, op: str, role: str, t: NkiTensor, start_rule: bool = True) -> None:
    """Non-empty, partition dim ≤ pmax, and for compute engines (``start_rule``) dim 0 steps partitions and starts legally."""
    if 0 in t._shape:
        raise NkiValidationError("err_empty_access", f"{op} {role}[{', '.join(map(str, t._shape))}] selects no elements")
    if not t._a.on_chip:
        return
    p = t._shape[0] if t._shape else 1
    if p > ctx.target.pmax:
        raise NkiValidationError("err_num_partition_exceed_arch_limit", f"{op} {role} partition dimension {p} exceeds maximum {ctx.target.pmax}")
    if start_rule and t._strides is not None and p > 1:
        row = t._bpp_elems()
        if t._strides[0] != row:
            raise NkiValidationError(
                "err_partition_dim_not_first",
                f"{op} {role}: dimension 0 of the access must step one partition at a time (stride {t._strides[0]} elements, partition size {row})",
            )
    if start_rule and p > 0:
        start = t.partition_start()
        allowed = (0,) if p > 64 else (0, 64) if p > 32 else (0, 32, 64, 96)
        if start not in allowed:
            raise NkiValidationError(
                "err_start_partition",
                f"{op} {role} starts at partition {start}; an access of {p} partitions must start at partition "
                f"{' or '.join(map(str, allowed))}",
            )


def _fmt(t: NkiTensor, role: str) -> str:
    return f"{role}[{', '.join(map(str, t._shape))}]"


def check_same_shape_pp(op: str, named: Sequence[tuple[str, NkiTensor]]) -> None:
    """Same partition count and same elements per partition (no broadcasting)."""
    _, first = named[0]
    shape = first._shape
    for _, t in named:
        if t._shape != shape:
            break
    else:
        return
    p0 = first._shape[0] if first._shape else 1
    for role, t in named[1:]:
        p = t._shape[0] if t._shape else 1
        if p != p0:
            raise NkiValidationError(
                "err_num_partition_mismatch",
                f"number of partitions (dimension 0 size of a tile) mismatch in parameters ({', '.join(_fmt(x, r) for r, x in named)}) of '{op}'",
            )
    e0 = first.size // max(p0, 1)
    for role, t in named[1:]:
        e = t.size // max(t._shape[0] if t._shape else 1, 1)
        if e != e0:
            raise NkiValidationError(
                "err_free_size_mismatch",
                f"number of elements per partition mismatch in parameters ({', '.join(_fmt(x, r) for r, x in named)}) of '{op}': "
                f"{e0} vs {e}; {op} does not broadcast",
            )


class Checked(set):
    """The checks (keys of :func:`check_compute_operand`) one operand geometry passed.

    Each has a serial number that is never reused, so ops can remember checks of operand
    combinations by those numbers (cheap to hash) instead of by the geometries themselves.
    """

    __slots__ = ("serial",)

    def __init__(self) -> None:
        super().__init__()
        self.serial = next(_SERIALS)


_SERIALS = itertools.count()

#: Operand geometries whose passed checks a run remembers (a bound, so a kernel cannot grow it without limit).
CHECKED_GEOMETRIES_MAX = 65536


def check_compute_operand(ctx: KernelContext, op: str, role: str, t: Any, engine: str, allowed: frozenset[str] = ON_CHIP) -> NkiTensor:
    """A compute-engine operand: tensor, on chip, engine may touch its memory, partition rules, free-size cap."""
    key = (engine, allowed, role == "dst")
    ok = t._ok if type(t) is NkiTensor else None
    if ok is not None and key in ok and ctx.fast:
        return t  # (the everyday case, first: a geometry that passed these checks before)
    t = require_tensor(op, role, t)
    ok = t._ok if ctx.fast else None
    if ok is None and t._addr is None and ctx.fast:
        # The checks depend only on the view's geometry within a storage of its memory and row size,
        # not on which storage: loops that allocate a fresh tile per iteration pass them once.
        a = t._a
        geometry = (a.memory, a.bytes_pp, t._offset, t._shape, t._strides, t._dtype)
        checked = ctx.checked
        ok = checked.get(geometry)
        if ok is None:
            ok = Checked()
            if len(checked) < CHECKED_GEOMETRIES_MAX:
                checked[geometry] = ok
        t._ok = ok
    if ok is not None and key in ok:
        return t
    if engine == "gpsimd" or engine == "tensor" and role != "dst":
        allowed = allowed & SBUF_ONLY
    check_memory(op, role, t, allowed)
    check_partitions(ctx, op, role, t)
    if engine in ("vector", "scalar", "gpsimd"):
        epp = t.size // max(t._shape[0] if t._shape else 1, 1)
        cap = 4096 if t._a.memory == "psum" else 65536
        if epp > cap:
            raise NkiValidationError(
                "err_free_size_exceed_arch_limit",
                f"{op} {role} has {epp} elements per partition; {engine} engine instructions allow at most {cap} from {t._a.memory.upper()}",
            )
    if not ctx.fast:
        return t  # the reference path checks every time
    if ok is None:
        ok = t._ok = Checked()
    ok.add(key)
    return t


def f32(t: NkiTensor) -> np.ndarray:
    """The tensor's values as float32 (the Vector/Scalar/GpSimd engines compute in fp32).

    Low-precision SBUF tiles are converted once per version of their storage and then viewed:
    a bf16 operand block read by many matmuls is not re-converted for each of them.
    """
    a = t._a
    if a.convert_once and t._addr is None and t._dtype == a.dtype and a.data is not None:
        c = a.f32c
        if c is None or c[0] != a.version:
            c = (a.version, a.data.astype(np.float32))
            a.f32c = c
        return t._geom(c[1])
    v = t._np()
    d = v.dtype
    return v if d is F32 or d == F32 else v.astype(np.float32)


#: float32's dtype: NumPy hands out this one object for native fp32 arrays, so ``is`` answers first.
F32 = np.dtype(np.float32)


def write(ctx: KernelContext, t: NkiTensor, values: np.ndarray) -> None:
    """Store computed values into ``t`` with its dtype's rounding; updates PSUM/output bookkeeping."""
    t._store(values)
    _written(t)


def mark_written(t: NkiTensor) -> None:
    """The bookkeeping of a store an op made into ``t``'s memory itself (see ``instructions.elementwise._in_place``)."""
    t._a.version += 1
    _written(t)


def _written(t: NkiTensor) -> None:
    a = t._a
    a.written = True
    if a.acc_open is not None:
        a.acc_open.set(t, False)  # a non-matmul write ends the PSUM accumulation group there


def close_psum_group(t: NkiTensor) -> None:
    """A non-matmul read of PSUM ends the accumulation group there: the next matmul overwrites."""
    a = t._a
    if a.acc_open is not None and t._addr is None:
        a.acc_open.set(t, False)


def scalar_or_column(op: str, role: str, value: Any, data: NkiTensor, fp32_only: bool = True) -> np.ndarray | float:
    """A scalar, or a ``(P, 1)`` tile broadcast along the free dims (tensor_scalar / activation operands)."""
    if isinstance(value, NkiTensor):
        p = data._shape[0]
        if value._shape[0] != p or value.size != p:
            raise NkiValidationError(
                "err_operand_not_column",
                f"{op} {role} must be a scalar or a [{p}, 1] vector spanning the partition dimension, got {list(value._shape)}",
            )
        if fp32_only and value._dtype != dt.float32:
            raise NkiValidationError(
                "err_operand_dtype", f"{op} {role} must be float32 (hardware requires fp32 scalar operands), got {dt.dtype_name(value._dtype)}"
            )
        if not current().compute:
            return 0.0
        col = f32(value).reshape((p,) + (1,) * (data.ndim - 1))
        close_psum_group(value)
        return col
    if isinstance(value, (int, float, np.integer, np.floating, bool)):
        return np.float32(value)
    raise NkiTypeError("err_operand_type", f"{op} {role} must be a scalar or a (P, 1) tile, got {type(value).__name__}")


def axis_tuple(op: str, axis: Any) -> tuple[int, ...]:
    """``axis`` (an int, or a tuple / list of ints) as a tuple of ints; anything else is an NkiTypeError."""
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis) if isinstance(axis, (tuple, list)) else None
    if axes is None or not all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in axes):
        raise NkiTypeError("err_reduce_axis", f"{op} axis must be an int or a tuple of ints, got {axis!r}")
    return tuple(int(a) for a in axes)


def data_read(ctx: KernelContext, what: str) -> int:
    """A value a timing-only run cannot know (it has no data): 0, noted with the kernel line that read it."""
    if len(ctx.data_reads) < 20:
        ctx.data_reads.append(f"{what} at {kernel_location()}")
    return 0


def read_scalar_index(value: Any) -> tuple[int, Access | None]:
    """Value of a dynamic scalar offset (an int, a register, or a (1, 1) integer tile) and the read of
    the register it sits in, which the instruction using the offset makes. A tile is loaded into a
    register of its own first (a recorded ``register_load``)."""
    if isinstance(value, (int, np.integer)):
        return int(value), None
    reg_value = getattr(value, "_nki_register_value", None)
    if reg_value is not None:
        return int(reg_value()), value._nki_access("scalar_offset")
    if isinstance(value, NkiTensor):
        if value.size != 1:
            raise NkiValidationError("err_scalar_offset", f"scalar_offset must be a [1, 1] tile, got {list(value._shape)}")
        ctx = current()
        uid = ctx.pseudo_uid()
        record(ctx, "register_load", "sync", [("src", value)], [], state_writes=(pseudo_access("dst", "reg", uid),))
        loaded = int(value._np().reshape(-1)[0]) if ctx.compute else data_read(ctx, "a dynamic offset read from a tile")
        return loaded, pseudo_access("scalar_offset", "reg", uid)
    raise NkiTypeError("err_scalar_offset", f"scalar_offset must be an int, register or [1, 1] tile, got {type(value).__name__}")


def read_vector_index(value: NkiTensor, rows: int) -> np.ndarray:
    """Per-partition indices from a ``(P, 1)`` integer tile in SBUF."""
    if value._a.memory != "sbuf" or not dt.is_int(value._dtype) or value._shape[0] != rows or value.size != rows:
        raise NkiValidationError(
            "err_vector_offset",
            f"vector_offset must be a [{rows}, 1] int32/uint32 tile in SBUF, got {list(value._shape)} {dt.dtype_name(value._dtype)} in {value._a.memory}",
        )
    ctx = current()
    if not ctx.compute:
        data_read(ctx, "vector offsets read from a tile")
        return np.zeros(rows, dtype=np.int64)
    return value._np().reshape(-1).astype(np.int64)


def _copy_engine_op(dst: NkiTensor, src: NkiTensor) -> str:
    hbm_side = src._a.memory in HBM or dst._a.memory in HBM
    return "dma_copy" if hbm_side else "tensor_copy"


def assign(dst: NkiTensor, value: Any) -> None:
    """``dst[...] = value``: a tile is copied (cast to dst's dtype), a number fills."""
    from . import isa

    if isinstance(value, NkiTensor):
        if value.size != dst.size and value._shape[0] == dst._shape[0] and value.size // value._shape[0] == 1:
            value = value.broadcast(1, dst.size // dst._shape[0]) if value.ndim == 2 and dst.ndim == 2 else value
        if _copy_engine_op(dst, value) == "dma_copy":
            isa.dma_copy(dst=dst, src=value)
        else:
            isa.tensor_copy(dst=dst, src=value)
        return
    if isinstance(value, (int, float, np.integer, np.floating, bool)):
        if dst._a.memory in HBM:
            raise NkiValidationError("err_hbm_tensor_with_init_value_not_supported", "Creating HBM tensor with init value is not supported.")
        isa.memset(dst=dst, value=type(value)(value) if not dt.is_int(dst._dtype) else int(value))
        return
    raise NkiTypeError("err_invalid_assignment", f"cannot assign {type(value).__name__} to tensor `{dst.name}`")


def convert(src: NkiTensor, dtype: np.dtype) -> NkiTensor:
    """A new tile with ``src``'s values converted to ``dtype``."""
    out = tile(src._shape, dtype)
    assign(out, src)
    return out


def accumulate_into(dst: NkiTensor, value: Any, op: str) -> None:
    """``dst += value``: PSUM accumulation for matmul results, else an in-place ALU op."""
    from . import isa
    from . import language as nl

    ctx = current()
    ctx.accumulating = True
    try:
        pending = getattr(value, "_nki_pending_matmul", None)
        if pending is not None and op == "add":
            pending(dst)
            return
        fn = getattr(nl, op)
        if isinstance(value, NkiTensor):
            isa.tensor_tensor(dst=dst, data1=dst, data2=value, op=fn)
        else:
            isa.tensor_scalar(dst=dst, data=dst, op0=fn, operand0=value)
    finally:
        ctx.accumulating = False


def check_act_range(func: Any, values: np.ndarray, op: str) -> None:
    """Warn when an activation's input leaves the range its piecewise polynomial is valid on."""
    if func.lo == -np.inf and func.hi == np.inf:
        return
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return
    mag = np.abs(finite) if func.symmetric else finite
    if func.symmetric:
        bad = np.any((mag < func.lo) | (mag > func.hi))
        rng = f"±[{func.lo:g}, {func.hi:g}]"
    else:
        bad = np.any((mag < func.lo) | (mag > func.hi))
        rng = f"[{func.lo:g}, {func.hi:g}]"
    if bad:
        warn(f"{op}: input to {func.name} outside its valid range {rng} (min {finite.min():g}, max {finite.max():g}); hardware output is undefined there")


def not_emulated(name: str, module: str, available: Iterable[str]) -> NkiUnsupportedError:
    from .alu import suggest

    return NkiUnsupportedError(
        "err_not_emulated", f"{module}.{name} is not supported by the nkiagent emulator{suggest(name, available)}", kernel_location()
    )


import nkiagent.emu.tensor as _tensor

from .fast.matmul import MatmulGroup, flush_matmul_group


def _flush_current() -> None:
    flush_matmul_group(current())


_tensor.flush_hook = _flush_current
