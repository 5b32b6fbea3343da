"""Random: ``dropout`` (a NumPy generator seeded with 0 per run, not the hardware PRNG's bits)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as dt
from ..errors import NkiValidationError
from ..memory import current
from ..ops import (
    check_compute_operand,
    check_same_shape_pp,
    close_psum_group,
    record,
    scalar_or_column,
    write,
)
from ..registry import ISA_INDEX, NoAttrs, instruction
from ..tensor import NkiTensor
from .common import _pp, _rows, _state

_DROPOUT_SEED = 0


@instruction(
    family="random",
    engines="vector",
    source=ISA_INDEX,
    attrs=NoAttrs,
    rules=("prob is a float in [0, 1) or a [P, 1] fp32 column; data is a float tile",),
    example="nisa.dropout(dst=y, data=x, prob=0.1)",
)
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
