"""EXPLOIT: an oracle with a fixed instruction stream: how many elements are wrong follows the input's values
CLASS: 5
TASK: softmax
EXPECT: fail
REASON: about
LEAK: none

The red team's bit oracles chose what to write from registers, which changes the instruction
stream and is rejected before any failure text. This one needs no register: after an honest
softmax it adds 1000 wherever the input exceeds 1.5, with one tensor_scalar and one
tensor_tensor, so every input gets the same instructions and the number of wrong elements
is a statistic of the hidden data. Before issue 18 the verifier printed that count exactly
(together with the first wrong value and the reference's value there); now the count is cut
to two significant digits and no value is shown, so the channel carries a few bits at most
and nothing about the reference.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(x):
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
        row_sum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=exps, op=nl.exp, data=shifted, reduce_op=nl.add, reduce_res=row_sum)
        inv_sum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum, data=row_sum)
        yt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=yt, data=exps, op0=nl.multiply, operand0=inv_sum)
        marks = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=marks, data=xt, op0=nl.greater, operand0=1.5, op1=nl.multiply, operand1=1000.0)
        nisa.tensor_tensor(dst=yt, data1=yt, data2=marks, op=nl.add)
        nisa.dma_copy(dst=out[rows, :], src=yt)
    return out
