"""CHEAT: exception swallowing through hasattr() and a property (no try/except that returns)
ROW: A3
TASK: softmax
EXPECT: rejected
REASON: static gate [swallowed-exception]

``hasattr`` returns False when the attribute's getter raises AttributeError. The fast path
(4096-wide tiles, wrong for most shapes) runs inside a property whose ``except`` clause
does end in ``raise`` — as an AttributeError — so ``hasattr(plan, "done")`` turns any
failure into False and the kernel quietly falls back to a zero-filled output.
"""

import nki
import nki.isa as nisa
import nki.language as nl

TILE_D = 4096


class FastPath:
    def __init__(self, x, out):
        self.x = x
        self.out = out

    @property
    def done(self):
        try:
            n = self.x.shape[0]
            for i in nl.affine_range(n // 128):
                xt = nl.ndarray((128, TILE_D), dtype=self.x.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=xt, src=self.x[i * 128 : (i + 1) * 128, :])
                mx = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_reduce(dst=mx, op=nl.maximum, data=xt, axis=1, keepdims=True, negate=True)
                ex = nl.ndarray((128, TILE_D), dtype=nl.float32, buffer=nl.sbuf)
                ssum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.activation(dst=ex, op=nl.exp, data=xt, bias=mx, reduce_op=nl.add, reduce_res=ssum)
                nisa.reciprocal(dst=ssum, data=ssum)
                nisa.tensor_scalar(dst=ex, data=ex, op0=nl.multiply, operand0=ssum)
                nisa.dma_copy(dst=self.out[i * 128 : (i + 1) * 128, :], src=ex)
        except Exception as exc:
            raise AttributeError("fast path unavailable") from exc
        return True


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    plan = FastPath(x, out)
    if not hasattr(plan, "done"):
        zeros = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=zeros, value=0.0)
        for i in nl.affine_range(x.shape[0] // 128):
            nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=zeros)
    return out
