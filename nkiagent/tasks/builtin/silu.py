"""silu: x·sigmoid(x) on a (2048, 2048) bf16 matrix — a memory-bound activation in 16-bit (level 1).

Rounding the result to bf16 alone costs up to 2⁻⁸ ≈ 0.4% relative error, and a kernel may
reasonably keep a bf16 intermediate (twice that), so the tolerance is torch.testing's bf16
default (rtol 1.6e-2); an fp8 result (≈ 6%) still fails. The reference works in float64
from the bf16 inputs and returns fp32, so it carries no rounding of its own.
"""

import numpy as np

from nkiagent.tasks.spec import InputSpec, OutputSpec, Task, Tolerance


def reference(x: np.ndarray) -> np.ndarray:
    """x / (1 + e⁻ˣ) in float64 (e⁻ˣ may overflow to inf for x ≪ 0, which correctly gives 0)."""
    xf = x.astype(np.float64)
    with np.errstate(over="ignore"):
        return (xf / (1.0 + np.exp(-xf))).astype(np.float32)


TASK = Task(
    name="silu",
    description="SiLU (swish) of a bf16 matrix: out = x · sigmoid(x), returned in bf16.",
    inputs=[InputSpec("x", ("N", "D"), "bfloat16")],
    output=OutputSpec(("N", "D"), "bfloat16"),
    reference=reference,
    dims={"N": 2048, "D": 2048},
    hidden_dims=[{"N": 512, "D": 1024}, {"N": 768, "D": 1536}, {"N": 2176, "D": 2560}],
    tolerance=Tolerance(rtol=1.6e-2, atol=1e-3),
    constraints="N % 128 == 0, D % 512 == 0",
    scalar_elems=lambda d: d["N"] * d["D"],
    baseline="baselines/silu.py",
    level=1,
    tags=("elementwise", "activation", "bf16", "memory-bound"),
)
