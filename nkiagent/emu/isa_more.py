"""Second-tier ``nki.isa`` instructions, with the NKI 0.3+/0.6 destination-first signatures.

Statistics (``bn_stats``, ``bn_aggr``), scans (``tensor_tensor_scan``,
``tensor_scalar_cumulative``), reductions fused with selects (``tensor_scalar_reduce``,
``select_reduce``, ``range_select``), predicated copies, the top-8 family (``max8``,
``nc_find_index8``, ``nc_match_replace8``), cross-partition movement (``nc_stream_shuffle``,
``local_gather``, ``nc_n_gather``), ``dropout``, trn3's ``exponential``, and the virtual
registers behind ``nl.dynamic_range`` and ``.ap(scalar_offset=reg)``.

Every op follows the core pattern of :mod:`nkiagent.emu.isa`: validate operands against the
documented hardware rules, record one instruction, then (unless timing-only) compute with
NumPy in fp32 and store with the destination dtype's rounding. Semantics follow the
docstrings and NumPy references of AWS's ``nki.isa`` (SDK 2.32) and its example tests.

Hidden engine state (emulated, per kernel run and SPMD program):

* **Vector Engine accumulator registers**, shared by ``exponential``, ``range_select``,
  ``select_reduce``, ``tensor_scalar_reduce`` and ``tensor_scalar_cumulative`` and driven by
  ``reduce_cmd``. One fp32 register per lane, where lane ``i`` is the ``i``-th partition of
  the instruction's access. A register starts undefined; ``reset_reduce`` sets it to the
  reduce op's identity (0 for add/subtract, 1 for multiply, -inf for max, +inf for min),
  ``load_reduce`` to the given init value, ``reduce`` continues from its current value (with a
  warning if nothing defined it), and an accumulating op run with ``idle`` leaves it
  undefined, because AWS documents that ``idle`` "may still modify" it. In the trace the
  registers are the pseudo-region ``acc`` (one lane per row): every accumulating op writes it
  and ``reduce`` reads it, so the cost model keeps such a chain in program order.
* **The dropout random generator**: a NumPy generator seeded with 0 at the first ``dropout``
  of each run, so a run is reproducible; it does not model the hardware PRNG's bits.

This module is star-imported at the end of :mod:`nkiagent.emu.isa`: import that module (or
``nki.isa`` after :func:`nkiagent.emu.install`), not this one.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

if "nkiagent.emu.isa" not in sys.modules:
    raise ImportError("import nkiagent.emu.isa (it star-imports isa_more at its end), not nkiagent.emu.isa_more directly")

from . import dtypes as dt  # noqa: E402
from .alu import AluOp, alu_op, op_name  # noqa: E402
from .errors import NkiOutOfBoundsError, NkiRuntimeError, NkiTypeError, NkiUnsupportedError, NkiValidationError, warn  # noqa: E402
from .isa import reduce_cmd  # noqa: E402
from .memory import KernelContext, current  # noqa: E402
from .ops import (  # noqa: E402
    HBM,
    SBUF_ONLY,
    check_compute_operand,
    check_memory,
    check_same_shape_pp,
    close_psum_group,
    data_read,
    f32,
    record,
    require_tensor,
    scalar_or_column,
    write,
)
from .tensor import NkiTensor  # noqa: E402
from .trace import Access, pseudo_access  # noqa: E402

_RC = reduce_cmd  # the enum, for bodies whose ``reduce_cmd`` parameter shadows it

__all__ = [
    "VirtualRegister",
    "bn_stats",
    "bn_aggr",
    "tensor_tensor_scan",
    "tensor_scalar_cumulative",
    "tensor_scalar_reduce",
    "select_reduce",
    "range_select",
    "tensor_copy_predicated",
    "max8",
    "nc_find_index8",
    "nc_match_replace8",
    "nc_stream_shuffle",
    "local_gather",
    "nc_n_gather",
    "dropout",
    "exponential",
    "register_alloc",
    "register_move",
    "register_load",
    "register_store",
]

#: ``on_false_value`` range_select requires (the most negative finite fp32).
FP32_MIN = float(np.finfo(np.float32).min)


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------
def _pp(t: NkiTensor) -> int:
    """Partition count of an on-chip access."""
    return t.shape[0] if t.shape else 1


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


def _require_gen(ctx: KernelContext, op: str, nc_version: int) -> None:
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


# --------------------------------------------------------------------------------------------
# Hidden engine state: Vector Engine accumulators and the dropout generator
# --------------------------------------------------------------------------------------------
_IDENTITY = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}
_DROPOUT_SEED = 0


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


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------
def _group_stats(g: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = g.shape[1]
    if n == 0:
        z = np.zeros(g.shape[0], dtype=np.float32)
        return z, z, z
    mean = g.mean(axis=1, dtype=np.float32)
    m2 = np.square(g - mean[:, None]).sum(axis=1, dtype=np.float32)
    return np.full(g.shape[0], n, dtype=np.float32), mean, m2


def bn_stats(dst: Any, data: Any, name: Any = None) -> None:
    """Per-partition mean/variance statistics of ``data`` on VectorE, for :func:`bn_aggr`.

    ``dst`` gets 6 values per partition, computed in fp32 over the flattened free elements:
    ``(count, mean, variance·count)`` of the even-indexed elements, then the same three for
    the odd-indexed elements (variance·count is the sum of squared deviations). ``data`` may
    hold at most ``nl.tile_size.bn_stats_fmax`` (512) elements per partition; for longer rows
    run one ``bn_stats`` per 512-element tile and aggregate all their outputs in one ``bn_aggr``.
    """
    ctx = current()
    op = "bn_stats"
    data = check_compute_operand(ctx, op, "data", data, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    _same_partitions(op, [("data", data), ("dst", dst)])
    fmax = ctx.target.bn_stats_fmax
    if _epp(data) > fmax:
        raise NkiValidationError(
            "err_bn_stats_free_size",
            f"bn_stats data has {_epp(data)} elements per partition, more than bn_stats_fmax = {fmax} (nl.tile_size.bn_stats_fmax); "
            f"run bn_stats on tiles of at most {fmax} elements and combine their outputs with one bn_aggr",
        )
    if _epp(dst) != 6:
        raise NkiValidationError(
            "err_bn_stats_dst_shape",
            f"bn_stats dst must hold 6 elements per partition (count, mean, var*count for even and odd elements), got {_shape(dst, 'dst')}",
        )
    record(ctx, op, "vector", [("data", data)], [("dst", dst)])
    if not ctx.compute:
        return
    p = _pp(data)
    x = _rows(f32(data), p)
    stats = _group_stats(x[:, 0::2]) + _group_stats(x[:, 1::2])
    close_psum_group(data)
    write(ctx, dst, np.stack(stats, axis=1).reshape(dst.shape))


def bn_aggr(dst: Any, data: Any, name: Any = None) -> None:
    """Combine ``bn_stats`` outputs into ``(mean, variance)`` per partition on VectorE.

    ``data`` holds ``(count, mean, variance·count)`` triples per partition (any number of them,
    e.g. two ``bn_stats`` outputs side by side); ``dst`` gets the pooled mean and the population
    variance of all the elements they describe, computed in fp32.
    """
    ctx = current()
    op = "bn_aggr"
    data = check_compute_operand(ctx, op, "data", data, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    _same_partitions(op, [("data", data), ("dst", dst)])
    if _epp(data) == 0 or _epp(data) % 3:
        raise NkiValidationError(
            "err_bn_aggr_input_size",
            "bn_aggr data must hold a multiple of 3 elements per partition ((count, mean, var*count) triples from bn_stats), "
            f"got {_epp(data)}",
        )
    if _epp(dst) != 2:
        raise NkiValidationError(
            "err_bn_aggr_dst_shape", f"bn_aggr dst must hold 2 elements per partition (mean, variance), got {_shape(dst, 'dst')}"
        )
    record(ctx, op, "vector", [("data", data)], [("dst", dst)])
    if not ctx.compute:
        return
    p = _pp(data)
    s = _rows(f32(data), p).reshape(p, -1, 3)
    n, m, m2 = s[..., 0], s[..., 1], s[..., 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        total = n.sum(axis=1)
        mean = (n * m).sum(axis=1) / total
        var = (m2 + n * np.square(m - mean[:, None])).sum(axis=1) / total
    close_psum_group(data)
    write(ctx, dst, np.stack([mean, var], axis=1).astype(np.float32).reshape(dst.shape))


# --------------------------------------------------------------------------------------------
# Scans and cumulative ops
# --------------------------------------------------------------------------------------------
def tensor_tensor_scan(
    dst: Any, data0: Any, data1: Any, initial: Any, op0: Any, op1: Any, reverse0: bool = False, reverse1: bool = False, name: Any = None
) -> None:
    """Per-partition scan on VectorE over the flattened free elements, in fp32.

    ``r[0] = op1(op0(data0[0], initial), data1[0])`` and ``r[i] = op1(op0(data0[i], r[i-1]), data1[i])``;
    ``reverse0`` swaps the operands of ``op0`` and ``reverse1`` those of ``op1``. ``initial`` is a
    number or a ``(P, 1)`` tile. ``data0`` and ``data1`` must not both be in PSUM.
    """
    ctx = current()
    op = "tensor_tensor_scan"
    a0, a1 = alu_op(op0, op), alu_op(op1, op)
    for k, a in (("op0", a0), ("op1", a1)):
        if a.kind != "arith":
            raise NkiValidationError("err_scan_op", f"{op} {k} must be an arithmetic operator (add, multiply, maximum, …), got {a.name}")
    d0 = check_compute_operand(ctx, op, "data0", data0, "vector")
    d1 = check_compute_operand(ctx, op, "data1", data1, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    if d0._a.memory == "psum" and d1._a.memory == "psum":
        raise NkiValidationError("err_scan_both_psum", f"{op} data0 and data1 cannot both be in PSUM")
    check_same_shape_pp(op, [("data0", d0), ("data1", d1), ("dst", dst)])
    reads = [("data0", d0), ("data1", d1)] + ([("initial", initial)] if isinstance(initial, NkiTensor) else [])
    init = scalar_or_column(op, "initial", initial, d0, fp32_only=False)
    record(ctx, op, "vector", reads, [("dst", dst)], alu=(a0.name, a1.name))
    if not ctx.compute:
        return
    p = _pp(d0)
    x0, x1 = _rows(f32(d0), p), _rows(f32(d1), p)
    out = np.empty_like(x0)
    r = _lane_values(init, p)
    for i in range(x0.shape[1]):
        t = a0.fn(r, x0[:, i]) if reverse0 else a0.fn(x0[:, i], r)
        r = (a1.fn(x1[:, i], t) if reverse1 else a1.fn(t, x1[:, i])).astype(np.float32)
        out[:, i] = r
    close_psum_group(d0)
    close_psum_group(d1)
    write(ctx, dst, out.reshape(dst.shape))


_CUMULATIVE_OPS = ("add", "subtract", "multiply", "maximum", "minimum")
_ACCUMULATE = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum}


def tensor_scalar_cumulative(
    dst: Any, src: Any, op0: Any, op1: Any, imm0: Any, imm1: Any = None, reduce_cmd: Any = reduce_cmd.reset_reduce, name: Any = None
) -> None:
    """Running reduction on VectorE: ``reg = op1(op0(src[i], imm0), reg); dst[i] = reg`` per partition.

    ``op1`` is add, subtract, multiply, maximum or minimum. The running value is the Vector
    Engine accumulator (see the module docstring): ``reset_reduce`` starts from ``op1``'s
    identity, ``load_reduce`` from ``imm1`` and ``reduce`` from where the previous accumulating
    instruction left it. ``imm0``/``imm1`` are numbers or ``(P, 1)`` fp32 tiles; int32/uint32
    tensors are not supported.
    """
    ctx = current()
    op = "tensor_scalar_cumulative"
    a0 = alu_op(op0, op)
    if a0.kind != "arith":
        raise NkiValidationError("err_cumulative_op", f"{op} op0 must be an arithmetic operator, got {a0.name}")
    a1 = _reduce_alu(op, op1, _CUMULATIVE_OPS)
    cmd = _cmd(op, reduce_cmd, (_RC.reset_reduce, _RC.reduce, _RC.load_reduce))
    src = check_compute_operand(ctx, op, "src", src, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    check_same_shape_pp(op, [("src", src), ("dst", dst)])
    for role, t in (("src", src), ("dst", dst)):
        if t.dtype in (dt.int32, dt.uint32):
            raise NkiValidationError(
                "err_cumulative_dtype",
                f"{op} does not support {dt.dtype_name(t.dtype)} {role} (ISA limitation); use a 16-bit integer or float type",
            )
    if cmd == _RC.load_reduce and imm1 is None:
        raise NkiValidationError("err_reduce_init", f"{op} with reduce_cmd=load_reduce needs imm1, the accumulator's initial value")
    c0 = scalar_or_column(op, "imm0", imm0, src)
    c1 = scalar_or_column(op, "imm1", imm1, src) if imm1 is not None else None
    reads = [("src", src)] + [(r, v) for r, v in (("imm0", imm0), ("imm1", imm1)) if isinstance(v, NkiTensor)]
    record(ctx, op, "vector", reads, [("dst", dst)], **_acc_accesses(ctx, cmd, _pp(src)), alu=(a0.name, a1.name), reduce_cmd=cmd.name)
    if not ctx.compute:
        return
    p = _pp(src)
    x = _rows(a0.fn(f32(src), c0).astype(np.float32), p)
    start = _acc_start(ctx, op, cmd, a1.name, c1, p)
    if a1.name in _ACCUMULATE:
        out = _ACCUMULATE[a1.name].accumulate(np.concatenate([start[:, None], x], axis=1), axis=1)[:, 1:]
    else:  # subtract: reg = x - reg is not associative, run it element by element
        out = np.empty_like(x)
        r = start
        for i in range(x.shape[1]):
            r = a1.fn(x[:, i], r)
            out[:, i] = r
    close_psum_group(src)
    write(ctx, dst, out.reshape(dst.shape))
    _acc_end(ctx, out[:, -1] if out.shape[1] else start, p)


# --------------------------------------------------------------------------------------------
# Fused reductions and selects
# --------------------------------------------------------------------------------------------
_UNARY_OP0 = {"abs": np.abs}
_REDUCE_OPS = ("add", "multiply", "maximum", "minimum")


def tensor_scalar_reduce(
    dst: Any,
    data: Any,
    op0: Any,
    operand0: Any,
    reduce_op: Any,
    reduce_res: Any = None,
    reverse0: bool = False,
    reduce_cmd: Any = reduce_cmd.reset_reduce,
    reduce_init: Any = None,
    reduce_res_negate: bool = False,
    name: Any = None,
) -> None:
    """``dst = data op0 operand0`` on VectorE plus a reduction of each row of that result.

    ``reduce_op`` (add, multiply, maximum, minimum) folds all free elements of each partition
    into the Vector Engine accumulator (``reduce_cmd``: ``reset_reduce`` starts from the op's
    identity, ``load_reduce`` from ``reduce_init``, ``reduce`` continues), whose value is written
    to the ``(P, 1)`` tile ``reduce_res`` when given (negated if ``reduce_res_negate``). ``op0``
    is arithmetic, or the unary ``nl.abs`` with ``operand0`` None or 0; ``operand0`` is a number
    or a ``(P, 1)`` fp32 tile. AWS marks ``reverse0`` as not yet supported on hardware; the
    emulator computes ``operand0 op0 data`` for it.
    """
    ctx = current()
    op = "tensor_scalar_reduce"
    name0 = op_name(op0)
    unary = _UNARY_OP0.get(name0)
    a0: AluOp | None = None
    if unary is None:
        a0 = alu_op(op0, op)
        if a0.kind != "arith":
            raise NkiValidationError(
                "err_tensor_scalar_reduce_op", f"{op} op0 must be an arithmetic operator (bitvec ops are not supported), got {a0.name}"
            )
    elif operand0 is not None and (isinstance(operand0, NkiTensor) or operand0 != 0):
        raise NkiValidationError(
            "err_tensor_scalar_reduce_op", f"{op} operand0 must be None or 0 with the unary op0 nl.{name0}, got {operand0!r}"
        )
    alu = _reduce_alu(op, reduce_op, _REDUCE_OPS)
    cmd = _cmd(op, reduce_cmd, (_RC.reset_reduce, _RC.reduce, _RC.load_reduce))
    if cmd == _RC.load_reduce and reduce_init is None:
        raise NkiValidationError("err_reduce_init", f"{op} with reduce_cmd=load_reduce needs reduce_init, the accumulator's initial value")
    if cmd != _RC.load_reduce and reduce_init is not None:
        raise NkiValidationError("err_reduce_init", f"{op} reduce_init is only used with reduce_cmd=load_reduce, not {cmd.name}")
    data = check_compute_operand(ctx, op, "data", data, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    check_same_shape_pp(op, [("data", data), ("dst", dst)])
    p = _pp(data)
    writes = [("dst", dst)]
    if reduce_res is not None:
        writes.append(("reduce_res", _column(ctx, op, "reduce_res", reduce_res, p, "vector")))
    c0 = scalar_or_column(op, "operand0", operand0, data) if unary is None else None
    init = scalar_or_column(op, "reduce_init", reduce_init, data) if reduce_init is not None else None
    reads = [("data", data)] + [(r, v) for r, v in (("operand0", operand0), ("reduce_init", reduce_init)) if isinstance(v, NkiTensor)]
    record(ctx, op, "vector", reads, writes, **_acc_accesses(ctx, cmd, p), alu=(name0, alu.name), reduce_cmd=cmd.name)
    if not ctx.compute:
        return
    x = f32(data)
    if unary is not None:
        y = unary(x)
    else:
        assert a0 is not None
        y = a0.fn(c0, x) if reverse0 else a0.fn(x, c0)
    rows = _rows(y.astype(np.float32), p)
    acc = alu.fn(_acc_start(ctx, op, cmd, alu.name, init, p), alu.reduce(rows, axis=1).astype(np.float32))
    _acc_end(ctx, acc, p)
    close_psum_group(data)
    write(ctx, dst, rows.reshape(dst.shape))
    if reduce_res is not None:
        rr = writes[1][1]
        write(ctx, rr, (-acc if reduce_res_negate else acc).reshape(rr.shape))


_SELECT_PRED_DTYPES = (dt.bool_, dt.int8, dt.uint8, dt.int16, dt.uint16)


def select_reduce(
    dst: Any,
    predicate: Any,
    on_true: Any,
    on_false: Any,
    reduce_res: Any = None,
    reduce_cmd: Any = reduce_cmd.idle,
    reduce_op: Any = None,
    reverse_pred: bool = False,
    name: Any = None,
) -> None:
    """``dst = where(predicate, on_true, on_false)`` on VectorE, with an optional row max.

    ``predicate`` is a (u)int8/(u)int16 tile of ``on_true``'s shape (non-zero = true,
    inverted by ``reverse_pred``); ``on_false`` is a number or a ``(P, 1)`` tile. With
    ``reduce_cmd`` ``reset_reduce`` (or ``reduce``, to continue) the maximum of each row of the
    result goes to the Vector Engine accumulator and, when given, to the ``(P, 1)`` float tile
    ``reduce_res``. ``reduce_op`` can only be ``nl.maximum`` (the default).
    """
    ctx = current()
    op = "select_reduce"
    alu = _reduce_alu(op, reduce_op if reduce_op is not None else "maximum", ("maximum",))
    cmd = _cmd(op, reduce_cmd, (_RC.idle, _RC.reset_reduce, _RC.reduce))
    pred = check_compute_operand(ctx, op, "predicate", predicate, "vector")
    src = check_compute_operand(ctx, op, "on_true", on_true, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    if pred._a.memory == "psum" and src._a.memory == "psum":
        raise NkiValidationError("err_select_both_psum", f"{op} predicate and on_true cannot both be in PSUM")
    check_same_shape_pp(op, [("on_true", src), ("predicate", pred), ("dst", dst)])
    if pred.dtype not in _SELECT_PRED_DTYPES:
        raise NkiValidationError(
            "err_predicate_dtype", f"{op} predicate must be int8, uint8, int16 or uint16, got {dt.dtype_name(pred.dtype)}"
        )
    if src.dtype in (dt.tfloat32, dt.int32, dt.uint32):
        raise NkiValidationError("err_select_dtype", f"{op} on_true cannot be {dt.dtype_name(src.dtype)}")
    p = _pp(src)
    writes = [("dst", dst)]
    if reduce_res is not None:
        _check_reduce_enabled(op, cmd)
        rr = _column(ctx, op, "reduce_res", reduce_res, p, "vector")
        if not dt.is_float(rr.dtype):
            raise NkiValidationError("err_reduce_res_dtype", f"{op} reduce_res must have a float dtype, got {dt.dtype_name(rr.dtype)}")
        writes.append(("reduce_res", rr))
    reads = [("predicate", pred), ("on_true", src)] + ([("on_false", on_false)] if isinstance(on_false, NkiTensor) else [])
    off = scalar_or_column(op, "on_false", on_false, src, fp32_only=False)
    record(ctx, op, "vector", reads, writes, **_acc_accesses(ctx, cmd, p), reduce_cmd=cmd.name, reverse_pred=bool(reverse_pred))
    if not ctx.compute:
        return
    mask = _rows(pred._np(), p) != 0
    if reverse_pred:
        mask = ~mask
    off_rows = off.reshape(p, 1) if isinstance(off, np.ndarray) else off
    res = np.where(mask, _rows(f32(src), p), off_rows).astype(np.float32)
    close_psum_group(pred)
    close_psum_group(src)
    write(ctx, dst, res.reshape(dst.shape))
    if cmd == _RC.idle:
        _acc_end(ctx, None, p)
        return
    acc = alu.fn(_acc_start(ctx, op, cmd, alu.name, None, p), res.max(axis=1))
    _acc_end(ctx, acc, p)
    if reduce_res is not None:
        write(ctx, writes[1][1], acc.reshape(writes[1][1].shape))


_RANGE_CMP = ("equal", "less", "less_equal", "greater", "greater_equal")


def range_select(
    dst: Any,
    on_true_tile: Any,
    comp_op0: Any,
    comp_op1: Any,
    bound0: Any,
    bound1: Any,
    reduce_cmd: Any = reduce_cmd.reset_reduce,
    reduce_res: Any = None,
    reduce_op: Any = None,
    range_start: Any = 0,
    on_false_value: Any = FP32_MIN,
    name: Any = None,
) -> None:
    """Keep elements whose free index lies in a per-partition range, on VectorE (trn2+), with a row max.

    With ``idx = range_start + i`` for free element ``i`` (compared in fp32), element ``i`` of
    partition ``p`` is kept when ``comp_op0(idx, bound0[p]) and comp_op1(idx, bound1[p])``, else
    it becomes ``on_false_value``, which must be FP32_MIN (-3.4028235e38). The maximum of each
    result row goes to the Vector Engine accumulator (``reduce_cmd``) and, when given, to the
    ``(P, 1)`` tile ``reduce_res``. ``bound0``/``bound1`` are ``(P, 1)`` fp32 tiles; the
    comparisons are equal, less, less_equal, greater or greater_equal; ``reduce_op`` can only
    be ``nl.maximum``.
    """
    ctx = current()
    op = "range_select"
    _require_gen(ctx, op, 3)
    alu = _reduce_alu(op, reduce_op if reduce_op is not None else "maximum", ("maximum",))
    cmps = [alu_op(c, op) for c in (comp_op0, comp_op1)]
    for k, c in enumerate(cmps):
        if c.name not in _RANGE_CMP:
            raise NkiValidationError(
                "err_range_select_cmp", f"{op} comp_op{k} must be one of {', '.join('nl.' + n for n in _RANGE_CMP)}, got {c.name}"
            )
    if not isinstance(on_false_value, (int, float, np.integer, np.floating)) or np.float32(on_false_value) != np.float32(FP32_MIN):
        raise NkiValidationError(
            "err_range_select_on_false",
            f"{op} on_false_value must be FP32_MIN (-3.4028235e+38), a hardware constraint; got {on_false_value!r}",
        )
    if not isinstance(range_start, (int, np.integer)):
        raise NkiTypeError("err_range_start", f"{op} range_start must be a compile-time integer, got {type(range_start).__name__}")
    cmd = _cmd(op, reduce_cmd, (_RC.idle, _RC.reset_reduce, _RC.reduce))
    src = check_compute_operand(ctx, op, "on_true_tile", on_true_tile, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    check_same_shape_pp(op, [("on_true_tile", src), ("dst", dst)])
    if not dt.is_float(src.dtype):
        raise NkiValidationError("err_range_select_dtype", f"{op} on_true_tile must have a float dtype, got {dt.dtype_name(src.dtype)}")
    p = _pp(src)
    b0 = _column(ctx, op, "bound0", bound0, p, "vector")
    b1 = _column(ctx, op, "bound1", bound1, p, "vector")
    for role, b in (("bound0", b0), ("bound1", b1)):
        if b.dtype != dt.float32:
            raise NkiValidationError("err_range_select_bound_dtype", f"{op} {role} must be float32, got {dt.dtype_name(b.dtype)}")
    if _epp(src) + int(range_start) > 2**24:
        raise NkiValidationError(
            "err_range_select_index",
            f"{op} range_start + free index reaches {_epp(src) + int(range_start)}, beyond the 2^24 exactly representable in fp32",
        )
    writes = [("dst", dst)]
    if reduce_res is not None:
        _check_reduce_enabled(op, cmd)
        writes.append(("reduce_res", _column(ctx, op, "reduce_res", reduce_res, p, "vector")))
    record(
        ctx,
        op,
        "vector",
        [("on_true_tile", src), ("bound0", b0), ("bound1", b1)],
        writes,
        **_acc_accesses(ctx, cmd, p),
        cmp=(cmps[0].name, cmps[1].name),
        reduce_cmd=cmd.name,
        range_start=int(range_start),
    )
    if not ctx.compute:
        return
    idx = (np.arange(_epp(src), dtype=np.float32) + np.float32(range_start))[None, :]
    lo, hi = f32(b0).reshape(p, 1), f32(b1).reshape(p, 1)
    mask = (cmps[0].fn(idx, lo) != 0) & (cmps[1].fn(idx, hi) != 0)
    res = np.where(mask, _rows(f32(src), p), np.float32(FP32_MIN)).astype(np.float32)
    for t in (src, b0, b1):
        close_psum_group(t)
    write(ctx, dst, res.reshape(dst.shape))
    if cmd == _RC.idle:
        _acc_end(ctx, None, p)
        return
    acc = alu.fn(_acc_start(ctx, op, cmd, alu.name, None, p), res.max(axis=1))
    _acc_end(ctx, acc, p)
    if reduce_res is not None:
        write(ctx, writes[1][1], acc.reshape(writes[1][1].shape))


_COPY_PRED_DTYPES = (dt.bool_, dt.uint8, dt.uint16, dt.uint32)


def tensor_copy_predicated(dst: Any, src: Any, predicate: Any, reverse_pred: bool = False, name: Any = None) -> None:
    """Copy ``src`` into ``dst`` where ``predicate`` is non-zero (zero with ``reverse_pred``), on VectorE.

    Elements where the predicate does not hold keep their old ``dst`` values. ``src`` is a
    tile with ``dst``'s dtype and shape, or a number (0.6) written wherever the predicate holds.
    ``predicate`` is a uint8/uint16/uint32 tile; ``src`` and ``predicate`` may not both be in PSUM.
    """
    ctx = current()
    op = "tensor_copy_predicated"
    pred = check_compute_operand(ctx, op, "predicate", predicate, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    if pred.dtype not in _COPY_PRED_DTYPES:
        raise NkiValidationError("err_predicate_dtype", f"{op} predicate must be uint8, uint16 or uint32, got {dt.dtype_name(pred.dtype)}")
    reads = [("predicate", pred)]
    if isinstance(src, NkiTensor):
        src = check_compute_operand(ctx, op, "src", src, "vector")
        if src._a.memory == "psum" and pred._a.memory == "psum":
            raise NkiValidationError("err_copy_predicated_both_psum", f"{op} src and predicate cannot both be in PSUM")
        check_same_shape_pp(op, [("src", src), ("predicate", pred), ("dst", dst)])
        if src.dtype != dst.dtype:
            raise NkiValidationError(
                "err_copy_predicated_dtype",
                f"{op} src and dst must share a dtype, got {dt.dtype_name(src.dtype)} and {dt.dtype_name(dst.dtype)}",
            )
        reads.append(("src", src))
    elif isinstance(src, (int, float, np.integer, np.floating)) and not isinstance(src, bool):
        check_same_shape_pp(op, [("predicate", pred), ("dst", dst)])
    else:
        raise NkiTypeError("err_operand_type", f"{op} src must be a tile or a number, got {type(src).__name__}")
    record(ctx, op, "vector", reads, [("dst", dst)], reverse_pred=bool(reverse_pred))
    if not ctx.compute:
        return
    p = _pp(dst)
    mask = _rows(pred._np(), p) != 0
    if reverse_pred:
        mask = ~mask
    new = _rows(src._np(), p) if isinstance(src, NkiTensor) else np.float64(src)
    old = _rows(dst._np(), p)
    res = np.where(mask, new, old)
    close_psum_group(pred)
    if isinstance(src, NkiTensor):
        close_psum_group(src)
    write(ctx, dst, res.reshape(dst.shape))


# --------------------------------------------------------------------------------------------
# Top-8 search, find and replace
# --------------------------------------------------------------------------------------------
_TOP8_MIN, _TOP8_MAX = 8, 16384


def _top8_source(op: str, role: str, t: NkiTensor, lower: int) -> None:
    n = _epp(t)
    if not lower <= n <= _TOP8_MAX:
        raise NkiValidationError(
            "err_top8_free_size",
            f"{op} {role} must have between {lower} and {_TOP8_MAX} elements per partition, got {n} ({_shape(t, role)})",
        )


def max8(dst: Any, src: Any, name: Any = None) -> None:
    """The 8 largest values of each partition of ``src``, in descending order, on VectorE.

    ``src`` has 8 to 16 384 elements per partition (its free dims are flattened); ``dst`` is
    ``[P, 8]``. Values are compared in fp32 and converted to ``dst.dtype``.
    """
    ctx = current()
    op = "max8"
    src = check_compute_operand(ctx, op, "src", src, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    _same_partitions(op, [("src", src), ("dst", dst)])
    _top8_source(op, "src", src, _TOP8_MIN)
    if _epp(dst) != 8:
        raise NkiValidationError("err_top8_dst_shape", f"{op} dst must be [P, 8] (8 elements per partition), got {_shape(dst, 'dst')}")
    record(ctx, op, "vector", [("src", src)], [("dst", dst)])
    if not ctx.compute:
        return
    neg = -_rows(f32(src), _pp(src))
    top = -np.sort(np.partition(neg, 7, axis=1)[:, :8], axis=1)
    close_psum_group(src)
    write(ctx, dst, top.reshape(dst.shape))


def _match_positions(x: np.ndarray, vals: np.ndarray, reverse: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per partition, the data position each of the 8 ``vals`` matches, and whether it matched.

    A value occurring several times in ``vals`` takes successive occurrences in ``x``: in
    ``vals`` order (``nc_find_index8``) or in reverse ``vals`` order (``nc_match_replace8``).
    """
    p = x.shape[0]
    pos = np.zeros((p, 8), dtype=np.int64)
    found = np.zeros((p, 8), dtype=bool)
    same = vals[:, :, None] == vals[:, None, :]  # (P, 8, 8)
    order = np.triu(np.ones((8, 8), dtype=bool), 1) if reverse else np.tril(np.ones((8, 8), dtype=bool), -1)
    rank = (same & order[None]).sum(axis=2)  # earlier (or later) equal vals claim earlier occurrences
    for j in range(8):
        hit = x == vals[:, j : j + 1]
        nth = hit & (np.cumsum(hit, axis=1) == rank[:, j : j + 1] + 1)
        found[:, j] = nth.any(axis=1)
        pos[:, j] = nth.argmax(axis=1)
    return pos, found


