"""EXPLOIT: the same singledispatch door, but with ``from __future__ import annotations`` and an unquoted ``exec(...)`` annotation, hoping the gate skips annotation expressions because they become strings at runtime
CLASS: 1
TASK: vector_add
EXPECT: rejected
REASON: static gate [forbidden-call]

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): rejected, latency_us None, baseline_latency_us None, first reason: "static gate [forbidden-call] c1_future_annotations_exec.py:24: `exec` is not allowed in a kernel: a kernel is the code in this file; it may not build and run code from strings"

Under PEP 563 the annotation ``x: exec(PAYLOAD) or type("T", (), {})`` is stored as a string and
only evaluated by ``singledispatch.register``.  The gate parses annotation expressions,
though, and flags the ``exec`` call in it (the quoted form of c1_singledispatch_leak.py is a
plain string constant to it, and passes).
"""

from __future__ import annotations

import functools

import nki
import nki.isa as nisa
import nki.language as nl

PAYLOAD = "raise RuntimeError('PWNED from an unquoted annotation')"


def _hook(x: exec(PAYLOAD) or type("T", (), {})):
    pass


@functools.singledispatch
def _dispatch(x):
    return x


@nki.jit
def kernel(a, b):
    n, d = a.shape
    _dispatch.register(_hook)
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        ta = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[rows, :])
        nisa.dma_copy(dst=tb, src=b[rows, :])
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[rows, :], src=ta)
    return out
