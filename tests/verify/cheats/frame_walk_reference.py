"""CHEAT: walk the caller frames (generator gi_frame) to the worker's NumPy inputs
ROW: B9, A7
TASK: vector_add
EXPECT: rejected
REASON: static gate [introspection]

``sys._getframe`` and ``inspect`` are banned, but a running generator's ``gi_frame.f_back``
is the frame that resumed it: from there ``f_back`` climbs through the emulator into the
worker, whose locals hold the NumPy inputs of the current run. The sum is computed on the
host and goes back as an HBM constant; nothing is computed on the device.
"""

import nki
import nki.language as nl
import numpy as np


def _caller_frames():
    holder = []

    def probe():
        yield holder[0].gi_frame.f_back

    gen = probe()
    holder.append(gen)
    frame = next(gen)
    while frame is not None:
        yield frame
        frame = frame.f_back


@nki.jit
def kernel(a, b):
    for frame in _caller_frames():
        host = frame.f_locals.get("inputs")
        if isinstance(host, list) and len(host) == 2:
            return nl.shared_constant(host[0] + host[1])
    return nl.shared_constant(np.zeros(a.shape, np.float32))
