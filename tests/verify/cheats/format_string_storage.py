"""CHEAT: private tensor storage through str.format's attribute lookup
ROW: A1
TASK: transpose
EXPECT: rejected
REASON: static gate [forbidden-call]

``"{0._a.data}".format(t)`` performs the attribute lookups inside ``str.format``: the
source has no attribute access at all. With full print options the string is the whole
array, which ``np.fromstring`` parses back; the transpose is then done on the host.
"""

import nki
import nki.language as nl
import numpy as np

_FIELD = "{0._a.data}"


@nki.jit
def kernel(x):
    with np.printoptions(threshold=np.inf, floatmode="unique", linewidth=np.inf):
        text = _FIELD.format(x)
    host = np.fromstring(text.strip("[]"), dtype=np.float32, sep=" ").reshape(x.shape)
    return nl.shared_constant(np.ascontiguousarray(host.T))
