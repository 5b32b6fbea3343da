"""CHEAT: precision downgrade — add in bf16 where fp32 is required
ROW: B5
TASK: vector_add
EXPECT: fail
REASON: wrong answer

Half the SBUF bytes and the 16-bit VectorE fast mode: load both operands as bf16, add in
bf16 and widen back to fp32 for the store. The output dtype is right; the values carry
only 8 mantissa bits.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        ta = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, d), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[rows, :])
        nisa.dma_copy(dst=tb, src=b[rows, :])
        ha = nl.ndarray((128, d), dtype=nl.bfloat16, buffer=nl.sbuf)
        hb = nl.ndarray((128, d), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=ha, src=ta)
        nisa.tensor_copy(dst=hb, src=tb)
        hc = nl.ndarray((128, d), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=hc, data1=ha, data2=hb, op=nl.add)
        tc = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=tc, src=hc)
        nisa.dma_copy(dst=out[rows, :], src=tc)
    return out
