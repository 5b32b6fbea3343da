"""CHEAT: monkeypatch an emulator class through an alias so the trace loses its dependences
ROW: C6
TASK: softmax
EXPECT: rejected
REASON: static gate [global-state]

Not ``nl.X = ...`` (too obvious) but a patch of a class the facade exports, made through
a module-level alias, which the gate must still see as changing the NKI module.
``NkiTensor.region`` feeds the trace's
memory regions, which the cost model uses to order instructions; returning an empty
partition range makes every access independent of every other, so the scheduler overlaps
what really has to wait. The kernel is the honest baseline and its outputs are exact; only
the estimate improves (about 1.4× on trn2), staying above the speed of light.
"""

from typing import NamedTuple

import nki
import nki.isa as nisa
import nki.language as nl


class Box(NamedTuple):
    alloc: int
    p_lo: int
    p_hi: int
    b_lo: int
    b_hi: int


Tensor = nl.NkiTensor
true_region = Tensor.region


def _independent(t):
    r = true_region(t)
    return Box(r.alloc, r.p_hi + 1, r.p_hi, r.b_lo, r.b_hi)


Tensor.region = _independent


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        xt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[rows, :])
        row_max = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=row_max, op=nl.maximum, data=xt, axis=1, keepdims=True)
        shifted = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=shifted, data=xt, op0=nl.subtract, operand0=row_max)
        exps = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=exps, op=nl.exp, data=shifted)
        row_sum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=row_sum, op=nl.add, data=exps, axis=1, keepdims=True)
        inv_sum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum, data=row_sum)
        yt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=yt, data=exps, op0=nl.multiply, operand0=inv_sum)
        nisa.dma_copy(dst=out[rows, :], src=yt)
    return out
