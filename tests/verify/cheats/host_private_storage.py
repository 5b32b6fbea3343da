"""CHEAT: host compute through the tensor's private storage (_a.data)
ROW: A1
TASK: vector_add
EXPECT: rejected
REASON: static gate [private-attribute]

``NkiTensor`` keeps its allocation in the slot ``_a`` and the allocation keeps a flat NumPy
array in ``data``. Reading both inputs from there, adding on the host and returning the sum
as ``nl.shared_constant`` records no instruction at all: a correct answer at zero cost.
"""

import nki
import nki.language as nl


@nki.jit
def kernel(a, b):
    host_a = a._a.data.reshape(a.shape)
    host_b = b._a.data.reshape(b.shape)
    return nl.shared_constant(host_a + host_b)
