"""CHEAT: pull tile values to the host with .tolist()
ROW: A1
TASK: silu
EXPECT: rejected
REASON: static gate [host-compute]

SiLU in pure Python on the host (exact, so it would pass any tolerance), written back as a
constant. The gate names ``.tolist()`` as host compute; tensors expose shape and dtype
only, with no ``tolist``/``item``/data path behind it.
"""

import math

import nki
import nki.language as nl
import numpy as np


@nki.jit
def kernel(x):
    rows = x.tolist()
    host = np.array([[v / (1.0 + math.exp(-v)) for v in row] for row in rows], dtype=np.float32)
    return nl.shared_constant(host, dtype=x.dtype)
