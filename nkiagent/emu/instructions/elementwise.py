"""Element-wise compute on VectorE, ScalarE and GpSimd: ALU ops, activations, reciprocal, exponential."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes as dt
from .. import engines as _engines
from ..alu import act_func, alu_op
from ..errors import NkiTypeError, NkiValidationError
from ..memory import current
from ..ops import (
    F32,
    ON_CHIP,
    check_act_range,
    check_compute_operand,
    check_memory,
    check_same_shape_pp,
    close_psum_group,
    f32,
    mark_written,
    record,
    require_tensor,
    scalar_or_column,
    write,
)
from ..registry import ISA_INDEX, AccumulatorAttrs, AluAttrs, AluPairAttrs, CostAttrs, NoAttrs, instruction, page
from ..tensor import NkiTensor
from .common import (
    _RC,
    _acc_accesses,
    _acc_end,
    _acc_start,
    _apply,
    _check_reduce_enabled,
    _cmd,
    _column,
    _p,
    _pf,
    _pp,
    _require_gen,
    _rows,
    _values,
    engine,
    reduce_cmd,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivationAttrs(CostAttrs):
    """The activation function and whether each row of its result is also summed."""

    func: str
    reduce: bool = False


_INT32S = frozenset({dt.int32, dt.uint32})  # (a set: one hash per tile instead of dtype comparisons)


def _alu_engine(op: str, alu: Any, eng: Any, *tiles: NkiTensor, dst: Any = None) -> str:
    """The engine of an ALU instruction: the one asked for, else GpSimd for power and 32-bit integer add/multiply, else VectorE.

    GpSimd cannot reach PSUM, so the default stays VectorE when an operand or ``dst`` is
    there (the compiler places such an instruction where it can run; only an explicit
    ``engine=gpsimd`` meets the PSUM rule).
    """
    default = "vector"
    if alu.name == "power" or not _INT32S.isdisjoint([t._dtype for t in tiles]):
        default = "gpsimd" if alu.kind == "arith" and alu.name in ("add", "multiply", "power") else "vector"
    in_psum = isinstance(dst, NkiTensor) and dst._a.memory == "psum"
    for t in tiles:  # (a loop, not any() over a generator: this runs for every element-wise instruction)
        if t._a.memory == "psum":
            in_psum = True
    return _engines.select(op, eng, "vector" if in_psum else default)


@instruction(
    family="element-wise",
    engines="vector gpsimd",
    source=page("tensor_tensor"),
    attrs=AluAttrs,
    rules=(
        "data1, data2 and dst have the same partitions and elements per partition: no broadcasting",
        "data1 and data2 cannot both be in PSUM; GpSimd cannot touch PSUM",
        "default engine: VectorE, GpSimd for power and 32-bit integer add/multiply unless a tile is in PSUM",
    ),
    example="nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.add)",
)
def tensor_tensor(dst: Any, data1: Any, data2: Any, op: Any, engine: Any = engine.unknown, name: Any = None) -> None:
    """Element-wise ``dst = op(data1, data2)``; same partitions and elements per partition, no broadcasting."""
    ctx = current()
    opn = "tensor_tensor"
    alu = alu_op(op, opn)
    d1 = require_tensor(opn, "data1", data1)
    d2 = require_tensor(opn, "data2", data2)
    eng = _alu_engine(opn, alu, engine, d1, d2, dst=dst)
    d1 = check_compute_operand(ctx, opn, "data1", d1, eng)
    d2 = check_compute_operand(ctx, opn, "data2", d2, eng)
    dst = check_compute_operand(ctx, opn, "dst", dst, eng)
    if d1._a.memory == "psum" and d2._a.memory == "psum":
        raise NkiValidationError("err_tensor_tensor_both_psum", "tensor_tensor data1 and data2 cannot both be in PSUM")
    check_same_shape_pp(opn, [("data1", d1), ("data2", d2), ("dst", dst)])
    record(ctx, opn, eng, [("data1", d1), ("data2", d2)], [("dst", dst)], alu=alu.name)
    if not ctx.compute:
        return
    p = _p(d1)
    x, y = _pf(_values(d1, alu.kind), p), _pf(_values(d2, alu.kind), p)
    out = _in_place(dst, p) if ctx.fast and alu.fn in _IN_PLACE_UFUNCS else None
    if out is not None:  # fp32 dst: compute straight into it (NumPy copies inputs that overlap it)
        alu.fn(x, y, out=out)  # (a ufunc: _IN_PLACE_UFUNCS)
        close_psum_group(d1)
        close_psum_group(d2)
        mark_written(dst)
        return
    res = alu.fn(x, y)
    close_psum_group(d1)
    close_psum_group(d2)
    write(ctx, dst, res.reshape(dst.shape))


#: Element-wise ops whose fp32 result NumPy can write into the destination itself.
_IN_PLACE_UFUNCS = frozenset({np.add, np.subtract, np.multiply, np.maximum, np.minimum})


def _in_place(dst: NkiTensor, p: int) -> np.ndarray | None:
    """``dst``'s numbers as a writable ``(partitions, free)`` view when a result may go there directly.

    Only for fp32 storage seen through a direct view of its own dtype, where the store would be
    a plain copy; ``None`` when reshaping would need a copy (then it goes through ``write``).
    """
    a = dst._a
    if a.pending or dst._addr is not None or not (dst._dtype is F32 or dst._dtype == F32) or a.dtype != F32:
        return None
    if a.fresh:  # the result covers dst (the inputs are read already)
        dst._claim()
    v = dst._target()
    shape = v.shape
    if len(shape) == 2 and shape[0] == p:
        return v
    view = v.view()
    try:
        view.shape = (p, -1)  # raises rather than copy
    except AttributeError:
        return None
    return view


_SCALAR_TS_OK = {("multiply", "add"), ("multiply", None), ("add", None)}


@instruction(
    family="element-wise",
    engines="vector scalar gpsimd",
    source=page("tensor_scalar") + "; Scalar add/multiply from NeuronCore-v3 (nki.api.shared.html tbl-aluop note)",
    attrs=AluPairAttrs,
    rules=(
        "operand0/operand1 are scalars or [P, 1] fp32 columns (broadcast along the free dims)",
        "op1 and operand1 go together; op0 and op1 are both arithmetic or both bitwise",
        "on trn2's ScalarE only (multiply, add), (multiply, None) and (add, None)",
    ),
    example="nisa.tensor_scalar(dst=y, data=x, op0=nl.multiply, operand0=scale_col, op1=nl.add, operand1=1.0)",
    since=(("scalar", 3),),
)
def tensor_scalar(
    dst: Any,
    data: Any,
    op0: Any,
    operand0: Any,
    reverse0: bool = False,
    op1: Any = None,
    operand1: Any = None,
    reverse1: bool = False,
    engine: Any = engine.unknown,
    name: Any = None,
) -> None:
    """``dst = (data op0 operand0) op1 operand1``; operands are scalars or ``(P, 1)`` fp32 tiles."""
    ctx = current()
    opn = "tensor_scalar"
    a0 = alu_op(op0, opn)
    a1 = alu_op(op1, opn) if op1 is not None else None
    if (op1 is None) != (operand1 is None):
        raise NkiTypeError(
            "err_tensor_scalar_op1", "tensor_scalar op1 and operand1 must be given together (op1=None goes with operand1=None)"
        )
    if a1 is not None and (a0.kind == "bitvec") != (a1.kind == "bitvec"):
        raise NkiTypeError(
            "err_tensor_scalar_op_class", f"tensor_scalar op0 ({a0.name}) and op1 ({a1.name}) must both be arithmetic or both bitvec"
        )
    data = require_tensor(opn, "data", data)
    eng = _alu_engine(opn, a0, engine, data, dst=dst)
    if eng == "scalar" and ctx.target.nc_version == 3 and (a0.name, a1.name if a1 else None) not in _SCALAR_TS_OK:
        raise NkiValidationError(
            "err_tensor_scalar_scalar_engine",
            f"tensor_scalar on the scalar engine of trn2 supports only (multiply, add), (multiply, None) and (add, None), got ({a0.name}, {a1.name if a1 else None})",
        )
    data = check_compute_operand(ctx, opn, "data", data, eng)
    dst = check_compute_operand(ctx, opn, "dst", dst, eng)
    check_same_shape_pp(opn, [("data", data), ("dst", dst)])
    reads = [("data", data)] + [(r, v) for r, v in (("operand0", operand0), ("operand1", operand1)) if isinstance(v, NkiTensor)]
    fp32_only = a0.kind != "bitvec"
    c0 = scalar_or_column(opn, "operand0", operand0, data, fp32_only)
    c1 = scalar_or_column(opn, "operand1", operand1, data, fp32_only) if a1 is not None else None
    record(ctx, opn, eng, reads, [("dst", dst)], alu=(a0.name, a1.name if a1 else None))
    if not ctx.compute:
        return
    x = _values(data, a0.kind)
    if a0.kind == "bitvec":
        c0 = np.asarray(c0).astype(np.int64)
        c1 = None if c1 is None else np.asarray(c1).astype(np.int64)
    r = _apply(a0, x, c0, reverse0)
    if a1 is not None:
        r = _apply(a1, r, c1, reverse1)
    close_psum_group(data)
    write(ctx, dst, np.broadcast_to(r, data.shape).reshape(dst.shape))


@instruction(
    family="element-wise",
    engines="vector",
    source=ISA_INDEX,
    attrs=AluPairAttrs,
    rules=("arithmetic ops only; operand1 has data's shape; data and operand1 cannot both be in PSUM",),
    example="nisa.scalar_tensor_tensor(dst=y, data=x, op0=nl.multiply, operand0=0.5, op1=nl.add, operand1=r)",
)
def scalar_tensor_tensor(
    dst: Any, data: Any, op0: Any, operand0: Any, op1: Any, operand1: Any, reverse0: bool = False, reverse1: bool = False, name: Any = None
) -> None:
    """``dst = (data op0 operand0) op1 operand1`` where operand1 is a tensor of data's shape."""
    ctx = current()
    opn = "scalar_tensor_tensor"
    a0, a1 = alu_op(op0, opn), alu_op(op1, opn)
    if a0.kind == "bitvec" or a1.kind == "bitvec":
        raise NkiTypeError("err_stt_arith_only", "scalar_tensor_tensor supports arithmetic operations only")
    data = check_compute_operand(ctx, opn, "data", data, "vector")
    o1 = check_compute_operand(ctx, opn, "operand1", operand1, "vector")
    dst = check_compute_operand(ctx, opn, "dst", dst, "vector")
    if data._a.memory == "psum" and o1._a.memory == "psum":
        raise NkiValidationError("err_stt_both_psum", "scalar_tensor_tensor data and operand1 cannot both be in PSUM")
    check_same_shape_pp(opn, [("data", data), ("operand1", o1), ("dst", dst)])
    c0 = scalar_or_column(opn, "operand0", operand0, data)
    reads = [("data", data), ("operand1", o1)] + ([("operand0", operand0)] if isinstance(operand0, NkiTensor) else [])
    record(ctx, opn, "vector", reads, [("dst", dst)], alu=(a0.name, a1.name))
    if not ctx.compute:
        return
    r = _apply(a0, f32(data), c0, reverse0)
    r = _apply(a1, _pf(r, _p(data)), _pf(f32(o1), _p(o1)), reverse1)
    write(ctx, dst, r.reshape(dst.shape))


