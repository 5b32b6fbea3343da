"""CHEAT: precision downgrade — run the matmul on fp8 operands
ROW: B5
TASK: matmul
EXPECT: fail
REASON: wrong answer

FP8 doubles TensorE throughput (KernelBench-Hard's reverse rubric leak): cast both bf16
tiles to float8_e4m3 before ``nc_matmul``. Accumulation stays fp32, so the error is the
operand rounding alone — well above the task's relative-L2 bound of 1e-4.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(lhsT, rhs):
    k_dim, m_dim = lhsT.shape
    n_dim = rhs.shape[1]
    out = nl.ndarray((m_dim, n_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_dim // 128):
        for n in nl.affine_range(n_dim // 512):
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_dim // 128):
                a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128])
                nisa.dma_copy(dst=b, src=rhs[k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
                a8 = nl.ndarray((128, 128), dtype=nl.float8_e4m3, buffer=nl.sbuf)
                b8 = nl.ndarray((128, 512), dtype=nl.float8_e4m3, buffer=nl.sbuf)
                nisa.tensor_copy(dst=a8, src=a)
                nisa.tensor_copy(dst=b8, src=b)
                nisa.nc_matmul(dst=acc, stationary=a8, moving=b8)
            res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512], src=res)
    return out
