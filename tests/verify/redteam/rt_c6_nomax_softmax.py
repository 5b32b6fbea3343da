"""EXPLOIT: softmax without the max subtraction (exp(x) / sum exp(x)), betting that the test data are small enough for exp not to overflow
CLASS: 6
TASK: softmax
EXPECT: fail
REASON: non-finite output values

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): fail, latency_us None, baseline_latency_us None, first reason: "wrong answer (shape(D=2048,N=1024) seed=0 dist=heavy_tailed): 957 non-finite output values (NaN or inf: memory the kernel never wrote, or an overflow); max abs err 0.0474, max rel err 1. first mismatch at index [0, 921]: got nan, expected 1"

One ScalarE exp with a fused row sum, a [P,1] reciprocal and one VectorE scale per 128-row
tile: the max reduction (a full VectorE pass) is gone.  Correct for |x| < ~88; wrong (inf/NaN)
for larger logits.  The protocol's x1000 "large" distribution is exactly the case that
catches this.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        xt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[rows, :])
        ex = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        ssum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=ex, op=nl.exp, data=xt, reduce_op=nl.add, reduce_res=ssum)
        inv = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=ssum)
        yt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=yt, data=ex, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=out[rows, :], src=yt)
    return out
