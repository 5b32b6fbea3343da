"""An SPMD kernel: one vector add split across a launch grid, ``vector_add_spmd[g](a, b)``.

Every program instance allocates the same ``shared_hbm`` output (the launch shares it
between instances, as on hardware) and writes only its own contiguous block of rows,
chosen with ``nl.program_id`` / ``nl.num_programs``. The slices are disjoint, so the
instances need no synchronization.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def vector_add_spmd(a, b):
    """``a + b`` for ``[N, D]`` tensors; N must split into ``num_programs`` blocks of whole 128-row tiles."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows, cols = a.shape
    pmax = nl.tile_size.pmax
    programs = nl.num_programs(axes=0)
    rows_per_program = rows // programs
    assert rows_per_program * programs == rows and rows_per_program % pmax == 0, (
        f"{rows} rows do not split into {programs} programs of whole {pmax}-row tiles"
    )
    base = nl.program_id(axis=0) * rows_per_program
    for i in nl.affine_range(rows_per_program // pmax):
        rows_here = nl.ds(base + i * pmax, pmax)
        ta = nl.ndarray((pmax, cols), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((pmax, cols), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[rows_here, :])
        nisa.dma_copy(dst=tb, src=b[rows_here, :])
        tc = nl.ndarray((pmax, cols), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[rows_here, :], src=tc)
    return out
