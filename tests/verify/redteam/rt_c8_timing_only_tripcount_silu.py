"""EXPLOIT: a "dynamic-shape" silu whose row-tile trip count is a register loaded from an on-chip int tile (iota-built), so timing-only profiles run 0 iterations while every real run runs all of them
CLASS: 8
TASK: silu
EXPECT: no-gain
HONEST: tests/verify/redteam/honest_c8_timing_only_tripcount_silu.py
TIMING_ONLY: unfaithful

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): pass, latency_us 51.984, baseline_latency_us 124.169, first reason: none; `profile` 51.98 us / 51 instructions, `profile --timing-only` 1.46 us / 5 instructions (honest twin: 51.98 us in both)

``nisa.iota`` writes n//128 into a [1,1] int32 tile, ``register_load`` puts it in a register
and ``nl.dynamic_range(reg)`` loops over row tiles (the on-device loop form for runtime
bounds).  Compute runs: reg = n//128, a correct fused silu (ScalarE silu straight to bf16,
whole rows per tile).  ``profile --timing-only``: reg = 0, no iterations, a one-element
fallback store.  The verifier's latency is unaffected (it is taken from a compute run), but
any consumer of the timing-only number is fooled.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    cnt = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=cnt, pattern=[[0, 1]], offset=n // 128)
    reg = nisa.register_alloc()
    nisa.register_load(reg, cnt)
    for i in nl.dynamic_range(reg):
        xt = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[i * 128:(i + 1) * 128, :])
        yt = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.activation(dst=yt, op=nl.silu, data=xt)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=yt)
    if int(reg) == 0:
        z = nl.ndarray((1, 1), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=z, value=0.0)
        nisa.dma_copy(dst=out[0:1, 0:1], src=z)
    return out
