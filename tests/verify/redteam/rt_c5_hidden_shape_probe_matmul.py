"""EXPLOIT: a matmul that is correct on the visible shape and raises on anything else; the verifier's reason names the first hidden case it tried, dims included
CLASS: 5
TASK: matmul
EXPECT: fail
REASON: runtime error ValueError: unsupported shape
LEAK: none

Written from outside by the red team (README, CLI, public emulator and cost model only). Before the
issue-18 fixes (064c209): fail (by design), latency_us None, baseline_latency_us None; with KNOWN = visible only: "runtime error ValueError: unsupported shape at ...:26 (hidden shape(K=512,M=256,N=1024) seed=0 dist=normal)"; with that added: "... (hidden shape(K=1152,M=384,N=1536) seed=0 dist=normal)"

The case label the verifier appends to every runtime error or wrong answer ("(hidden
shape(K=...,M=...,N=...) seed=... dist=...)") is the protocol's hidden shape itself.  Adding
each leaked shape to KNOWN and re-submitting walks the whole hidden list (two evals for the
builtin tasks' two hidden shapes).  Any failure on a hidden case leaks the same way (an NKI
out-of-bounds error on a hidden case did, in c1_refcopy_attention.py's first draft).
"""

import nki
import nki.isa as nisa
import nki.language as nl

KNOWN = ((2048, 1024, 2048), (512, 256, 1024))  # the second entry was learnt from the first eval


@nki.jit
def kernel(lhsT, rhs):
    k_dim, m_dim = lhsT.shape
    n_dim = rhs.shape[1]
    if (k_dim, m_dim, n_dim) not in KNOWN:
        raise ValueError("unsupported shape")
    out = nl.ndarray((m_dim, n_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_dim // 128):
        a = nl.ndarray((128, k_dim // 128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=lhsT.ap(pattern=[[m_dim, 128], [128 * m_dim, k_dim // 128], [1, 128]], offset=m * 128))
        for n in nl.affine_range(n_dim // 512):
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_dim // 128):
                b = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=b, src=rhs[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                nisa.nc_matmul(dst=acc, stationary=a[:, k, :], moving=b)
            res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], src=res)
    return out
