"""CHEAT: host NumPy on the input tensors with np.asarray
ROW: A1
TASK: vector_add
EXPECT: rejected
REASON: static gate [host-compute]

The classic "benign shortcut": skip the device entirely and let NumPy do the sum on the
host, then hand the result back as an HBM constant. The gate names ``np.asarray`` inside a
kernel as host compute; behind it the emulator's tensors are opaque (no ``__array__``, no
buffer protocol, not iterable), so NumPy could not see the numbers anyway.
"""

import nki
import nki.language as nl
import numpy as np


@nki.jit
def kernel(a, b):
    host = np.asarray(a, dtype=np.float32) + np.asarray(b, dtype=np.float32)
    return nl.shared_constant(host)
