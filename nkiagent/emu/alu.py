"""The ALU and activation function tables: what each NKI op computes, and where.

Kernels name operations by passing functions (``op=nl.add``, ``op=np.multiply``,
``op=nl.exp``). This module maps any of those to one :class:`AluOp` (binary ALU ops and
reductions) or :class:`ActFunc` (ScalarE activation functions with their valid ranges).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import NkiTypeError, NkiUnsupportedError, NkiValidationError

__all__ = ["ACT", "ALU", "NOT_ON_HARDWARE", "ActFunc", "AluOp", "act_func", "alu_op", "not_on_hardware", "suggest"]


@dataclass(frozen=True, slots=True)
class AluOp:
    """A binary ALU operation. ``kind`` is ``arith``, ``bitvec``, ``compare`` or ``logical``."""

    name: str
    fn: Callable[..., np.ndarray]  #: ``f(a, b)`` on arrays or scalars (NumPy broadcasting); ufuncs also take ``out=``
    kind: str
    reduce: Callable[..., np.ndarray] | None = None  #: ``f(x, axis=...)`` when legal as a reduction


@dataclass(frozen=True, slots=True)
class ActFunc:
    """A ScalarE activation function and the input range its polynomial is valid on."""

    name: str
    fn: Callable[[np.ndarray], np.ndarray]
    lo: float = -np.inf
    hi: float = np.inf
    symmetric: bool = False  #: valid range is ±[lo, hi]


def _shift_left(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.left_shift(a.astype(np.int64), b.astype(np.int64))


def _shift_right(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # logical shift on the 32-bit pattern
    return np.right_shift(a.astype(np.int64) & 0xFFFFFFFF, b.astype(np.int64))


def _bits(f: Callable[..., np.ndarray]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    return lambda a, b: f(a.astype(np.int64), b.astype(np.int64))


def _safe_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(a, b)


def _safe_fmod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmod(a, b)


def _safe_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.mod(a, b)


def _safe_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.power(a, b)


def _abs_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum(np.abs(a), np.abs(b))


def _abs_min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.minimum(np.abs(a), np.abs(b))


def _as_f(f: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    return lambda a, b: f(a, b).astype(np.float32)


ALU: dict[str, AluOp] = {
    op.name: op
    for op in [
        AluOp("add", np.add, "arith", np.sum),
        AluOp("subtract", np.subtract, "arith", None),
        AluOp("multiply", np.multiply, "arith", np.prod),
        AluOp("divide", _safe_div, "arith"),
        AluOp("maximum", np.maximum, "arith", np.max),
        AluOp("minimum", np.minimum, "arith", np.min),
        AluOp("abs_max", _abs_max, "arith", lambda x, axis, **k: np.max(np.abs(x), axis=axis, **k)),
        AluOp("abs_min", _abs_min, "arith", lambda x, axis, **k: np.min(np.abs(x), axis=axis, **k)),
        AluOp("power", _safe_pow, "arith"),
        AluOp("fmod", _safe_fmod, "arith"),
        AluOp("mod", _safe_mod, "arith"),
        AluOp("equal", _as_f(np.equal), "compare"),
        AluOp("not_equal", _as_f(np.not_equal), "compare"),
        AluOp("greater", _as_f(np.greater), "compare"),
        AluOp("greater_equal", _as_f(np.greater_equal), "compare"),
        AluOp("less", _as_f(np.less), "compare"),
        AluOp("less_equal", _as_f(np.less_equal), "compare"),
        # reductions give 1.0 / 0.0 like the element-wise logical ops (NumPy bools cannot be negated)
        AluOp("logical_and", _as_f(np.logical_and), "logical", lambda x, axis, **k: np.all(x != 0, axis=axis, **k).astype(np.float32)),
        AluOp("logical_or", _as_f(np.logical_or), "logical", lambda x, axis, **k: np.any(x != 0, axis=axis, **k).astype(np.float32)),
        AluOp("logical_xor", _as_f(np.logical_xor), "logical"),
        AluOp("bitwise_and", _bits(np.bitwise_and), "bitvec", lambda x, axis, **k: np.bitwise_and.reduce(x.astype(np.int64), axis=axis, **k)),
        AluOp("bitwise_or", _bits(np.bitwise_or), "bitvec", lambda x, axis, **k: np.bitwise_or.reduce(x.astype(np.int64), axis=axis, **k)),
        AluOp("bitwise_xor", _bits(np.bitwise_xor), "bitvec", lambda x, axis, **k: np.bitwise_xor.reduce(x.astype(np.int64), axis=axis, **k)),
        AluOp("left_shift", _shift_left, "bitvec"),
        AluOp("right_shift", _shift_right, "bitvec"),
    ]
}
# nl.max / nl.min / nl.sum / nl.prod / nl.all used as op= in reductions and loop_reduce
_REDUCE_ALIASES = {"max": "maximum", "min": "minimum", "sum": "add", "prod": "multiply", "amax": "maximum", "amin": "minimum", "all": "logical_and"}


def _gelu(x: np.ndarray) -> np.ndarray:
    from math import sqrt

    return 0.5 * x * (1.0 + _erf(x / sqrt(2.0)))


def _erf(x: np.ndarray) -> np.ndarray:
    """erf via Abramowitz–Stegun 7.1.26 in float64 (|error| < 1.5e-7, below fp32 resolution near 1)."""
    z = np.asarray(x, dtype=np.float64)
    t = 1.0 / (1.0 + 0.3275911 * np.abs(z))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return (np.sign(z) * (1.0 - poly * np.exp(-z * z))).astype(np.float32)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def _gelu_dx(x: np.ndarray) -> np.ndarray:
    pdf = np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)
    return 0.5 * (1.0 + _erf(x / np.sqrt(2.0))) + x * pdf


def _silu_dx(x: np.ndarray) -> np.ndarray:
    s = _sigmoid(x)
    return s * (1 + x * (1 - s))


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


def _mish(x: np.ndarray) -> np.ndarray:
    return x * np.tanh(_softplus(x))


def _rsqrt(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 / np.sqrt(x)


def _recip(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return 1.0 / x


def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(x)


def _sqrt(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.sqrt(x)


def _exp(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.exp(x)


ACT: dict[str, ActFunc] = {
    f.name: f
    for f in [
        ActFunc("copy", lambda x: x),
        ActFunc("identity", lambda x: x),
        ActFunc("square", np.square),
        ActFunc("sigmoid", _sigmoid),
        ActFunc("relu", lambda x: np.maximum(x, 0)),
        ActFunc("gelu", _gelu),
        ActFunc("gelu_dx", _gelu_dx),
        ActFunc("gelu_apprx_tanh", _gelu_tanh),
        ActFunc("gelu_apprx_sigmoid", lambda x: x * _sigmoid(1.702 * x)),
        ActFunc("gelu_apprx_sigmoid_dx", lambda x: _sigmoid(1.702 * x) * (1 + 1.702 * x * (1 - _sigmoid(1.702 * x)))),
        ActFunc("silu", lambda x: x * _sigmoid(x)),
        ActFunc("silu_dx", _silu_dx),
        ActFunc("tanh", np.tanh),
        ActFunc("softplus", _softplus),
        ActFunc("mish", _mish),
        ActFunc("erf", _erf),
        ActFunc("erf_dx", lambda x: 2.0 / np.sqrt(np.pi) * np.exp(-x * x)),
        ActFunc("exp", _exp),
        ActFunc("sign", np.sign),
        ActFunc("abs", np.abs),
        ActFunc("negative", np.negative),
        ActFunc("log", _log, 2.0**-64, 2.0**64),
        ActFunc("sin", np.sin, -np.pi, np.pi),
        ActFunc("cos", np.cos, -np.pi, np.pi),
        ActFunc("tan", np.tan, -np.pi / 2, np.pi / 2),
        ActFunc("arctan", np.arctan, -np.pi / 2, np.pi / 2),
        ActFunc("sqrt", _sqrt, 2.0**-116, 2.0**118),
        ActFunc("rsqrt", _rsqrt, 2.0**-87, 2.0**97),
        ActFunc("reciprocal", _recip, 2.0**-42, 2.0**42, symmetric=True),
        ActFunc("floor", np.floor),
        ActFunc("ceil", np.ceil),
        ActFunc("trunc", np.trunc),
        ActFunc("logical_not", lambda x: (x == 0).astype(np.float32)),
    ]
}

_NUMPY_NAMES = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide", "true_divide": "divide",
    "maximum": "maximum", "minimum": "minimum", "fmax": "maximum", "fmin": "minimum", "power": "power",
    "fmod": "fmod", "mod": "mod", "remainder": "mod", "equal": "equal", "not_equal": "not_equal", "greater": "greater",
    "greater_equal": "greater_equal", "less": "less", "less_equal": "less_equal", "logical_and": "logical_and",
    "logical_or": "logical_or", "logical_xor": "logical_xor", "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor", "left_shift": "left_shift", "right_shift": "right_shift",
    "max": "maximum", "amax": "maximum", "min": "minimum", "amin": "minimum", "sum": "add", "prod": "multiply",
    "exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "sin": "sin", "cos": "cos", "tan": "tan",
    "arctan": "arctan", "square": "square", "abs": "abs", "absolute": "abs", "negative": "negative", "sign": "sign",
    "reciprocal": "reciprocal", "floor": "floor", "ceil": "ceil", "trunc": "trunc", "logical_not": "logical_not",
    "invert": "invert", "bitwise_not": "invert",
}


def op_name(op: Any) -> str:
    """The NKI name of an op passed as ``nl.add``, ``np.add``, ``np.max`` or a string."""
    name = getattr(op, "_nki_op", None)
    if name:
        return name
    if isinstance(op, str):
        return op
    if isinstance(op, np.ufunc) or getattr(op, "__module__", "") in ("numpy", "numpy.core.fromnumeric", "numpy._core.fromnumeric"):
        key = getattr(op, "__name__", "")
        if key in _NUMPY_NAMES:
            return _NUMPY_NAMES[key]
    raise NkiTypeError("err_invalid_op", f"{op!r} is not an NKI operation (pass e.g. nl.add, nl.multiply, nl.exp, np.add)")


def suggest(name: str, choices: Any) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.5)
    return f"; closest supported: {', '.join(close)}" if close else ""


#: Operators NumPy (and the simulator) compute but the NKI ISA does not have — they are absent from
#: its table of supported math operators (nki.api.shared.html, tbl-aluop), and the 0.3 release notes
#: say ``nl.divide`` is not supported on hardware and ``nl.fmod``/``nl.mod`` fail there — with what to
#: write instead. Kept in :data:`ALU` for the 0.1 front-end, which lowers ``nl.divide``/``nl.mod``/``nl.fmod``.
NOT_ON_HARDWARE: dict[str, str] = {
    "divide": "multiply by the reciprocal instead: nl.multiply(x, nl.reciprocal(y)), or nisa.reciprocal into a tile and op=nl.multiply",
    "mod": "there is no remainder on the hardware: form x - y * nl.floor(x * (1 / y)) from a reciprocal, multiplies and a floor",
    "fmod": "there is no remainder on the hardware: form x - y * nl.trunc(x * (1 / y)) from a reciprocal, multiplies and a trunc",
}


def not_on_hardware(name: str, what: str) -> NkiValidationError:
    """The error for ``what`` using the simulation-only operator ``name`` (a key of :data:`NOT_ON_HARDWARE`)."""
    return NkiValidationError(
        "err_op_not_on_hardware",
        f"{what}: the NKI ISA has no {name} operator, so this runs in simulation only and fails on Trainium; {NOT_ON_HARDWARE[name]}",
    )


def alu_op(op: Any, where: str) -> AluOp:
    """The binary ALU op for ``op`` as an ISA instruction ``where`` may use it, or an error naming ``where`` it was passed."""
    name = op_name(op)
    name = _REDUCE_ALIASES.get(name, name)
    if name in NOT_ON_HARDWARE:
        raise not_on_hardware(name, f"{where} op=nl.{name}")
    if name in ALU:
        return ALU[name]
    raise NkiUnsupportedError("err_unsupported_alu_op", f"{name!r} is not a binary ALU operation usable in {where}{suggest(name, ALU)}")


def act_func(op: Any, where: str) -> ActFunc:
    """The activation function for ``op`` (``nl.exp``, ``np.exp``, ``nl.copy`` …)."""
    name = op_name(op)
    if name in ACT:
        return ACT[name]
    raise NkiUnsupportedError(
        "err_unsupported_activation", f"{name!r} is not an activation function usable in {where}{suggest(name, ACT)}"
    )
