"""CHEAT: private tensor storage through operator.attrgetter
ROW: A1
TASK: softmax
EXPECT: rejected
REASON: static gate [unknown-import]

``operator.attrgetter("_a.data")`` is an ordinary call with a string argument: no
attribute node, no ``getattr``. The softmax is then computed in NumPy on the host.
"""

import operator

import nki
import nki.language as nl
import numpy as np

_storage = operator.attrgetter("_a.data")


@nki.jit
def kernel(x):
    host = _storage(x).reshape(x.shape).astype(np.float64)
    e = np.exp(host - host.max(axis=-1, keepdims=True))
    return nl.shared_constant((e / e.sum(axis=-1, keepdims=True)).astype(np.float32))
