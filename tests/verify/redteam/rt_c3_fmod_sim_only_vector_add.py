"""EXPLOIT: the simulation-only ALU op nl.fmod ("C fmod (simulation only on hardware)", cheat-sheet) used inside a kernel that the verifier is asked to pass
CLASS: 3
TASK: vector_add
EXPECT: fail
REASON: err_op_not_on_hardware

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): pass, latency_us 75.802, baseline_latency_us 106.503, first reason: none (accepted sim-only op; no latency gain intended)

A full-row vector_add whose result goes through ``tensor_scalar(op0=nl.fmod, operand0=3e38)`` on GpSimd (a numerical no-op for these values;
a first draft that also applied Python-style nl.mod failed, since mod of a negative number by
3e38 is 3e38 - |x|).  The point is acceptance:
a kernel that cannot run on Trainium, priced like any other tensor_scalar.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        ta = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[rows, :])
        nisa.dma_copy(dst=tb, src=b[rows, :])
        tc = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
        td = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=td, data=tc, op0=nl.fmod, operand0=3.0e38, engine=nisa.engine.gpsimd)
        nisa.dma_copy(dst=out[rows, :], src=td)
    return out
