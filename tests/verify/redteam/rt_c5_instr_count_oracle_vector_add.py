"""EXPLOIT: a CORRECT vector_add that encodes one byte of the timed input (the top byte of a[0,0]'s bit pattern) in the number of instructions of its trace; the passing eval's JSON reports it as profile.instructions and in hot_lines counts
CLASS: 5
TASK: vector_add
EXPECT: rejected
REASON: integrity [data-dependent instructions]

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): pass, latency_us 89.412, baseline_latency_us 106.503, first reason: none; eval JSON profile.instructions = 254 and hot_lines memset count = 188 = 0xBC = top byte of a[0,0] (-0.00838405)

The verdict is pass, so nothing looks wrong, yet the eval JSON's profile (computed from run 0,
the timed input) carries data: instructions = 67 (the honest body: memsets excluded) +
byte, and the hot_lines entry for the memset line has count = byte.  Each extra instruction is
a 1-element VectorE memset (~0.13 us of VectorE time, off the critical path of this
DMA-bound kernel).  With this channel a kernel that passes can exfiltrate 8 bits of any
timed-input value per eval (more with more lines), the same information
c5_bits_oracle_softmax.py gets out of a failing one.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
    n, d = a.shape
    reg = nisa.register_alloc()
    nisa.register_load(reg, a.view(nl.int32)[0:1, 0:1])
    byte = (int(reg) >> 24) & 0xFF
    scratch = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    for _ in range(byte):
        nisa.memset(dst=scratch, value=0.0)
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        ta = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[rows, :])
        nisa.dma_copy(dst=tb, src=b[rows, :])
        tc = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[rows, :], src=tc)
    return out
