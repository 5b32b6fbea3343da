"""HONEST: tiling parameters in a frozen @dataclass config object at module level, read inside the kernel
STYLE: red-team class 9 (a false rejection before issue 18)
TASK: vector_add
BEFORE: on 064c209, before issue 18: fail, latency_us None, baseline_latency_us None, first reason: "runtime error AttributeError: 'NoneType' object has no attribute '__dict__' at c9_dataclass_config_vector_add.py:18 (shape(D=1024,N=2048) seed=0 dist=normal)" (the same file under `nkiagent profile`: runs, 106.50 us; cause: the worker compiles kernel code with PEP 563 string annotations inherited and the module is not in sys.modules, so dataclasses._is_type does sys.modules.get(cls.__module__).__dict__ on None)

A frozen dataclass instance is immutable configuration — the idiomatic way to bundle tile
sizes.  The kernel only reads ``CFG.rows`` / ``CFG.cols``.
"""

import dataclasses

import nki
import nki.isa as nisa
import nki.language as nl


@dataclasses.dataclass(frozen=True)
class TileConfig:
    rows: int = 128
    cols: int = 512


CFG = TileConfig(rows=128, cols=512)


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // CFG.rows):
        for j in nl.affine_range(d // CFG.cols):
            rows, cols = nl.ds(i * CFG.rows, CFG.rows), nl.ds(j * CFG.cols, CFG.cols)
            ta = nl.ndarray((CFG.rows, CFG.cols), dtype=a.dtype, buffer=nl.sbuf)
            tb = nl.ndarray((CFG.rows, CFG.cols), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=ta, src=a[rows, cols])
            nisa.dma_copy(dst=tb, src=b[rows, cols])
            tc = nl.ndarray((CFG.rows, CFG.cols), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
            nisa.dma_copy(dst=out[rows, cols], src=tc)
    return out