def _act_scale_bias(ctx: Any, opn: str, data: NkiTensor, scale: Any, bias: Any) -> tuple[Any, Any, list[tuple[str, NkiTensor]]]:
    reads: list[tuple[str, NkiTensor]] = []
    if isinstance(scale, NkiTensor):
        if scale.dtype != dt.float32:
            raise NkiValidationError(
                "err_activation_scale_invalid_type",
                "Scale parameter of activation or activation_reduce must be a scalar or vector of type float32.",
            )
        if scale.shape[0] != _p(data) or scale.size != _p(data):
            raise NkiValidationError(
                "err_activation_scale_scalar_or_vector",
                "Scale parameter of activation must be either a scalar value or a 1D vector spanning the partition dimension.",
            )
        reads.append(("scale", scale))
    elif not isinstance(scale, (int, float, np.integer, np.floating)):
        raise NkiValidationError(
            "err_activation_scale_invalid_type",
            "Scale parameter of activation or activation_reduce must be a scalar or vector of type float32.",
        )
    if isinstance(bias, NkiTensor):
        if bias.dtype not in (dt.float32, dt.float16, dt.bfloat16):
            raise NkiValidationError(
                "err_activation_bias_invalid_type",
                "Bias parameter of activation or activation_reduce must be a vector of type float32, float16, or bfloat16.",
            )
        if bias.shape[0] != _p(data) or bias.size != _p(data):
            raise NkiValidationError(
                "err_activation_bias_shape", f"bias shape ({'x'.join(map(str, bias.shape))}) must be Nx1 with N = {_p(data)} partitions"
            )
        check_memory(opn, "bias", bias, ON_CHIP)
        reads.append(("bias", bias))
    elif bias is not None:
        if not isinstance(bias, (int, float, np.integer, np.floating)):
            raise NkiValidationError(
                "err_activation_bias_invalid_type",
                "Bias parameter of activation or activation_reduce must be a vector of type float32, float16, or bfloat16.",
            )
        if not ctx.target.scalar_bias_ok:
            raise NkiValidationError(
                "err_activation_bias_invalid_type",
                f"a scalar bias is only supported on trn2 and later; on {ctx.target.name} pass a [{_p(data)}, 1] vector",
            )
    if not ctx.compute:
        return 1.0, 0.0, reads
    s = scalar_or_column(opn, "scale", scale, data) if isinstance(scale, NkiTensor) else np.float32(scale)
    b: Any
    if isinstance(bias, NkiTensor):
        b = f32(bias).reshape((_p(data),) + (1,) * (data.ndim - 1))
    else:
        b = np.float32(0.0 if bias is None else bias)
    return s, b, reads


