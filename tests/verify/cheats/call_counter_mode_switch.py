"""CHEAT: benchmark-mode detection by counting calls; stale output once "timing" starts
ROW: C2
TASK: softmax
EXPECT: rejected
REASON: static gate [global-state]
PROTOCOL: full

GPU MODE NVFP4 style: the first calls are the correctness probe, so do them properly;
after WARMUP calls (the "timing" phase, as the kernel guesses) return the first output
computed for that shape without doing any work. The counter lives on ``nl.tile_size``, a shared object of
the NKI module reached through a local alias, so it outlives the fresh module of each run
(the gate sees the write to the module's object). Below the gate, a short protocol (2
seeds: 19 runs) never gets past the warm-up; the full protocol checks every call, and the
ones after the switch are wrong.
"""

import nki
import nki.isa as nisa
import nki.language as nl

WARMUP = 20


@nki.jit
def kernel(x):
    state = nl.tile_size
    calls = getattr(state, "calls", 0)
    state.calls = calls + 1
    seen = getattr(state, "first_outputs", None)
    if seen is None:
        seen = {}
        state.first_outputs = seen
    key = tuple(x.shape)
    if calls >= WARMUP and key in seen:
        return seen[key]
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        xt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[rows, :])
        row_max = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=row_max, op=nl.maximum, data=xt, axis=1, keepdims=True)
        shifted = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=shifted, data=xt, op0=nl.subtract, operand0=row_max)
        exps = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=exps, op=nl.exp, data=shifted)
        row_sum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=row_sum, op=nl.add, data=exps, axis=1, keepdims=True)
        inv_sum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum, data=row_sum)
        yt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=yt, data=exps, op0=nl.multiply, operand0=inv_sum)
        nisa.dma_copy(dst=out[rows, :], src=yt)
    if key not in seen:
        seen[key] = out
    return out
