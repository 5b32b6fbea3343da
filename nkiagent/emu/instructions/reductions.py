"""Reductions and scans: along the free dims, across partitions, and running ones on the Vector Engine accumulators."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import dtypes as dt
from ..alu import AluOp, alu_op, op_name
from ..errors import NkiValidationError
from ..memory import current
from ..ops import (
    axis_tuple,
    check_compute_operand,
    check_same_shape_pp,
    close_psum_group,
    f32,
    record,
    scalar_or_column,
    write,
)
from ..registry import ISA_INDEX, AccumulatorAttrs, AluAttrs, AluPairAttrs, instruction, page
from ..tensor import NkiTensor
from .common import (
    _RC,
    _acc_accesses,
    _acc_end,
    _acc_start,
    _cmd,
    _column,
    _lane_values,
    _p,
    _pf,
    _pp,
    _reduce_alu,
    _rows,
    _values,
    reduce_cmd,
)


def _norm_axes(opn: str, data: NkiTensor, axis: Any) -> tuple[int, ...]:
    axes = axis_tuple(opn, axis)
    nd = data.ndim
    axes = tuple(sorted(int(a) + nd if int(a) < 0 else int(a) for a in axes))
    if not axes or any(a <= 0 or a >= nd for a in axes):
        raise NkiValidationError(
            "err_reduce_axis",
            f"{opn} axis {axis} must name free dimensions 1..{nd - 1} of data{list(data.shape)}; the partition dim 0 cannot be reduced",
        )
    if axes != tuple(range(nd - len(axes), nd)):
        raise NkiValidationError(
            "err_reduce_axis",
            f"{opn} axis {axis} must be the last contiguous dimensions of data{list(data.shape)}, e.g. ({nd - 1},) or {tuple(range(1, nd))}",
        )
    return axes


@instruction(
    family="reductions and scans",
    engines="vector",
    source=ISA_INDEX,
    attrs=AluAttrs,
    rules=(
        "axis names the last contiguous free dims (never the partition dim 0)",
        "dst holds the kept elements over data's partitions; op is a reduction ALU op",
    ),
    example="nisa.tensor_reduce(dst=row_max, op=nl.maximum, data=s, axis=1)",
)
def tensor_reduce(dst: Any, op: Any, data: Any, axis: Any, negate: bool = False, keepdims: bool = False, name: Any = None) -> None:
    """Reduce ``data`` along its last free axes with ``op`` (add, maximum, minimum, multiply, bitwise…)."""
    ctx = current()
    opn = "tensor_reduce"
    alu = alu_op(op, opn)
    if alu.reduce is None:
        raise NkiValidationError(
            "err_reduce_op", f"{alu.name} is not a legal reduction op; use add, multiply, maximum, minimum or a bitwise/logical op"
        )
    data = check_compute_operand(ctx, opn, "data", data, "vector")
    dst = check_compute_operand(ctx, opn, "dst", dst, "vector")
    axes = _norm_axes(opn, data, axis)
    kept = math.prod(n for k, n in enumerate(data.shape) if k not in axes)
    if _p(dst) != _p(data) or dst.size != kept:
        raise NkiValidationError(
            "err_reduce_dst_shape",
            f"tensor_reduce dst{list(dst.shape)} must hold {kept} elements over {_p(data)} partitions for data{list(data.shape)} reduced over {axes}",
        )
    record(ctx, opn, "vector", [("data", data)], [("dst", dst)], alu=alu.name, axes=axes)
    if not ctx.compute:
        return
    r = alu.reduce(_values(data, alu.kind), axis=axes)
    if negate:
        r = -r
    close_psum_group(data)
    write(ctx, dst, np.asarray(r).reshape(dst.shape))


@instruction(
    family="reductions and scans",
    engines="gpsimd",
    source=ISA_INDEX,
    attrs=AluAttrs,
    rules=("dst holds data's elements per partition; op is a reduction ALU op",),
    example="nisa.tensor_partition_reduce(dst=col_sum, op=nl.add, data=x)",
)
def tensor_partition_reduce(dst: Any, op: Any, data: Any, name: Any = None) -> None:
    """Reduce across partitions: ``dst[0, f] = op over p of data[p, f]`` (GpSimd)."""
    ctx = current()
    opn = "tensor_partition_reduce"
    alu = alu_op(op, opn)
    if alu.reduce is None:
        raise NkiValidationError("err_reduce_op", f"{alu.name} is not a legal reduction op")
    data = check_compute_operand(ctx, opn, "data", data, "gpsimd")
    dst = check_compute_operand(ctx, opn, "dst", dst, "gpsimd")
    epp = data.size // _p(data)
    if dst.size != epp:
        raise NkiValidationError("err_reduce_dst_shape", f"tensor_partition_reduce dst{list(dst.shape)} must hold {epp} elements")
    record(ctx, opn, "gpsimd", [("data", data)], [("dst", dst)], alu=alu.name)
    if ctx.compute:
        write(ctx, dst, np.asarray(alu.reduce(_pf(_values(data, alu.kind), _p(data)), axis=0)).reshape(dst.shape))


@instruction(
    family="reductions and scans",
    engines="vector",
    source=ISA_INDEX,
    attrs=AluPairAttrs,
    rules=("data0, data1 and dst share a shape; data0 and data1 cannot both be in PSUM; initial is a scalar or [P, 1]",),
    example="nisa.tensor_tensor_scan(dst=h, data0=decay, data1=x, initial=0.0, op0=nl.multiply, op1=nl.add)",
)
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


@instruction(
    family="reductions and scans",
    engines="vector",
    source=page("tensor_scalar_cumulative"),
    attrs=AccumulatorAttrs,
    rules=("op1 is add, subtract, multiply, maximum or minimum; load_reduce needs imm1 as the initial value",),
    example="nisa.tensor_scalar_cumulative(dst=c, src=x, op0=nl.multiply, op1=nl.add, imm0=1.0)",
)
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


_UNARY_OP0 = {"abs": np.abs}


_REDUCE_OPS = ("add", "multiply", "maximum", "minimum")


@instruction(
    family="reductions and scans",
    engines="vector",
    source=ISA_INDEX,
    attrs=AccumulatorAttrs,
    rules=("reduce_op is add, multiply, maximum or minimum; reduce_res is a [P, 1] column",),
    example="nisa.tensor_scalar_reduce(dst=y, data=x, op0=nl.subtract, operand0=row_max, reduce_op=nl.add, reduce_res=row_sum)",
)
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
    assert alu.reduce is not None  # (_reduce_alu allows only reductions)
    acc = alu.fn(_acc_start(ctx, op, cmd, alu.name, init, p), alu.reduce(rows, axis=1).astype(np.float32))
    _acc_end(ctx, acc, p)
    close_psum_group(data)
    write(ctx, dst, rows.reshape(dst.shape))
    if reduce_res is not None:
        rr = writes[1][1]
        write(ctx, rr, (-acc if reduce_res_negate else acc).reshape(rr.shape))


#: ``sequence_bounds``' operand dtypes (the page: "must have data type nl.float32 or nl.int32").
_BOUNDS_DTYPES = (dt.float32, dt.int32)


@instruction(
    family="reductions and scans",
    engines="gpsimd",
    source=page("sequence_bounds") + " ('Compute the sequence bounds for a given set of segment IDs using GpSIMD Engine')",
    rules=(
        "segment_ids and dst in SBUF on one partition (the partition dim must be 1)",
        "dst holds two rows of segment_ids' free size: [1, 2, n] for segment_ids [1, n]",
        "segment_ids and dst are float32 or int32",
        "segment id 0 is padding: its start is n and its end -1",
    ),
    example="nisa.sequence_bounds(dst=bounds, segment_ids=ids)",
    cost="gpsimd_pass",
)
def sequence_bounds(dst: Any, segment_ids: Any, name: Any = None) -> None:
    """Where each element's segment starts and ends, on GpSimd: ``dst[0, 0, i]`` the first index of the run of equal ids holding ``i``, ``dst[0, 1, i]`` one past its last.

    For ids ``[1, 1, 2, 0, 3, 3]`` the starts are ``[0, 0, 2, 6, 4, 4]`` and the ends
    ``[2, 2, 3, -1, 6, 6]``: a segment is a run of equal consecutive ids, and padding (id 0)
    gets start ``n`` and end ``-1``. Packed-sequence attention builds its masks from these.
    """
    ctx = current()
    op = "sequence_bounds"
    segment_ids = check_compute_operand(ctx, op, "segment_ids", segment_ids, "gpsimd")
    dst = check_compute_operand(ctx, op, "dst", dst, "gpsimd")
    for role, t in (("segment_ids", segment_ids), ("dst", dst)):
        if _p(t) != 1:
            raise NkiValidationError(
                "err_sequence_bounds_partitions", f"{op} {role}{list(t.shape)} must be on one partition (the partition dim must be 1)"
            )
        if t.dtype not in _BOUNDS_DTYPES:
            raise NkiValidationError(
                "err_sequence_bounds_dtype", f"{op} {role} must be float32 or int32, got {dt.dtype_name(t.dtype)}; copy it to an int32 tile first"
            )
    n = segment_ids.size
    if dst.size != 2 * n:
        raise NkiValidationError(
            "err_sequence_bounds_dst_shape",
            f"{op} dst{list(dst.shape)} must hold a start and an end per segment id: [1, 2, {n}] for segment_ids{list(segment_ids.shape)}",
        )
    record(ctx, op, "gpsimd", [("segment_ids", segment_ids)], [("dst", dst)])
    if not ctx.compute:
        return
    ids = f32(segment_ids).reshape(n)
    index = np.arange(n)
    first = np.r_[True, ids[1:] != ids[:-1]]  # where a run of equal ids begins
    last = np.r_[ids[1:] != ids[:-1], True]  # where one ends
    starts = np.maximum.accumulate(np.where(first, index, 0))
    ends = np.minimum.accumulate(np.where(last, index + 1, n)[::-1])[::-1]
    padding = ids == 0
    write(ctx, dst, np.stack([np.where(padding, n, starts), np.where(padding, -1, ends)]).reshape(dst.shape))