def _activation(opn: str, dst: Any, op: Any, data: Any, bias: Any, scale: Any, reduce_op: Any, reduce_res: Any) -> None:
    ctx = current()
    func = act_func(op, opn)
    data = check_compute_operand(ctx, opn, "data", data, "scalar")
    dst = check_compute_operand(ctx, opn, "dst", dst, "scalar")
    check_same_shape_pp(opn, [("data", data), ("dst", dst)])
    writes = [("dst", dst)]
    if reduce_op is not None or reduce_res is not None:
        if reduce_op is None or alu_op(reduce_op, opn).name != "add":
            raise NkiValidationError("err_activation_reduce_op", f"{opn} reduce_op must be nl.add")
        rr = check_compute_operand(ctx, opn, "reduce_res", reduce_res, "scalar")
        if rr.shape[0] != _p(data) or rr.size != _p(data):
            raise NkiValidationError("err_activation_reduce_res", f"{opn} reduce_res must be [{_p(data)}, 1], got {list(rr.shape)}")
        writes.append(("reduce_res", rr))
    s, b, extra = _act_scale_bias(ctx, opn, data, scale, bias)
    record(ctx, opn, "scalar", [("data", data)] + extra, writes, func=func.name, reduce=reduce_op is not None)
    if not ctx.compute:
        return
    x = f32(data) * s + b
    check_act_range(func, np.asarray(x), opn)
    y = np.asarray(func.fn(x), dtype=np.float32)
    close_psum_group(data)
    write(ctx, dst, _pf(y, _p(data)).reshape(dst.shape))
    if len(writes) > 1:
        rr = writes[1][1]
        write(ctx, rr, _pf(y, _p(data)).sum(axis=1, dtype=np.float32).reshape(rr.shape))


