"""NKI data types on top of NumPy and ``ml_dtypes``, with NKI's promotion table.

Why a module of its own: low-precision storage (bf16, fp8, tf32) must round exactly as the
hardware stores, and mixed-dtype arithmetic must pick the output dtype NKI documents
(§2.4 of the reference), which differs from NumPy's rules in several places.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from .errors import NkiTypeError

__all__ = [
    "DTYPES",
    "LOW_FLOATS",
    "PACKED",
    "as_dtype",
    "bfloat16",
    "bool_",
    "dtype_name",
    "float4_e2m1fn_x4",
    "float8_e4m3",
    "float8_e4m3fn",
    "float8_e4m3fn_x4",
    "float8_e5m2",
    "float8_e5m2_x4",
    "float8_e8m0fnu",
    "float16",
    "float32",
    "int8",
    "int16",
    "int32",
    "is_float",
    "is_int",
    "promote",
    "storage_dtype",
    "store_cast",
    "tfloat32",
    "uint8",
    "uint16",
    "uint32",
    "uninitialized_value",
    "weak_scalar_dtype",
]

bool_ = np.dtype(np.bool_)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
uint8 = np.dtype(np.uint8)
uint16 = np.dtype(np.uint16)
uint32 = np.dtype(np.uint32)
float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
#: NKI 0.1 spells tfloat32 as a 4-byte void type; it is stored as fp32 rounded to 10 mantissa bits.
tfloat32 = np.dtype("V4")
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e8m0fnu = np.dtype(ml_dtypes.float8_e8m0fnu)

# The packed low-precision types of the MX matmul (``nc_matmul_mx`` on NeuronCore-v4): one
# element holds four fp8 (4 bytes) or four fp4 (2 bytes) values. NumPy has no such type; a
# one-field structured dtype keeps each distinct (unlike plain ``V4``, which tfloat32 is), of
# the right size for allocation and DMA, and refused by arithmetic, which cannot read it.
float8_e4m3fn_x4 = np.dtype([("float8_e4m3fn_x4", "<u4")])
float8_e5m2_x4 = np.dtype([("float8_e5m2_x4", "<u4")])
float4_e2m1fn_x4 = np.dtype([("float4_e2m1fn_x4", "<u2")])
#: Packed types and the element type each holds four of.
PACKED = {float8_e4m3fn_x4: float8_e4m3fn, float8_e5m2_x4: float8_e5m2, float4_e2m1fn_x4: np.dtype(ml_dtypes.float4_e2m1fn)}

#: Floats narrower than fp32 that engines widen to fp32 before computing.
LOW_FLOATS = frozenset({bfloat16, float16, float8_e4m3, float8_e5m2, float8_e4m3fn})

DTYPES: dict[str, np.dtype] = {
    "bool": bool_,
    "int8": int8,
    "int16": int16,
    "int32": int32,
    "uint8": uint8,
    "uint16": uint16,
    "uint32": uint32,
    "float16": float16,
    "float32": float32,
    "bfloat16": bfloat16,
    "tfloat32": tfloat32,
    "float8_e4m3": float8_e4m3,
    "float8_e5m2": float8_e5m2,
    "float8_e4m3fn": float8_e4m3fn,
    "float8_e8m0fnu": float8_e8m0fnu,
    "float8_e4m3fn_x4": float8_e4m3fn_x4,
    "float8_e5m2_x4": float8_e5m2_x4,
    "float4_e2m1fn_x4": float4_e2m1fn_x4,
}
_ALIASES = {"bool_": "bool", "fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "f32": "float32", "tf32": "tfloat32"}
_NAMES = {v: k for k, v in DTYPES.items() if k != "tfloat32"}
_FLOAT_RANK = {float8_e4m3: 1, float8_e5m2: 1, float8_e4m3fn: 1, float8_e8m0fnu: 1, float16: 2, bfloat16: 2, tfloat32: 3, float32: 3}


def as_dtype(d: Any) -> np.dtype:
    """Normalize anything NKI code passes as a dtype (numpy types, names, torch dtypes)."""
    if isinstance(d, np.dtype):
        return d
    if isinstance(d, str):
        key = _ALIASES.get(d, d)
        if key in DTYPES:
            return DTYPES[key]
        raise NkiTypeError("err_unsupported_dtype", f"unknown dtype {d!r}; supported: {', '.join(DTYPES)}")
    if d is bool:
        return bool_
    if d is float:
        return float32
    if d is int:
        return int32
    name = getattr(d, "name", None) or str(d)
    if name.startswith("torch."):
        return as_dtype(name[len("torch."):])
    try:
        named = np.dtype(d)
    except TypeError:
        named = None
    if named is None or named not in _NAMES:
        raise NkiTypeError("err_unsupported_dtype", f"{d!r} is not an NKI dtype; supported: {', '.join(DTYPES)}")
    return named


def dtype_name(d: np.dtype) -> str:
    """Short NKI name of a dtype (``bfloat16``, ``tfloat32`` …)."""
    name = _NAMES.get(d)
    if name is not None:
        return name
    if d == tfloat32:
        return "tfloat32"
    return str(d)


def is_float(d: np.dtype) -> bool:
    return d in _FLOAT_RANK


def is_int(d: np.dtype) -> bool:
    return d.kind in "iub"


def storage_dtype(d: np.dtype) -> np.dtype:
    """The NumPy dtype that holds values of ``d`` in emulator memory."""
    return float32 if d == tfloat32 else d


def weak_scalar_dtype(value: Any) -> np.dtype:
    """NKI's weak-scalar types: bool → uint8, int → int32, float → fp32."""
    if isinstance(value, (bool, np.bool_)):
        return uint8
    if isinstance(value, (int, np.integer)):
        return int32
    return float32


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """Output dtype of a binary arithmetic op on dtypes ``a`` and ``b`` (NKI's table)."""
    if a == b:
        return a
    if a == bool_:
        return b
    if b == bool_:
        return a
    fa, fb = is_float(a), is_float(b)
    if fa and not fb:
        return a
    if fb and not fa:
        return b
    if fa and fb:
        ra, rb = _FLOAT_RANK[a], _FLOAT_RANK[b]
        if ra == 3 or rb == 3:
            return float32
        if ra == rb == 2:  # (fp16, bf16) → fp32
            return float32
        if ra == rb == 1:  # two different fp8 kinds → bf16
            return bfloat16
        return a if ra > rb else b
    if {a, b} == {int32, uint32}:
        return float32
    wide = np.promote_types(a, b)
    return wide if wide.itemsize <= 4 else float32  # no NKI integer holds both ranges (e.g. int8, uint32): like (int32, uint32)


