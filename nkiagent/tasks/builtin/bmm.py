"""bmm: a batch of independent matrix products, bf16 operands, fp32 result.

Unlike ``matmul``, the left operand arrives row-major (``a[b, m, k]``), so the contraction
dim is on the free axis and every block of ``a`` must be transposed (TensorE or DMA) before
TensorE can use it. Per batch the products are small, so data movement — DMA sizes,
keeping operands resident, overlapping batches — decides the speed.
"""

import numpy as np

from nkiagent.tasks.spec import InputSpec, OutputSpec, Task, Tolerance


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """bf16 values are exact in fp32; fp32 BLAS sums them ~1e-7 off, far inside the tolerance."""
    return np.matmul(a.astype(np.float32), b.astype(np.float32))


TASK = Task(
    name="bmm",
    description="Batched matrix product of bf16 operands with fp32 accumulation: out[b] = a[b] · b[b], returned in fp32.",
    inputs=[
        InputSpec("a", ("B", "M", "K"), "bfloat16", layout="row-major [B, M, K]: the contraction dim K is innermost"),
        InputSpec("b", ("B", "K", "N"), "bfloat16", layout="row-major [B, K, N]: K-major per batch"),
    ],
    output=OutputSpec(("B", "M", "N"), "float32"),
    reference=reference,
    dims={"B": 8, "M": 256, "K": 512, "N": 512},
    hidden_dims=[{"B": 2, "M": 128, "K": 256, "N": 512}, {"B": 3, "M": 384, "K": 384, "N": 512}, {"B": 9, "M": 384, "K": 640, "N": 1024}],
    # Same reasoning as matmul: exact bf16 inputs, fp32 accumulation ~1e-7; bf16 results fail.
    tolerance=Tolerance(rel_l2=1e-4),
    constraints="M % 128 == 0, K % 128 == 0, N % 512 == 0",
    flops=lambda d: 2 * d["B"] * d["M"] * d["K"] * d["N"],
    baseline="baselines/bmm.py",
    level=2,
    tags=("matmul", "batched", "tensor-engine", "transpose", "bf16"),
)
