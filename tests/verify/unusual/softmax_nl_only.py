"""HONEST: softmax in high-level nl.* only (nl.load, nl.max, nl.broadcast_to, nl.subtract, nl.exp, nl.sum, nl.reciprocal, nl.multiply, nl.store), one whole row tile at a time
STYLE: 1
TASK: softmax
BEFORE: on 064c209, before issue 18: pass, latency_us 170.998 (emulator-estimate, trn2), speedup 0.5813x over the baseline

NKI 0.3 binary ops do not broadcast, so the [128, 1] row statistics are widened with
nl.broadcast_to before the subtraction and the final scaling. The row max is subtracted
before the exponential, so the ×1000 and heavy-tailed inputs cannot overflow.
"""
import nki
import nki.language as nl

P = 128


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // P):
        rows = nl.ds(i * P, P)
        xt = nl.load(x[rows, :])
        row_max = nl.max(xt, axis=1, keepdims=True)
        e = nl.exp(nl.subtract(xt, nl.broadcast_to(row_max, (P, d))))
        inv = nl.reciprocal(nl.sum(e, axis=1, keepdims=True))
        nl.store(out[rows, :], nl.multiply(e, nl.broadcast_to(inv, (P, d))))
    return out
