"""CHEAT: host compute through a duck-typed allocation behind the public NkiTensor constructor
ROW: A1, A7
TASK: softmax
EXPECT: rejected
REASON: static gate [forbidden-call]

``nl.NkiTensor`` is exported (for isinstance checks), and its constructor trusts whatever
object it is given as the allocation. A small class with the attributes of an SBUF
allocation, whose ``data`` is a NumPy array the kernel owns, makes a "tile" the emulator
happily DMAs into: the input rows land in host memory. Softmax is then computed exactly in
NumPy (float64) and DMA'd out of another host-backed tile. The trace holds only the loads
and stores — a memory-bound estimate for a ScalarE/VectorE-bound task — and the file has
no private or dunder attribute and no forbidden import. The gate refuses constructing
``NkiTensor`` (and host arrays and foreign-object writes inside functions).
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np


class HostRows:
    """Looks like an emulator SBUF allocation; the storage is ordinary host memory."""

    def __init__(self, rows, cols):
        self.uid = 900000 + cols
        self.name = "host_rows"
        self.memory = "sbuf"
        self.dtype = np.dtype(np.float32)
        self.shape = (rows, cols)
        self.pdim = 0
        self.data = np.zeros(rows * cols, dtype=np.float32)
        self.itemsize = 4
        self.partitions = rows
        self.bytes_pp = cols * 4
        self.address = 0
        self.acc_open = None
        self.written = False
        self.is_input = False
        self.rec = None
        self.version = 0
        self.f32c = None
        self.pending = False
        self.on_chip = True

    def __getattr__(self, name):
        return None  # any bookkeeping field a newer emulator reads: "nothing recorded"


def _host_tile(rows, cols):
    storage = HostRows(rows, cols)
    return storage, nl.NkiTensor(storage, (rows, cols), (cols, 1), 0, np.dtype(np.float32))


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in range(n // 128):
        rows = nl.ds(i * 128, 128)
        src, src_tile = _host_tile(128, d)
        nisa.dma_copy(dst=src_tile, src=x[rows, :])
        v = src.data.reshape(128, d).astype(np.float64)
        e = np.exp(v - v.max(axis=1, keepdims=True))
        dst, dst_tile = _host_tile(128, d)
        dst.data[:] = (e / e.sum(axis=1, keepdims=True)).astype(np.float32).reshape(-1)
        dst.written = True
        nisa.dma_copy(dst=out[rows, :], src=dst_tile)
    return out