def _round_tf32(x: np.ndarray) -> np.ndarray:
    """Round fp32 values to tf32 (10 mantissa bits), round-to-nearest-even."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    lsb = (bits >> 13) & 1
    rounded = (bits + 0x0FFF + lsb) & 0xFFFFE000
    finite = np.isfinite(x)
    return np.where(finite, rounded, bits).astype(np.uint32).view(np.float32)


def store_cast(values: np.ndarray, d: np.dtype) -> np.ndarray:
    """Convert computed values to what memory of dtype ``d`` would hold."""
    if d == tfloat32:
        return _round_tf32(np.asarray(values, dtype=np.float32))
    if is_int(d) and values.dtype.kind == "f":
        # Hardware float→int conversion rounds to nearest and saturates.
        info = np.iinfo(d) if d != bool_ else None
        if info is None:
            return values != 0
        with np.errstate(invalid="ignore"):
            # clip in float64: float32 cannot hold int32's max (it rounds up to 2**31 and wraps)
            return np.clip(np.rint(np.nan_to_num(values.astype(np.float64), nan=0.0)), info.min, info.max).astype(d)
    return values.astype(d, copy=False)


def uninitialized_value(d: np.dtype) -> float:
    """What fresh memory reads as, like AWS's simulator: NaN for floats, 4 for integers."""
    return np.nan if is_float(d) else 4

