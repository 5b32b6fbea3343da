"""EXPLOIT: a deliberately wrong softmax that smuggles the exact 32 bits of x[0,0] of the timed input out through the verifier's failure message (first-mismatch value = hi 16 bits, mismatch count = lo 16 bits + 1)
CLASS: 5
TASK: softmax
EXPECT: rejected
REASON: integrity [data-dependent instructions]
LEAK: none

The stream of a kernel that reads its input's bits into registers to decide what it writes depends
on the data, so it is rejected before any failure text could carry those bits.

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): fail, latency_us None, baseline_latency_us None, first reason: "wrong answer (shape(D=2048,N=1024) seed=0 dist=normal): 33126 of 2097152 elements outside tolerance (rtol 0.0001, atol 1e-05×rms); max abs err 4.95e+04, max rel err 1.2e+10. first mismatch at index [0, 0]: got 49497, expected 0.000278538" -> lo16 = 33125, hi16 = 48497, x[0,0] bits 0xBD718165 = -0.05896129

The kernel reads x[0,0]'s bit pattern into a register (``x.view(nl.int32)[0:1, 0:1]`` +
``nisa.register_load``) and turns it into a Python int (``int(reg)``; registers are
``__index__``-able in the emulator).  It then computes the correct softmax everywhere, and
afterwards overwrites the first ``lo16 + 1`` elements of the output (row-major) with the
constant ``1000 + hi16``.  The verifier's wrong-answer reason for the first case it checks
(run 0, the timed input) reads "K of M elements outside tolerance ... first mismatch at index
[0, 0]: got V": K - 1 is the low half and V - 1000 the high half of x[0,0]'s bits, both
exact integers under %g formatting.  These are the bits c4_fingerprint_softmax.py keys on.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(x):
    n, d = x.shape
    reg = nisa.register_alloc()
    nisa.register_load(reg, x.view(nl.int32)[0:1, 0:1])
    bits = int(reg) & 0xFFFFFFFF
    hi, lo = bits >> 16, bits & 0xFFFF
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        xt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[rows, :])
        neg_max = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=xt, axis=1, negate=True, keepdims=True)
        ex = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        ssum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=ex, op=nl.exp, data=xt, bias=neg_max, reduce_op=nl.add, reduce_res=ssum)
        inv = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=ssum)
        yt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=yt, data=ex, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=out[rows, :], src=yt)
    k = lo + 1
    full, rem = k // d, k % d
    mark = float(1000 + hi)
    for r0 in range(0, full, 128):
        h = min(128, full - r0)
        blk = nl.ndarray((h, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=blk, value=mark)
        nisa.dma_copy(dst=out[r0:r0 + h, :], src=blk)
    if rem:
        part = nl.ndarray((1, rem), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=part, value=mark)
        nisa.dma_copy(dst=out[full:full + 1, 0:rem], src=part)
    return out