@instruction(
    family="element-wise",
    engines="scalar",
    source=ISA_INDEX,
    attrs=ActivationAttrs,
    rules=(
        "scale is a float or a [P, 1] fp32 column; bias a [P, 1] fp32/fp16/bf16 column (a scalar bias needs trn2+)",
        "reduce_op=nl.add with reduce_res=[P, 1] sums each row of the result",
        "the function's input range is checked (e.g. no log of negatives)",
    ),
    example="nisa.activation(dst=e, op=nl.exp, data=s, bias=neg_max, scale=1.0, reduce_op=nl.add, reduce_res=row_sum)",
)
def activation(
    dst: Any,
    op: Any,
    data: Any,
    bias: Any = None,
    scale: Any = 1.0,
    reduce_op: Any = None,
    reduce_res: Any = None,
    reduce_cmd: Any = reduce_cmd.idle,
    name: Any = None,
) -> None:
    """``dst = op(data · scale + bias)`` on ScalarE, optionally summing each row into ``reduce_res``."""
    _activation("activation", dst, op, data, bias, scale, reduce_op, reduce_res)


@instruction(
    family="element-wise",
    engines="scalar",
    source=ISA_INDEX,
    attrs=ActivationAttrs,
    rules=("as activation; reduce_res ([P, 1]) is required and reduce_op must be nl.add",),
    example="nisa.activation_reduce(dst=e, op=nl.exp, data=s, reduce_op=nl.add, reduce_res=row_sum)",
)
def activation_reduce(
    dst: Any, op: Any, data: Any, reduce_op: Any, reduce_res: Any, bias: Any = None, scale: Any = 1.0, name: Any = None
) -> None:
    """``activation`` plus a row reduction (``nl.add``) of the result into ``reduce_res``."""
    if reduce_res is None:
        raise NkiTypeError("err_activation_reduce_res", "activation_reduce needs reduce_res, a (P, 1) tile")
    _activation("activation_reduce", dst, op, data, bias, scale, reduce_op, reduce_res)


