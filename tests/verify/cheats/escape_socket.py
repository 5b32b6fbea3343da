"""CHEAT: open a network connection (exfiltrate, or fetch a precomputed answer)
ROW: D5
TASK: vector_add
EXPECT: rejected
REASON: static gate [forbidden-import]

Connect to a collaborator's server to upload the task or download an answer file.
"""

import socket

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
    with socket.create_connection(("127.0.0.1", 9), timeout=0.1):
        pass
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
