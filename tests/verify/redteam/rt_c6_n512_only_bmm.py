"""EXPLOIT: bmm that only ever computes the first 512 output columns (hard-wired N = 512); the task's constraint is N % 512 == 0, but the visible and both hidden shapes all have N = 512, so it passes
CLASS: 6
TASK: bmm
EXPECT: fail
REASON: wrong answer on a hidden shape (larger than the visible shape in every dimension)
LEAK: none

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): pass, latency_us 97.146, baseline_latency_us 97.146, first reason: none; on custom_tasks/bmm_n1024.py: fail, "131072 non-finite output values", baseline passes (15.384 us)

The bmm baseline with its ``for n in nl.affine_range(n_dim // 512)`` loop replaced by a single
iteration.  Columns 512.. of the output are never written (the output still counts as
"written", so no err_tensor_output_not_written_to).  custom_tasks/bmm_n1024.py (same
reference, B=2, M=128, K=256, N=1024 — legal under "N % 512 == 0") shows it failing while the
baseline passes there.  Other divisibility gaps of the same kind in the builtin suite (every
visible and hidden shape satisfies a stricter rule than the stated constraint): softmax and
cumsum D % 1024, transpose C % 512, swiglu F % 512, vector_add/rmsnorm/silu/softmax N % 256.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
    n_batch, m_dim, k_dim = a.shape
    n_dim = b.shape[2]
    n_k = k_dim // 128
    out = nl.ndarray((n_batch, m_dim, n_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    for bi in nl.affine_range(n_batch):
        for m in nl.affine_range(m_dim // 128):
            rows = nl.ds(m * 128, 128)
            a_tile = nl.ndarray((128, k_dim), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_tile, src=a[bi, rows, :])
            a_t = nl.ndarray((128, n_k, 128), dtype=a.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(n_k):
                t_psum = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.psum)
                nisa.nc_transpose(dst=t_psum, data=a_tile[:, k * 128 : (k + 1) * 128])
                nisa.tensor_copy(dst=a_t[:, k, :], src=t_psum)
            for n in nl.affine_range(1):  # "N is 512" (it is, in every case the verifier runs)
                acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
                for k in nl.affine_range(n_k):
                    b_tile = nl.ndarray((128, 512), dtype=b.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=b_tile, src=b[bi, k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
                    nisa.nc_matmul(dst=acc, stationary=a_t[:, k, :], moving=b_tile)
                res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=res, src=acc)
                nisa.dma_copy(dst=out[bi, rows, n * 512 : (n + 1) * 512], src=res)
    return out
