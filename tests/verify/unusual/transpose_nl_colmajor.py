"""HONEST: transpose with nl.* only (nl.load, nl.transpose, nl.copy, nl.store), traversed column-major: each output row stripe is built as a Python list of transposed blocks, then stored
STYLE: 1, 10, 13
TASK: transpose
BEFORE: on 064c209, before issue 18: pass, latency_us 131.596 (emulator-estimate, trn2), speedup 1.0012x over the baseline

The outer loop walks the column blocks of x (= the row stripes of out); the inner loop walks
down the rows of x, loading each [128, 128] block, transposing it on TensorE (nl.transpose →
PSUM) and copying it to SBUF (nl.copy). The copies of one stripe are collected in a list,
and only when the stripe is complete are they stored to out[cols, rows] — all loads and
transposes of a stripe first, then all its stores. Values move unchanged, so the result is exact.
"""
import nki
import nki.language as nl

P = 128


@nki.jit
def kernel(x):
    r, c = x.shape
    out = nl.ndarray((c, r), dtype=x.dtype, buffer=nl.shared_hbm)
    for j in nl.affine_range(c // P):
        cols = nl.ds(j * P, P)
        stripe = []
        for i in nl.affine_range(r // P):
            blk = nl.load(x[nl.ds(i * P, P), cols])
            stripe.append(nl.copy(nl.transpose(blk)))
        for i, t in enumerate(stripe):
            nl.store(out[cols, nl.ds(i * P, P)], t)
    return out
