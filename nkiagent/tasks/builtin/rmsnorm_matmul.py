"""rmsnorm_matmul: RMSNorm of fp32 rows followed by a projection with bf16 weights.

The fusion that starts every transformer block: ``out = (x / rms(x) · weight) @ w``. The
normalization is per row (rows of ``x`` live on partitions) while the matmul contracts over
the hidden dimension, which must be on partitions too — so an honest kernel transposes
the normalized rows (or reassociates the scales) and feeds TensorE with bf16 operands.
"""

import numpy as np

from nkiagent.tasks.spec import InputSpec, OutputSpec, Task, Tolerance

EPS = 1e-6


def reference(x: np.ndarray, weight: np.ndarray, w: np.ndarray) -> np.ndarray:
    """fp64 RMSNorm (eps 1e-6) times ``weight``; the product with the bf16 ``w`` in fp32 (~1e-7 relative L2)."""
    xf = x.astype(np.float64)
    normed = xf / np.sqrt(np.mean(xf * xf, axis=-1, keepdims=True) + EPS) * weight.astype(np.float64)
    return normed.astype(np.float32) @ w.astype(np.float32)


TASK = Task(
    name="rmsnorm_matmul",
    description=(
        "RMSNorm then projection: out = (x / sqrt(mean(x², axis=-1) + 1e-6) · weight) @ w, with x and weight in fp32, "
        "w in bf16 and an fp32 result."
    ),
    inputs=[
        InputSpec("x", ("N", "D"), "float32", layout="row-major [N, D]: one token per row, normalized over D"),
        InputSpec("weight", ("D",), "float32", layout="per-feature scale along D"),
        InputSpec("w", ("D", "F"), "bfloat16", layout="D-major (row-major [D, F]): the contraction dim first"),
    ],
    output=OutputSpec(("N", "F"), "float32"),
    reference=reference,
    dims={"N": 1024, "D": 2048, "F": 2048},
    hidden_dims=[{"N": 256, "D": 512, "F": 1024}, {"N": 384, "D": 1152, "F": 1536}, {"N": 1152, "D": 2176, "F": 2560}],
    # Rounding the normalized rows to bf16 for TensorE costs ~1e-3 relative L2 (2^-9 per
    # element, errors adding incoherently); fp8 operands (~3e-2) or skipped rows fail.
    tolerance=Tolerance(rel_l2=1e-2),
    constraints="N % 128 == 0, D % 128 == 0, F % 512 == 0",
    flops=lambda d: 2 * d["N"] * d["D"] * d["F"],
    baseline="baselines/rmsnorm_matmul.py",
    distributions=("normal", "heavy_tailed", "large", "constant_rows"),
    level=3,
    tags=("fused", "normalization", "matmul", "tensor-engine", "bf16"),
)
