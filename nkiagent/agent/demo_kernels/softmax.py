"""Demo starting kernel for softmax: the baseline's instruction sequence, with two fusions behind switches.

The ``# nkiagent: tune`` booleans are switches to edit (``nkiagent demo``'s offline tuner model flips them). With both off this is the task's
baseline: per 128-row tile VectorE makes four full passes (max, subtract, sum, multiply) and
bounds the kernel. ``FUSE_EXP_SUM`` folds the subtraction into ScalarE's ``exp`` as a bias
(the row max, negated by the reduction) and takes the row sum from the same instruction;
``SCALE_ON_SCALAR`` moves the final ``× 1/sum`` to ScalarE as an activation scale. Each
removes VectorE passes, which is what a compute-bound (VectorE) profile asks for.
"""

import nki
import nki.isa as nisa
import nki.language as nl

FUSE_EXP_SUM = False  # nkiagent: tune
SCALE_ON_SCALAR = False  # nkiagent: tune


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        xt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[rows, :])
        exps = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        row_sum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        if FUSE_EXP_SUM:
            neg_max = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=xt, axis=1, negate=True, keepdims=True)
            nisa.activation(dst=exps, op=nl.exp, data=xt, bias=neg_max, reduce_op=nl.add, reduce_res=row_sum)
        else:
            row_max = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=row_max, op=nl.maximum, data=xt, axis=1, keepdims=True)
            shifted = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=shifted, data=xt, op0=nl.subtract, operand0=row_max)
            nisa.activation(dst=exps, op=nl.exp, data=shifted)
            nisa.tensor_reduce(dst=row_sum, op=nl.add, data=exps, axis=1, keepdims=True)
        inv_sum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum, data=row_sum)
        yt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        if SCALE_ON_SCALAR:
            nisa.activation(dst=yt, op=nl.copy, data=exps, scale=inv_sum)
        else:
            nisa.tensor_scalar(dst=yt, data=exps, op0=nl.multiply, operand0=inv_sum)
        nisa.dma_copy(dst=out[rows, :], src=yt)
    return out
