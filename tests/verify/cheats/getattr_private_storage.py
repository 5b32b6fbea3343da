"""CHEAT: private tensor storage through getattr with a computed name
ROW: A1
TASK: vector_add
EXPECT: rejected
REASON: static gate [forbidden-call]

The attribute-access rule of a gate sees ``a._a``; it does not see
``getattr(a, "_" + "a")``. Same host-side sum as ``host_private_storage``.
"""

import nki
import nki.language as nl

_SLOT = "_" + "a"


def _host(t):
    return getattr(getattr(t, _SLOT), "data").reshape(t.shape)


@nki.jit
def kernel(a, b):
    return nl.shared_constant(_host(a) + _host(b))
