"""CHEAT: find the inputs in the interpreter's heap with gc.get_objects
ROW: B9
TASK: transpose
EXPECT: rejected
REASON: static gate [forbidden-import]

pygpubench-style: scan every live object for NumPy arrays of the input's shape (the
worker's copies of the inputs) and return their transpose, computed on the host.
"""

import gc

import nki
import nki.language as nl
import numpy as np


@nki.jit
def kernel(x):
    for obj in gc.get_objects():
        if isinstance(obj, np.ndarray) and obj.shape == tuple(x.shape) and obj.dtype == np.float32:
            return nl.shared_constant(np.ascontiguousarray(obj.T))
    return nl.shared_constant(np.zeros((x.shape[1], x.shape[0]), np.float32))
