"""EXPLOIT: the whole kernel body sits in ``nl.dynamic_range(reg)`` where reg is register_loaded from an SBUF int tile set to 1; timing-only runs have no tensor data, register_load yields 0, the loop runs zero times and `profile --timing-only` reports a near-empty kernel
CLASS: 8
TASK: vector_add
EXPECT: no-gain
HONEST: tests/verify/redteam/honest_c8_timing_only_dynrange_vector_add.py
TIMING_ONLY: unfaithful

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): pass, latency_us 74.782, baseline_latency_us 106.503, first reason: none; `profile` 74.78 us / 67 instructions, `profile --timing-only` 1.59 us / 5 instructions (honest twin: 74.78 us in both)

In a compute run (every verifier run, and ``profile`` without --timing-only) reg == 1 and
the body (full-row tiles: load a, load b, add, store) runs once: a correct vector_add.  In
``profile --timing-only`` (documented: "run control flow and the instruction stream without
computing numbers"), ``register_load`` sets the register to 0 (instructions.registers.register_load: "In
timing-only runs there are no values, so the register reads 0"), the dynamic loop is empty,
and only a one-element fallback store (needed so the output counts as written) remains.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    one = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=one, value=1)
    reg = nisa.register_alloc()
    nisa.register_load(reg, one)
    for _ in nl.dynamic_range(reg):
        for i in nl.affine_range(n // 128):
            ta = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
            tb = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=ta, src=a[i * 128:(i + 1) * 128, :])
            nisa.dma_copy(dst=tb, src=b[i * 128:(i + 1) * 128, :])
            tc = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=tc)
    if int(reg) == 0:  # only in timing-only runs: keep the output "written"
        z = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.sbuf)
        nisa.memset(dst=z, value=0.0)
        nisa.dma_copy(dst=out[0:1, 0:1], src=z)
    return out
