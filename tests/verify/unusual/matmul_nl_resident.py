"""HONEST: matmul in high-level nl.* only: both operands loaded once into lists of bf16 tiles, nl.matmul(transpose_x=True) per K tile, fp32 accumulation with += into an SBUF tile, nl.store
STYLE: 1, 10, 12
TASK: matmul
BEFORE: on 064c209, before issue 18: pass, latency_us 478.927 (emulator-estimate, trn2), speedup 1.4063x over the baseline

rhs is loaded once as a K/128 × N/512 grid (a list of lists) of [128, 512] bf16 tiles and lhsT
as a K/128 × M/128 grid of [128, 128] bf16 tiles (on the task's largest shape 64 + 32 KiB per
partition). Each [128, 512] output block is the sum over K tiles of nl.matmul(lhsTᵀ-tile,
rhs-tile, transpose_x=True) (TensorE, fp32 PSUM), accumulated with += into an fp32 SBUF tile
that starts from nl.zeros, then stored with nl.store. No nisa calls. (Operands too large to stay
resident — none of the task's shapes — are loaded at each use instead.)
"""
import nki
import nki.language as nl

P = 128
NB = 512
RESIDENT_BYTES = 128 * 1024  # per partition; larger operands (none of the task's shapes) are streamed


@nki.jit
def kernel(lhsT, rhs):
    k_dim, m_dim = lhsT.shape
    n_dim = rhs.shape[1]
    nk, nm, nn = k_dim // P, m_dim // P, n_dim // NB
    out = nl.ndarray((m_dim, n_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    resident = k_dim * (m_dim + n_dim) * 2 // P <= RESIDENT_BYTES

    def rhs_tile(k, n):
        return nl.load(rhs[k * P : (k + 1) * P, n * NB : (n + 1) * NB])

    def lhs_tile(k, m):
        return nl.load(lhsT[k * P : (k + 1) * P, m * P : (m + 1) * P])

    if resident:
        rhs_tiles = [[rhs_tile(k, n) for n in range(nn)] for k in range(nk)]
        lhs_tiles = [[lhs_tile(k, m) for m in range(nm)] for k in range(nk)]
    for m in nl.affine_range(nm):
        for n in nl.affine_range(nn):
            acc = nl.zeros((P, NB), dtype=nl.float32)
            for k in nl.sequential_range(nk):
                a_t = lhs_tiles[k][m] if resident else lhs_tile(k, m)
                b_t = rhs_tiles[k][n] if resident else rhs_tile(k, n)
                acc += nl.matmul(a_t, b_t, transpose_x=True)
            nl.store(out[m * P : (m + 1) * P, n * NB : (n + 1) * NB], acc)
    return out
