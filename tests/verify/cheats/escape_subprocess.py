"""CHEAT: run the real answer in a subprocess (a CPU NumPy helper outside the sandbox)
ROW: D5
TASK: vector_add
EXPECT: rejected
REASON: static gate [forbidden-import]

Shell out to a fresh interpreter — no audit hook, no limits — for anything the sandbox
refuses; here it only probes that it can, then runs the honest kernel.
"""

import subprocess

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
    subprocess.run(["python3", "-c", "print('outside')"], check=False)
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        ta = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, d), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[rows, :])
        nisa.dma_copy(dst=tb, src=b[rows, :])
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[rows, :], src=ta)
    return out
