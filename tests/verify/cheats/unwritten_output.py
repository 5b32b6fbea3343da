"""CHEAT: no-op kernel returning a fresh output buffer (result-reuse)
ROW: A6
TASK: layernorm
EXPECT: fail
REASON: never written

KernelBench's ``result_reuse_kernel``: allocate the output and return it untouched,
hoping the allocator hands back the block where the reference's output still lies.
"""

import nki
import nki.language as nl


@nki.jit
def kernel(x, weight, bias):
    return nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
