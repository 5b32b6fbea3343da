"""Registers and control: the virtual registers behind ``nl.dynamic_range`` and ``.ap(scalar_offset=reg)``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes as dt
from ..errors import NkiRuntimeError, NkiTypeError, NkiValidationError
from ..memory import current
from ..ops import (
    HBM,
    SBUF_ONLY,
    check_memory,
    data_read,
    record,
    require_tensor,
    write,
)
from ..registry import SILENT, CostAttrs, NoAttrs, instruction
from ..tensor import NkiTensor
from ..trace import Access, pseudo_access


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterAttrs(CostAttrs):
    """The initial value of an allocated register."""

    value: int | None = None


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


@instruction(
    family="registers and control",
    engines="sync",
    source=SILENT,
    attrs=RegisterAttrs,
    rules=("x, if given, fits a 32-bit register",),
    example="n = nisa.register_alloc(0)",
)
def register_alloc(x: int | None = None) -> VirtualRegister:
    """Allocate a virtual register, optionally initialized with the integer ``x``."""
    ctx = current()
    init = None if x is None else _reg_int("register_alloc", x)
    reg = VirtualRegister(ctx.pseudo_uid(), init)
    record(ctx, "register_alloc", "sync", [], [], state_writes=() if init is None else (reg._nki_access("dst"),), value=init)
    return reg


@instruction(
    family="registers and control",
    engines="sync",
    source=SILENT,
    attrs=NoAttrs,
    rules=("dst is a VirtualRegister; src an int or another register",),
    example="nisa.register_move(dst=n, src=4)",
)
def register_move(dst: Any, src: Any) -> None:
    """Set register ``dst`` to the integer ``src`` or to the value of register ``src``."""
    ctx = current()
    op = "register_move"
    reg = _register(op, "dst", dst)
    moved = _register(op, "src", src) if isinstance(src, VirtualRegister) else None
    value = moved._nki_register_value() if moved is not None else _reg_int(op, src)
    record(
        ctx, op, "sync", [], [], state_reads=() if moved is None else (moved._nki_access("src"),), state_writes=(reg._nki_access("dst"),)
    )
    reg._value = value


@instruction(
    family="registers and control",
    engines="sync",
    source=SILENT,
    attrs=NoAttrs,
    rules=("src is a one-element integer tensor in HBM or SBUF",),
    example="nisa.register_load(dst=n, src=count_sb)",
)
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


@instruction(
    family="registers and control",
    engines="sync",
    source=SILENT,
    attrs=NoAttrs,
    rules=("dst is a one-element integer tensor in HBM or SBUF; src a register that holds a value",),
    example="nisa.register_store(dst=count_sb, src=n)",
)
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
