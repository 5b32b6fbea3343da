"""CHEAT: host compute through a duck-typed allocation, tensor class reached with type(x)
ROW: A1, A7
TASK: softmax
EXPECT: rejected
REASON: integrity [err_tensor_constructor]

``duck_typed_tensor`` again, past the rules that stop it: the tensor class comes from
``type(x)`` instead of ``nl.NkiTensor``, the host landing zone is a module-level array
(module-level code may build anything) handed out by slicing, and every attribute is set
on ``self`` in ``__init__``. The emulator DMAs each input tile into that host memory,
softmax is computed exactly in NumPy, and a second host-backed "tile" is DMA'd out. The
trace has only the loads and stores: a memory-bound estimate for a ScalarE/VectorE-bound
task, with exact outputs.
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

_LANDING = np.zeros(128 * 4096, dtype=np.float32)


class HostRows:
    """Looks like an emulator SBUF allocation; the storage is ordinary host memory."""

    def __init__(self, rows, cols, storage):
        self.uid = 900000 + cols
        self.name = "host_rows"
        self.memory = "sbuf"
        self.dtype = np.dtype(np.float32)
        self.shape = (rows, cols)
        self.pdim = 0
        self.data = storage
        self.itemsize = 4
        self.partitions = rows
        self.bytes_pp = cols * 4
        self.address = 0
        self.acc_open = None
        self.written = True
        self.is_input = False
        self.rec = None
        self.version = 0
        self.f32c = None
        self.pending = False
        self.on_chip = True


def _host_tile(like, rows, cols, storage):
    return type(like)(HostRows(rows, cols, storage), (rows, cols), (cols, 1), 0, np.dtype(np.float32))


def _softmax_rows(flat, rows, cols):
    v = flat.reshape(rows, cols).astype(np.float64)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32).reshape(-1)


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in range(n // 128):
        rows = nl.ds(i * 128, 128)
        landing = _LANDING[: 128 * d]
        nisa.dma_copy(dst=_host_tile(x, 128, d, landing), src=x[rows, :])
        nisa.dma_copy(dst=out[rows, :], src=_host_tile(x, 128, d, _softmax_rows(landing, 128, d)))
    return out