_INDEX_DTYPES = (dt.uint16, dt.uint32)


def _vals_operand(ctx: KernelContext, op: str, vals: Any, p: int) -> NkiTensor:
    v = check_compute_operand(ctx, op, "vals", vals, "vector")
    if _pp(v) != p or _epp(v) != 8:
        raise NkiValidationError(
            "err_top8_vals_shape", f"{op} vals must hold exactly 8 elements in each of the {p} partitions, got {_shape(v, 'vals')}"
        )
    return v


def nc_find_index8(dst: Any, data: Any, vals: Any, name: Any = None) -> None:
    """Index of the first occurrence of each of the 8 ``vals`` in each partition of ``data`` (VectorE).

    ``data`` has 8 to 16 384 elements per partition (free dims flattened, indices from 0);
    ``vals`` and ``dst`` hold 8 per partition and ``dst`` is uint16 or uint32. A value repeated in
    ``vals`` is paired with successive occurrences in ascending order. A value absent from the
    partition yields the all-ones sentinel (0xFFFFFFFF / 0xFFFF).
    """
    ctx = current()
    op = "nc_find_index8"
    data = check_compute_operand(ctx, op, "data", data, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    p = _pp(data)
    v = _vals_operand(ctx, op, vals, p)
    _same_partitions(op, [("data", data), ("dst", dst)])
    _top8_source(op, "data", data, _TOP8_MIN)
    if _epp(dst) != 8:
        raise NkiValidationError("err_top8_dst_shape", f"{op} dst must be [P, 8] (8 elements per partition), got {_shape(dst, 'dst')}")
    if dst.dtype not in _INDEX_DTYPES:
        raise NkiValidationError("err_index_dtype", f"{op} dst must be uint16 or uint32, got {dt.dtype_name(dst.dtype)}")
    record(ctx, op, "vector", [("data", data), ("vals", v)], [("dst", dst)])
    if not ctx.compute:
        return
    pos, found = _match_positions(_rows(f32(data), p), _rows(f32(v), p), reverse=False)
    idx = np.where(found, pos, np.iinfo(dst.dtype).max)
    close_psum_group(data)
    close_psum_group(v)
    write(ctx, dst, idx.astype(dst.dtype).reshape(dst.shape))


def nc_match_replace8(dst: Any, data: Any, vals: Any, imm: Any, dst_idx: Any = None, name: Any = None) -> None:
    """Replace the first occurrence of each of the 8 ``vals`` in each partition of ``data`` with ``imm`` (VectorE).

    ``dst`` gets ``data`` (same elements per partition, at most 16 384, free dims flattened)
    with the matched positions set to ``imm``; the optional uint16/uint32 ``[P, 8]`` tile
    ``dst_idx`` gets the matched positions. A value repeated in ``vals`` is paired with
    successive occurrences taking ``vals`` in reverse order (AWS's documented tie-break, the
    opposite of ``nc_find_index8``). A value absent from the partition replaces nothing, gets
    the all-ones sentinel in ``dst_idx`` and raises a warning (undefined on hardware).
    ``dst`` may be ``data`` itself.
    """
    ctx = current()
    op = "nc_match_replace8"
    data = check_compute_operand(ctx, op, "data", data, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    p = _pp(data)
    v = _vals_operand(ctx, op, vals, p)
    check_same_shape_pp(op, [("data", data), ("dst", dst)])
    _top8_source(op, "data", data, 1)
    if not isinstance(imm, (int, float, np.integer, np.floating)):
        raise NkiTypeError("err_operand_type", f"{op} imm must be a number, got {type(imm).__name__}")
    writes = [("dst", dst)]
    if dst_idx is not None:
        di = check_compute_operand(ctx, op, "dst_idx", dst_idx, "vector")
        if _pp(di) != p or _epp(di) != 8:
            raise NkiValidationError("err_top8_dst_shape", f"{op} dst_idx must be [{p}, 8], got {_shape(di, 'dst_idx')}")
        if di.dtype not in _INDEX_DTYPES:
            raise NkiValidationError("err_index_dtype", f"{op} dst_idx must be uint16 or uint32, got {dt.dtype_name(di.dtype)}")
        writes.append(("dst_idx", di))
    record(ctx, op, "vector", [("data", data), ("vals", v)], writes)
    if not ctx.compute:
        return
    x = _rows(f32(data), p)
    pos, found = _match_positions(x, _rows(f32(v), p), reverse=True)
    if not found.all():
        where = np.argwhere(~found)[0]
        warn(f"{op}: vals[{where[0]}, {where[1]}] does not occur in data partition {where[0]}; hardware behaviour is undefined")
    out = x.copy()
    rows = np.nonzero(found)[0]
    out[rows, pos[found]] = np.float32(imm)
    close_psum_group(data)
    close_psum_group(v)
    write(ctx, dst, out.reshape(dst.shape))
    if dst_idx is not None:
        di = writes[1][1]
        write(ctx, di, np.where(found, pos, np.iinfo(di.dtype).max).astype(di.dtype).reshape(di.shape))


# --------------------------------------------------------------------------------------------
# Cross-partition movement and gathers
# --------------------------------------------------------------------------------------------
_KEEP = 255


def nc_stream_shuffle(dst: Any, src: Any, shuffle_mask: Any, name: Any = None) -> None:
    """Move whole partitions within 32-partition quadrants on VectorE.

    In every quadrant ``q``, destination partition ``32q + i`` receives source partition
    ``32q + shuffle_mask[i]``; ``shuffle_mask[i] == 255`` leaves it unchanged. The 32-entry mask
    is the same for all quadrants. ``src`` and ``dst`` share a dtype and elements per partition
    and may be the same tile. With ``n`` active partitions (the larger access rounded up to a
    multiple of 32), both accesses must start at partition 0 (n > 64), 0 or 64 (n = 64), or a
    multiple of 32 (n = 32).
    """
    ctx = current()
    op = "nc_stream_shuffle"
    src = check_compute_operand(ctx, op, "src", src, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    mask = list(shuffle_mask) if isinstance(shuffle_mask, (list, tuple)) else None
    if mask is None or len(mask) != 32:
        raise NkiValidationError("err_shuffle_mask", f"{op} shuffle_mask must be a list of 32 partition indices, got {shuffle_mask!r}")
    for i, m in enumerate(mask):
        if not isinstance(m, (int, np.integer)) or not (0 <= int(m) < 32 or int(m) == _KEEP):
            raise NkiValidationError(
                "err_shuffle_mask",
                f"{op} shuffle_mask[{i}] = {m!r} must be a source partition 0..31 within the quadrant, or 255 to keep dst",
            )
    if src.dtype != dst.dtype:
        raise NkiValidationError(
            "err_shuffle_dtype", f"{op} dst must have src's dtype, got {dt.dtype_name(dst.dtype)} and {dt.dtype_name(src.dtype)}"
        )
    if _epp(src) != _epp(dst):
        raise NkiValidationError(
            "err_free_size_mismatch",
            f"{op} dst must have as many elements per partition as src: {_shape(src, 'src')} vs {_shape(dst, 'dst')}",
        )
    src_p, dst_p = _pp(src), _pp(dst)
    active = -(-max(src_p, dst_p) // 32) * 32
    allowed = (0,) if active > 64 else (0, 64) if active == 64 else (0, 32, 64, 96)
    for role, t in (("src", src), ("dst", dst)):
        if t.partition_start() not in allowed:
            raise NkiValidationError(
                "err_start_partition",
                f"{op} {role} starts at partition {t.partition_start()}; with {active} active partitions "
                "the accesses must start at partition "
                f"{' or '.join(map(str, allowed))}",
            )
    pairs: list[tuple[int, int]] = []
    for row in range(dst_p):
        q, i = divmod(row, 32)
        if int(mask[i]) == _KEEP:
            continue
        s = q * 32 + int(mask[i])
        if s >= src_p:
            raise NkiValidationError(
                "err_shuffle_mask",
                f"{op} shuffle_mask[{i}] = {int(mask[i])} makes dst partition {row} read src partition {s}, but src has {src_p} partitions",
            )
        pairs.append((row, s))
    record(ctx, op, "vector", [("src", src)], [("dst", dst)], shuffle_mask=tuple(int(m) for m in mask))
    if not ctx.compute:
        return
    x = _rows(src._np(), src_p).copy()
    out = _rows(dst._np(), dst_p).copy()
    if pairs:
        rows, sources = zip(*pairs, strict=True)
        out[list(rows)] = x[list(sources)]
    close_psum_group(src)
    write(ctx, dst, out.reshape(dst.shape))


_GATHER_ELEMS = (1, 2, 4, 8, 16, 32)
_CORE_PARTITIONS = 16
_CORE_MAX_INDICES = 4096


def local_gather(dst: Any, src_buffer: Any, index: Any, num_elem_per_idx: int = 1, num_valid_indices: Any = None, name: Any = None) -> None:
    """Gather within groups of 16 partitions on GpSimd (one group per GpSimd core).

    Each core flattens its 16-partition slice of the uint16 ``index`` tile partition-first
    (``index[16c:16c+16].flatten(order='F')``) and keeps the first ``num_valid_indices`` entries
    (default: all of them). Every partition ``p`` of that core then gathers, for each index
    ``k``, the ``num_elem_per_idx`` contiguous elements starting at element ``k`` of its own
    (flattened) row of ``src_buffer``: ``dst[p, j, e] = src_buffer[p, idx[j] + e]``, which is
    AWS's NumPy reference. ``src_buffer`` and ``index`` have the same partition count, a
    multiple of 16; ``dst`` has ``src_buffer``'s dtype and partitions and
    ``num_valid_indices * num_elem_per_idx`` elements per partition. All operands are in SBUF.
    Indices that run past the row (undefined on hardware) are an error here.
    """
    ctx = current()
    op = "local_gather"
    src = check_compute_operand(ctx, op, "src_buffer", src_buffer, "gpsimd")
    idx = check_compute_operand(ctx, op, "index", index, "gpsimd")
    dst = check_compute_operand(ctx, op, "dst", dst, "gpsimd")
    p = _pp(src)
    _same_partitions(op, [("src_buffer", src), ("index", idx), ("dst", dst)])
    if p % _CORE_PARTITIONS:
        raise NkiValidationError(
            "err_local_gather_partitions",
            f"{op} src_buffer and index must span a multiple of 16 partitions (one GpSimd core each), got {p}",
        )
    if idx.dtype != dt.uint16:
        raise NkiValidationError("err_index_dtype", f"{op} index must be uint16, got {dt.dtype_name(idx.dtype)}")
    if dst.dtype != src.dtype:
        raise NkiValidationError(
            "err_local_gather_dtype",
            f"{op} does not cast: dst must have src_buffer's dtype {dt.dtype_name(src.dtype)}, got {dt.dtype_name(dst.dtype)}",
        )
    if num_elem_per_idx not in _GATHER_ELEMS:
        raise NkiValidationError(
            "err_local_gather_elems", f"{op} num_elem_per_idx must be one of {list(_GATHER_ELEMS)}, got {num_elem_per_idx!r}"
        )
    per_core = _CORE_PARTITIONS * _epp(idx)
    valid = per_core if num_valid_indices is None else int(num_valid_indices)
    if not 0 < valid <= per_core:
        raise NkiValidationError(
            "err_local_gather_valid",
            f"{op} num_valid_indices must be between 1 and {per_core} (the indices in each 16-partition slice of index), got {valid}",
        )
    if valid > _CORE_MAX_INDICES:
        raise NkiValidationError(
            "err_local_gather_valid", f"{op} gathers {valid} indices per GpSimd core; the maximum is {_CORE_MAX_INDICES}"
        )
    if _epp(dst) != valid * num_elem_per_idx:
        raise NkiValidationError(
            "err_local_gather_dst_shape",
            f"{op} dst must hold num_valid_indices * num_elem_per_idx = {valid * num_elem_per_idx} elements per partition, "
            f"got {_shape(dst, 'dst')}",
        )
    record(
        ctx, op, "gpsimd", [("src_buffer", src), ("index", idx)], [("dst", dst)], num_elem_per_idx=num_elem_per_idx, num_valid_indices=valid
    )
    if not ctx.compute:
        return
    x = _rows(src._np(), p)
    ind = _rows(idx._np(), p).astype(np.int64)
    out = np.empty((p, valid * num_elem_per_idx), dtype=x.dtype)
    span = np.arange(num_elem_per_idx, dtype=np.int64)
    for c in range(p // _CORE_PARTITIONS):
        rows = slice(c * _CORE_PARTITIONS, (c + 1) * _CORE_PARTITIONS)
        flat = ind[rows].flatten(order="F")[:valid]
        cols = (flat[:, None] + span[None, :]).reshape(-1)
        if cols.max() >= x.shape[1]:
            raise NkiOutOfBoundsError(
                "err_local_gather_index",
                f"{op} index {int(flat.max())} of GpSimd core {c} reads elements up to {int(cols.max())}, "
                f"past the {x.shape[1]} elements per partition of src_buffer",
            )
        out[rows] = x[rows][:, cols]
    write(ctx, dst, out.reshape(dst.shape))


def nc_n_gather(dst: Any, data: Any, indices: Any, name: Any = None) -> None:
    """Gather within each partition on GpSimd: ``dst[p, i] = data[p, indices[p, i]]``.

    ``data``'s free dims are flattened for indexing; ``indices`` is a uint32 SBUF tile whose
    free size (and shape) ``dst`` follows; ``dst`` has ``data``'s dtype. All operands are in
    SBUF with the same partition count. Indices outside the row are an error.
    """
    ctx = current()
    op = "nc_n_gather"
    data = check_compute_operand(ctx, op, "data", data, "gpsimd")
    ind = check_compute_operand(ctx, op, "indices", indices, "gpsimd")
    dst = check_compute_operand(ctx, op, "dst", dst, "gpsimd")
    check_same_shape_pp(op, [("indices", ind), ("dst", dst)])
    _same_partitions(op, [("data", data), ("indices", ind), ("dst", dst)])
    if ind.dtype != dt.uint32:
        raise NkiValidationError("err_index_dtype", f"{op} indices must be uint32, got {dt.dtype_name(ind.dtype)}")
    if dst.dtype != data.dtype:
        raise NkiValidationError(
            "err_n_gather_dtype", f"{op} dst must have data's dtype {dt.dtype_name(data.dtype)}, got {dt.dtype_name(dst.dtype)}"
        )
    record(ctx, op, "gpsimd", [("data", data), ("indices", ind)], [("dst", dst)])
    if not ctx.compute:
        return
    p = _pp(data)
    x = _rows(data._np(), p)
    k = _rows(ind._np(), p).astype(np.int64)
    if k.size and k.max() >= x.shape[1]:
        raise NkiOutOfBoundsError(
            "err_n_gather_index", f"{op} index {int(k.max())} is outside [0, {x.shape[1]}), the elements per partition of data"
        )
    write(ctx, dst, np.take_along_axis(x, k, axis=1).reshape(dst.shape))


# --------------------------------------------------------------------------------------------
# Random and trn3 ops
# --------------------------------------------------------------------------------------------
def dropout(dst: Any, data: Any, prob: Any, name: Any = None) -> None:
    """Zero each element of ``data`` with probability ``prob`` on VectorE; kept values are not rescaled.

    ``prob`` is a number in [0, 1] or a ``(P, 1)`` tile of per-partition probabilities (fp32
    when ``data`` is an integer type). ``dst.dtype`` must equal ``data.dtype``. Draws come from
    the run's NumPy generator (seed 0 at the run's first dropout), so results are reproducible
    but not the hardware's random bits.
    """
    ctx = current()
    op = "dropout"
    data = check_compute_operand(ctx, op, "data", data, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    check_same_shape_pp(op, [("data", data), ("dst", dst)])
    if dst.dtype != data.dtype:
        raise NkiValidationError(
            "err_dropout_dtype", f"{op} dst.dtype must equal data.dtype, got {dt.dtype_name(dst.dtype)} and {dt.dtype_name(data.dtype)}"
        )
    reads = [("data", data)]
    if isinstance(prob, NkiTensor):
        if dt.is_int(data.dtype) and prob.dtype != dt.float32:
            raise NkiValidationError(
                "err_dropout_prob_dtype",
                f"{op} prob must be float32 when data is {dt.dtype_name(data.dtype)}, got {dt.dtype_name(prob.dtype)}",
            )
        if not dt.is_float(prob.dtype):
            raise NkiValidationError("err_dropout_prob_dtype", f"{op} prob must have a float dtype, got {dt.dtype_name(prob.dtype)}")
        reads.append(("prob", check_compute_operand(ctx, op, "prob", prob, "vector")))
    elif isinstance(prob, (int, float, np.integer, np.floating)) and not 0.0 <= float(prob) <= 1.0:
        raise NkiValidationError("err_dropout_prob", f"{op} prob must be a probability in [0, 1], got {prob!r}")
    rate = scalar_or_column(op, "prob", prob, data, fp32_only=False)
    record(ctx, op, "vector", reads, [("dst", dst)])
    if not ctx.compute:
        return
    st = _state(ctx)
    if st.rng is None:
        st.rng = np.random.default_rng(_DROPOUT_SEED)
    p = _pp(data)
    x = _rows(data._np(), p)
    keep = st.rng.random(x.shape, dtype=np.float32) >= np.asarray(rate, dtype=np.float32).reshape(-1, 1)
    close_psum_group(data)
    write(ctx, dst, np.where(keep, x, np.zeros((), dtype=x.dtype)).reshape(dst.shape))


_EXP_REDUCE_DTYPES = (dt.float8_e4m3, dt.float8_e5m2, dt.float16, dt.bfloat16, dt.float32, dt.tfloat32)


def exponential(
    dst: Any,
    src: Any,
    max_value: Any = 0.0,
    reduce_res: Any = None,
    reduce_cmd: Any = reduce_cmd.idle,
    reduce_init: Any = 0.0,
    name: Any = None,
) -> None:
    """``dst = exp(src - max_value)`` on VectorE (trn3 only), optionally summing each row.

    ``max_value`` is a number or a ``(P, 1)`` fp32 tile. With ``reduce_cmd`` ``reset_reduce``,
    ``reduce`` or ``load_reduce`` (starting from ``reduce_init``) the row sums of the fp32 results
    go to the Vector Engine accumulator and, when given, to the ``(P, 1)`` float tile
    ``reduce_res``. ``src``/``dst`` have the same shape per partition and at most 4 dims.
    """
    ctx = current()
    op = "exponential"
    _require_gen(ctx, op, 4)
    cmd = _cmd(op, reduce_cmd, (_RC.idle, _RC.reset_reduce, _RC.reduce, _RC.load_reduce))
    src = check_compute_operand(ctx, op, "src", src, "vector")
    dst = check_compute_operand(ctx, op, "dst", dst, "vector")
    check_same_shape_pp(op, [("src", src), ("dst", dst)])
    for role, t in (("src", src), ("dst", dst)):
        if t.ndim > 4:
            raise NkiValidationError("err_exceed_max_supported_dimension", f"{op} {role} has {t.ndim} dimensions; at most 4 are supported")
    if cmd != _RC.load_reduce and (isinstance(reduce_init, NkiTensor) or float(reduce_init) != 0.0):
        raise NkiValidationError(
            "err_reduce_init", f"{op} reduce_init must be unset or 0.0 unless reduce_cmd is load_reduce (got reduce_cmd={cmd.name})"
        )
    p = _pp(src)
    writes = [("dst", dst)]
    if reduce_res is not None:
        _check_reduce_enabled(op, cmd)
        rr = _column(ctx, op, "reduce_res", reduce_res, p, "vector")
        if rr.dtype not in _EXP_REDUCE_DTYPES:
            raise NkiValidationError("err_reduce_res_dtype", f"{op} reduce_res must have a float dtype, got {dt.dtype_name(rr.dtype)}")
        writes.append(("reduce_res", rr))
    m = scalar_or_column(op, "max_value", max_value, src)
    init = scalar_or_column(op, "reduce_init", reduce_init, src)
    reads = [("src", src)] + [(r, v) for r, v in (("max_value", max_value), ("reduce_init", reduce_init)) if isinstance(v, NkiTensor)]
    record(ctx, op, "vector", reads, writes, **_acc_accesses(ctx, cmd, p), reduce_cmd=cmd.name)
    if not ctx.compute:
        return
    with np.errstate(over="ignore"):
        rows = _rows(np.exp(f32(src) - m).astype(np.float32), p)
    close_psum_group(src)
    write(ctx, dst, rows.reshape(dst.shape))
    if cmd == _RC.idle:
        _acc_end(ctx, None, p)
        return
    acc = _acc_start(ctx, op, cmd, "add", init, p) + rows.sum(axis=1, dtype=np.float32)
    _acc_end(ctx, acc, p)
    if reduce_res is not None:
        write(ctx, writes[1][1], acc.reshape(writes[1][1].shape))


# --------------------------------------------------------------------------------------------
# Virtual registers
# --------------------------------------------------------------------------------------------
_REG_MIN, _REG_MAX = -(2**31), 2**32 - 1


def _reg_int(op: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise NkiTypeError("err_register_value", f"{op} value must be an int or a VirtualRegister, got {type(value).__name__}")
    v = int(value)
    if not _REG_MIN <= v <= _REG_MAX:
        raise NkiValidationError("err_register_value", f"{op} value {v} does not fit a 32-bit register")
    return v


class VirtualRegister:
    """An engine-sequencer register (``nisa.register_alloc``) holding a 32-bit integer.

    Kernels use it as a dynamic loop bound (``nl.dynamic_range(reg)``), a ``while reg:``
    condition, or a dynamic address (``t.ap(pattern, scalar_offset=reg)``). Reading a register
    that was never given a value is an error.

    In the trace it is the pseudo-region ``reg`` ``uid`` (``trace.pseudo_access``): the ops that
    set it write it, the DMAs it places read it, and once its value has steered control flow
    (``int(reg)``, ``bool(reg)``: a loop bound, a ``while`` test) every later instruction reads it,
    as an engine runs past that branch only when the register's value is known.
    """

    __slots__ = ("_uid", "_value")

    def __init__(self, uid: int, value: int | None = None) -> None:
        self._uid = uid
        self._value = value

    def _nki_register_value(self) -> int:
        """The register's value (read by ``ops.read_scalar_index`` and the register ops, which record the read)."""
        if self._value is None:
            raise NkiRuntimeError(
                "err_register_uninitialized",
                "virtual register read before it held a value: initialize it with register_alloc(x), register_move or register_load",
            )
        return self._value

    def _nki_access(self, role: str) -> Access:
        return pseudo_access(role, "reg", self._uid)

    def _steer(self) -> int:
        """The value, read to decide control flow: from here on every instruction depends on it."""
        value = self._nki_register_value()
        ctx = current()
        if all(a.region.alloc != self._uid for a in ctx.control):
            ctx.control += (self._nki_access("control"),)
        return value

    def __int__(self) -> int:
        return self._steer()

    __index__ = __int__

    def __bool__(self) -> bool:
        return self._steer() != 0

    def __repr__(self) -> str:
        return f"VirtualRegister({'uninitialized' if self._value is None else self._value})"


def _register(op: str, role: str, reg: Any) -> VirtualRegister:
    if not isinstance(reg, VirtualRegister):
        raise NkiTypeError(
            "err_expected_register",
            f"{op}: operand '{role}' must be a VirtualRegister from nisa.register_alloc(), got {type(reg).__name__}",
        )
    return reg


def _scalar_tensor(op: str, role: str, t: Any) -> NkiTensor:
    """A one-element integer tensor in HBM or SBUF (what registers load from and store to)."""
    t = require_tensor(op, role, t)
    check_memory(op, role, t, SBUF_ONLY | HBM)
    if t.size != 1:
        raise NkiValidationError(
            "err_register_tensor_shape", f"{op} {role} must hold exactly one element (shape [1] or [1, 1]), got {list(t.shape)}"
        )
    if not dt.is_int(t.dtype) or t.dtype == dt.bool_:
        raise NkiValidationError(
            "err_register_tensor_dtype", f"{op} {role} must be a 32-bit or narrower integer tensor, got {dt.dtype_name(t.dtype)}"
        )
    return t


def register_alloc(x: int | None = None) -> VirtualRegister:
    """Allocate a virtual register, optionally initialized with the integer ``x``."""
    ctx = current()
    init = None if x is None else _reg_int("register_alloc", x)
    reg = VirtualRegister(ctx.pseudo_uid(), init)
    record(ctx, "register_alloc", "sync", [], [], state_writes=() if init is None else (reg._nki_access("dst"),), value=init)
    return reg


def register_move(dst: Any, src: Any) -> None:
    """Set register ``dst`` to the integer ``src`` or to the value of register ``src``."""
    ctx = current()
    op = "register_move"
    reg = _register(op, "dst", dst)
    moved = _register(op, "src", src) if isinstance(src, VirtualRegister) else None
    value = moved._nki_register_value() if moved is not None else _reg_int(op, src)
    record(ctx, op, "sync", [], [], state_reads=() if moved is None else (moved._nki_access("src"),), state_writes=(reg._nki_access("dst"),))
    reg._value = value


def register_load(dst: Any, src: Any) -> None:
    """Load the single integer in ``src`` (an HBM or SBUF tensor of one element) into register ``dst``.

    In timing-only runs there are no values, so the register reads 0 and the run is marked as
    not faithful (its control flow may not be the kernel's).
    """
    ctx = current()
    op = "register_load"
    reg = _register(op, "dst", dst)
    t = _scalar_tensor(op, "src", src)
    record(ctx, op, "sync", [("src", t)], [], state_writes=(reg._nki_access("dst"),))
    reg._value = int(t._np().reshape(-1)[0]) if ctx.compute else data_read(ctx, "a register loaded from a tensor")


def register_store(dst: Any, src: Any) -> None:
    """Store the value of register ``src`` into ``dst``, an integer HBM or SBUF tensor of one element."""
    ctx = current()
    op = "register_store"
    t = _scalar_tensor(op, "dst", dst)
    reg = _register(op, "src", src)
    value = reg._nki_register_value()
    record(ctx, op, "sync", [], [("dst", t)], state_reads=(reg._nki_access("src"),))
    if ctx.compute:
        write(ctx, t, np.asarray(value, dtype=np.int64))
