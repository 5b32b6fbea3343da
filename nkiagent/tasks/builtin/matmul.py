"""matmul: lhsTᵀ · rhs for bf16 operands with an fp32 result — the TensorE workhorse.

``lhsT`` arrives K-major (the contraction dim first), which is exactly the layout
``nc_matmul`` wants for its stationary operand, so no transpose is needed: the task is
about feeding TensorE (tiling, hoisting and blocking the loads, accumulating K in PSUM).
"""

import numpy as np

from nkiagent.tasks.spec import InputSpec, OutputSpec, Task, Tolerance


def reference(lhsT: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """bf16 values and their products are exact in fp32; fp32 BLAS sums them ~1e-7 off (relative
    L2), a thousand times inside the tolerance and a few times faster than fp64 for the cache."""
    return lhsT.astype(np.float32).T @ rhs.astype(np.float32)


TASK = Task(
    name="matmul",
    description="Matrix product of bf16 operands with fp32 accumulation: out[M, N] = lhsT[K, M]ᵀ · rhs[K, N], returned in fp32.",
    inputs=[
        InputSpec("lhsT", ("K", "M"), "bfloat16", layout="K-major: lhsT[k, m] = A[m, k], the transposed left operand"),
        InputSpec("rhs", ("K", "N"), "bfloat16", layout="K-major (row-major [K, N])"),
    ],
    output=OutputSpec(("M", "N"), "float32"),
    reference=reference,
    dims={"K": 2048, "M": 1024, "N": 2048},
    hidden_dims=[{"K": 512, "M": 256, "N": 1024}, {"K": 1152, "M": 384, "N": 1536}, {"K": 2176, "M": 1152, "N": 2560}],
    # bf16 inputs are exact in fp32, so any fp32-accumulating kernel is ~1e-7 off; a bf16
    # result or bf16 accumulation (~1e-3) fails. Relative L2, because element-wise bounds are
    # meaningless for the near-zero entries of a sum of signed products.
    tolerance=Tolerance(rel_l2=1e-4),
    constraints="K % 128 == 0, M % 128 == 0, N % 512 == 0",
    flops=lambda d: 2 * d["K"] * d["M"] * d["N"],
    baseline="baselines/matmul.py",
    level=2,
    tags=("matmul", "tensor-engine", "bf16", "compute-bound"),
)
