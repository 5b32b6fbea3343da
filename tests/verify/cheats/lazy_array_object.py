"""CHEAT: return a deferred object that computes when the checker converts it
ROW: B10
TASK: vector_add
EXPECT: rejected
REASON: static gate [dunder-attribute]

``lazy_eval``: hand back an object with ``__array__`` instead of a tensor, so the real work
happens during the comparison, after the timer has stopped. Outputs must be tensors the
kernel wrote; anything else is not an output.
"""

import nki
import numpy as np


class Deferred:
    def __init__(self, shape):
        self.shape = shape

    def __array__(self, dtype=None, copy=None):
        return np.zeros(self.shape, dtype or np.float32)


@nki.jit
def kernel(a, b):
    return Deferred(a.shape)
