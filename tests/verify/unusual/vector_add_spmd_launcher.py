"""HONEST: vector_add as a 2-D SPMD grid chosen from the shape by a host-side launcher; ragged last column block
STYLE: 1, 2
TASK: vector_add
BEFORE: on 064c209, before issue 18: fail, latency_us n/a, speedup n/a; first reason: NKI error [err_nested_kernel_with_spmd_grid] at vector_add_spmd_launcher.py:40: Calling kernel with spmd grid (_vadd_program[16, 2]) inside another kernel is not supported (shape(D=1024,N=2048) seed=0 dist=normal)

The standard NKI launch pattern: a plain Python `kernel(a, b)` picks the launch grid from the
input shape — (row tiles, column blocks of 768) — and launches the @nki.jit program with
`_vadd_program[grid](a, b)`. The last column program covers the ragged remainder (1024 →
768 + 256, 512 → 512, 1536 → 768 + 768). The program body uses nl.* only.
"""
import nki
import nki.language as nl

P = 128
COL_BLOCK = 768


def _grid(n: int, d: int, block: int) -> tuple:
    """(row programs, column programs) for an [n, d] matrix and a column block width."""
    return (n // P, (d + block - 1) // block)


@nki.jit
def _vadd_program(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    j = nl.program_id(1)
    rows = nl.ds(i * P, P)
    cols = nl.ds(j * COL_BLOCK, min(COL_BLOCK, d - j * COL_BLOCK))
    ta = nl.load(a[rows, cols])
    tb = nl.load(b[rows, cols])
    nl.store(out[rows, cols], ta + tb)
    return out


def kernel(a, b):
    """Host-side launcher: the grid depends on the shape, so it is chosen here, at launch."""
    n, d = a.shape
    return _vadd_program[_grid(n, d, COL_BLOCK)](a, b)


# WHY THIS IS LEGITIMATE NKI (appended after the code so the reason line numbers stay valid):
# Launching an @nki.jit program over an SPMD grid chosen from the input shape, from a plain Python
# entry point (`kernel(a, b)` → `_vadd_program[grid](a, b)`), is the standard NKI launch pattern
# (nki-samples launch `kernel[grid](...)` this way). The verifier instead enters a kernel context
# before calling the plain `kernel` function, so the launch becomes a "nested" kernel call and fails
# with err_nested_kernel_with_spmd_grid on every case. Called the way a host calls it (normal import,
# emulator), the file gives bit-exact results on all three task shapes. Only a module-level fixed grid
# (`kernel = prog[3]`, see vector_add_spmd_ragged/operator) is accepted, which cannot depend on the shape.
