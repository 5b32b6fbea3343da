"""HONEST: a fully type-annotated kernel module with ``from __future__ import annotations`` and nki.typing / typing annotations on the helper
STYLE: red-team class 9 (a false rejection before issue 18)
TASK: vector_add
BEFORE: on 064c209, before issue 18: pass, latency_us 74.782, baseline_latency_us 106.503, first reason: none (honest kernel accepted)

Annotations are only read, never evaluated, by this code.
"""

from __future__ import annotations

import typing

import nki
import nki.isa as nisa
import nki.language as nl


def _add_tile(out: typing.Any, a: typing.Any, b: typing.Any, rows: typing.Any, d: int) -> None:
    ta = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a[rows, :])
    nisa.dma_copy(dst=tb, src=b[rows, :])
    tc = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
    nisa.dma_copy(dst=out[rows, :], src=tc)


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        _add_tile(out, a, b, nl.ds(i * 128, 128), d)
    return out