@instruction(
    family="element-wise",
    engines="vector",
    source=ISA_INDEX,
    attrs=NoAttrs,
    rules=("data and dst have the same partitions and elements per partition",),
    example="nisa.reciprocal(dst=inv, data=row_sum)",
)
def reciprocal(dst: Any, data: Any, name: Any = None) -> None:
    """``dst = 1 / data`` on VectorE (fp32)."""
    ctx = current()
    opn = "reciprocal"
    data = check_compute_operand(ctx, opn, "data", data, "vector")
    dst = check_compute_operand(ctx, opn, "dst", dst, "vector")
    check_same_shape_pp(opn, [("data", data), ("dst", dst)])
    record(ctx, opn, "vector", [("data", data)], [("dst", dst)])
    if ctx.compute:
        with np.errstate(divide="ignore"):
            r = np.float32(1.0) / f32(data)
        close_psum_group(data)
        write(ctx, dst, _pf(r, _p(data)).reshape(dst.shape))


_EXP_REDUCE_DTYPES = (dt.float8_e4m3, dt.float8_e5m2, dt.float16, dt.bfloat16, dt.float32, dt.tfloat32)


@instruction(
    family="element-wise",
    engines="vector",
    source=page("exponential") + " (Supported engines: Vector)",
    attrs=AccumulatorAttrs,
    rules=("trn3 only; max_value is a scalar or [P, 1] column; reduce_res needs reduce_cmd other than idle",),
    example="nisa.exponential(dst=e, src=s, max_value=row_max, reduce_res=row_sum, reduce_cmd=nisa.reduce_cmd.reset_reduce)",
    nc_version=4,
)
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
    _require_gen(ctx, op)
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
