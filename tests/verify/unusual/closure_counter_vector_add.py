"""HONEST: a trace-time counter kept in a closure created inside the kernel call (counts DMAs issued so the helper can alternate two buffer names); the state dies with the call
STYLE: red-team class 9 (a false rejection before issue 18)
TASK: vector_add
BEFORE: on 064c209, before issue 18: rejected, latency_us None, baseline_latency_us None, first reason: "static gate [global-state] c9_closure_counter_vector_add.py:25: assigning or deleting here changes `issued`, a closure variable of an enclosing function (or an alias of one); closure state outlives the call when the inner function is returned or used as a decorator: pass values in and return results"

``issued`` is a local list created on every call; the nested ``load`` helper bumps it.
Nothing survives between calls.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    issued = [0]

    def load(src):
        t = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf, name="ld%d" % (issued[0] % 2))
        nisa.dma_copy(dst=t, src=src)
        issued[0] += 1
        return t

    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        ta = load(a[rows, :])
        tb = load(b[rows, :])
        tc = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[rows, :], src=tc)
    return out
