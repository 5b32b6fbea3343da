"""Shared machinery of the op families: the ``nisa`` enums, tile-shape helpers and the Vector Engine's hidden state."""

from __future__ import annotations

import enum
import math
import weakref
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from .. import dtypes as dt
from .. import engines as _engines
from ..alu import AluOp, alu_op
from ..errors import NkiTypeError, NkiUnsupportedError, NkiValidationError, warn
from ..memory import KernelContext, current
from ..ops import (
    check_compute_operand,
    f32,
)
from ..registry import REGISTRY
from ..tensor import NkiTensor
from ..trace import Access, pseudo_access


class engine(enum.IntEnum):
    """Compute engines (``nisa.engine``)."""

    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


class reduce_cmd(enum.IntEnum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(enum.IntEnum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


_HWDGE = int(dge_mode.hwdge)


class oob_mode(enum.IntEnum):
    error = 0
    skip = 1


class nc_version(enum.IntEnum):
    gen2 = 2
    gen3 = 3
    gen4 = 4


class matmul_perf_mode(enum.Enum):
    none = "none"
    double_row = "double_row"


class dma_engine(enum.IntEnum):
    dma = 1
    gpsimd_dma = 2


_engines._UNKNOWN = engine.unknown


def _pf(a: np.ndarray, p: int) -> np.ndarray:
    """Reshape to (partitions, elements-per-partition)."""
    shape = a.shape
    return a if len(shape) == 2 and shape[0] == p else a.reshape(p, -1)


def _p(t: NkiTensor) -> int:
    shape = t._shape
    return shape[0] if shape else 1


def get_nc_version() -> nc_version:
    """The NeuronCore generation of the current target (gen2 = trn1, gen3 = trn2, gen4 = trn3)."""
    return nc_version(current().target.nc_version)


def _affine_values(op: str, dst: NkiTensor, pattern: Any, offset: Any, channel_multiplier: Any) -> np.ndarray:
    pat = [(int(s), int(n)) for s, n in pattern]
    if not 1 <= len(pat) <= 4:
        raise NkiValidationError("err_pattern_rank", f"{op} pattern must have 1 to 4 [step, num] pairs, got {len(pat)}")
    epp = dst.size // max(_p(dst), 1)
    if math.prod(n for _, n in pat) != epp:
        raise NkiValidationError(
            "err_pattern_size",
            f"{op} pattern {[list(x) for x in pat]} covers {math.prod(n for _, n in pat)} elements per partition but dst has {epp}",
        )
    vals = np.full((_p(dst),) + tuple(n for _, n in pat), int(offset), dtype=np.int64)
    vals += (np.arange(_p(dst), dtype=np.int64) * int(channel_multiplier)).reshape((-1,) + (1,) * len(pat))
    for k, (s, n) in enumerate(pat):
        shp = [1] * (len(pat) + 1)
        shp[k + 1] = n
        vals += (np.arange(n, dtype=np.int64) * s).reshape(shp)
    return vals


def _values(t: NkiTensor, alu_kind: str) -> np.ndarray:
    """An ALU input: int64 for bitwise ops, else fp32. Where no store has written any of the
    view's elements since a whole-tile memset (or ever), that fill broadcast to its shape: an
    accumulator zeroed and then added into is read without being zeroed in memory first."""
    if alu_kind == "bitvec":
        if not dt.is_int(t.dtype):
            raise NkiTypeError("err_bitvec_dtype", f"bitwise operations need integer tensors, `{t.name}` is {dt.dtype_name(t.dtype)}")
        return t._np().astype(np.int64)
    a = t._a
    if a.fresh and t._addr is None and t._dtype == a.dtype and current().fast:
        value = a.unwritten(t._offset, t._shape, cast(tuple[int, ...], t._strides))  # (a direct view: it has strides)
        if value is not None:
            return np.broadcast_to(np.float32(value), t._shape)
    return f32(t)


def _apply(alu: Any, a: np.ndarray, b: Any, reverse: bool = False) -> np.ndarray:
    return alu.fn(b, a) if reverse else alu.fn(a, b)


_RC = reduce_cmd  # the enum, for bodies whose ``reduce_cmd`` parameter shadows it


_pp = _p  # (the name the second-tier ops were written with)


def _epp(t: NkiTensor) -> int:
    """Elements per partition."""
    return t.size // max(_pp(t), 1)


def _rows(values: np.ndarray, p: int) -> np.ndarray:
    """Reshape to (partitions, elements-per-partition)."""
    return values.reshape(p, -1)


def _shape(t: NkiTensor, role: str) -> str:
    return f"{role}[{', '.join(map(str, t.shape))}]"


def _same_partitions(op: str, named: Sequence[tuple[str, NkiTensor]]) -> None:
    """Same partition count across operands (free sizes may differ), in AWS's wording."""
    p0 = _pp(named[0][1])
    if any(_pp(t) != p0 for _, t in named[1:]):
        raise NkiValidationError(
            "err_num_partition_mismatch",
            "number of partitions (dimension 0 size of a tile) mismatch in parameters "
            f"({', '.join(_shape(t, r) for r, t in named)}) of '{op}'",
        )


def _column(ctx: KernelContext, op: str, role: str, t: Any, p: int, engine: str) -> NkiTensor:
    """A ``(P, 1)`` tile operand such as ``reduce_res``: one element per partition."""
    t = check_compute_operand(ctx, op, role, t, engine)
    if _pp(t) != p or t.size != p:
        raise NkiValidationError(
            "err_operand_not_column", f"{op} {role} must be a [{p}, 1] tile (one element per partition), got {list(t.shape)}"
        )
    return t


def _require_gen(ctx: KernelContext, op: str) -> None:
    """Refuse ``op`` on a target older than the first generation its declaration names (``nc_version=``)."""
    nc_version = REGISTRY[op].nc_version
    if ctx.target.nc_version < nc_version:
        names = {3: "trn2 (NeuronCore-v3)", 4: "trn3 (NeuronCore-v4)"}
        raise NkiUnsupportedError(
            "err_isa_unsupported_target",
            f"{op} is only available on {names[nc_version]} and newer; the current target is {ctx.target.name}",
        )


def _cmd(op: str, value: Any, allowed: Sequence[reduce_cmd]) -> reduce_cmd:
    """Validate a ``reduce_cmd`` argument (an ``nisa.reduce_cmd`` member; raw ints only in 0.1 kernels)."""
    if isinstance(value, reduce_cmd):
        cmd = value
    elif isinstance(value, (int, np.integer)) and current().api == "0.1" and int(value) in {c.value for c in reduce_cmd}:
        cmd = reduce_cmd(int(value))
    else:
        raise NkiTypeError("err_enum_int_literal", f"{op} reduce_cmd must be an nisa.reduce_cmd member, got {value!r}")
    if cmd not in allowed:
        raise NkiValidationError(
            "err_reduce_cmd", f"{op} does not support reduce_cmd={cmd.name}; use one of {', '.join(c.name for c in allowed)}"
        )
    return cmd


def _check_reduce_enabled(op: str, cmd: reduce_cmd) -> None:
    """``reduce_res`` is only written by an instruction that accumulates (``reduce_cmd`` not ``idle``)."""
    if cmd == _RC.idle:
        raise NkiValidationError(
            "err_reduce_cmd",
            f"{op} reduce_res is given but reduce_cmd is idle, which performs no reduction; pass reduce_cmd=nisa.reduce_cmd.reset_reduce",
        )


def _reduce_alu(op: str, reduce_op: Any, allowed: Sequence[str]) -> AluOp:
    alu = alu_op(reduce_op, op)
    if alu.name not in allowed:
        raise NkiValidationError("err_reduce_op", f"{op} reduce_op must be {' or '.join('nl.' + a for a in allowed)}, got {alu.name}")
    return alu


def _lane_values(value: Any, p: int) -> np.ndarray:
    """A scalar or ``(P, 1)`` column from :func:`scalar_or_column` as one value per lane."""
    return np.broadcast_to(np.asarray(value, dtype=np.float32).reshape(-1), (p,)).astype(np.float32)


_IDENTITY = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}


class _EngineState:
    """Per-run state the hardware keeps inside engines (see the module docstring)."""

    __slots__ = ("acc", "acc_uid", "defined", "rng")

    def __init__(self) -> None:
        self.acc: dict[tuple[int, ...], np.ndarray] = {}
        self.defined: dict[tuple[int, ...], np.ndarray] = {}
        self.acc_uid: dict[tuple[int, ...], int] = {}  #: the accumulators' pseudo-region in the trace, per SPMD program
        self.rng: np.random.Generator | None = None


_STATE: weakref.WeakKeyDictionary[KernelContext, _EngineState] = weakref.WeakKeyDictionary()


def _state(ctx: KernelContext) -> _EngineState:
    st = _STATE.get(ctx)
    if st is None:
        st = _STATE[ctx] = _EngineState()
    return st


def _registers(ctx: KernelContext) -> tuple[np.ndarray, np.ndarray]:
    st = _state(ctx)
    pid = ctx.program_id
    if pid not in st.acc:
        st.acc[pid] = np.full(ctx.target.pmax, np.nan, dtype=np.float32)
        st.defined[pid] = np.zeros(ctx.target.pmax, dtype=bool)
    return st.acc[pid], st.defined[pid]


def _acc_accesses(ctx: KernelContext, cmd: reduce_cmd, p: int) -> dict[str, tuple[Access, ...]]:
    """The accumulator accesses of an accumulating instruction over ``p`` lanes, as ``record`` keywords.

    Every such instruction writes the accumulators (``idle`` too: it may modify them), and one that
    continues them (``reduce``) reads them first: the accumulators are the pseudo-region ``acc``,
    so the timeline runs a chain of them in program order even when later data lands first.
    """
    st = _state(ctx)
    uid = st.acc_uid.get(ctx.program_id)
    if uid is None:
        uid = st.acc_uid[ctx.program_id] = ctx.pseudo_uid()
    acc = pseudo_access("acc", "acc", uid, p)
    return {"state_reads": (acc,) if cmd == _RC.reduce else (), "state_writes": (acc,)}


def _acc_start(ctx: KernelContext, op: str, cmd: reduce_cmd, reduce_name: str, init: Any, p: int) -> np.ndarray:
    """The value each lane's accumulator holds when an accumulating instruction starts."""
    acc, defined = _registers(ctx)
    if cmd == _RC.reset_reduce:
        return np.full(p, _IDENTITY[reduce_name], dtype=np.float32)
    if cmd == _RC.load_reduce:
        return _lane_values(init, p)
    if not defined[:p].all():
        warn(
            f"{op}: reduce_cmd=reduce continues Vector Engine accumulators that no earlier instruction reset or loaded; "
            "their starting value is undefined on hardware (use reset_reduce or load_reduce first)"
        )
    return acc[:p].copy()


def _acc_end(ctx: KernelContext, values: np.ndarray | None, p: int) -> None:
    """Store the accumulators after an instruction; ``None`` marks them undefined (``idle``)."""
    acc, defined = _registers(ctx)
    if values is None:
        acc[:p] = np.nan
        defined[:p] = False
    else:
        acc[:p] = values
        defined[:p] = True


_INDEX_DTYPES = (dt.uint16, dt.uint32)
