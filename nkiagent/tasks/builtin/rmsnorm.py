"""rmsnorm: x / sqrt(mean(x², -1) + 1e-6) · weight for (2048, 2048) fp32 (level 2).

Level 2: a row reduction feeds the elementwise pass, and the weight vector must reach all
128 partitions (a broadcast DMA) once, not once per row tile.
"""

import numpy as np

from nkiagent.tasks.spec import InputSpec, OutputSpec, Task, Tolerance

EPS = 1e-6


def reference(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """RMSNorm in float64, returned as fp32."""
    xf = x.astype(np.float64)
    inv_rms = 1.0 / np.sqrt(np.einsum("...d,...d->...", xf, xf)[..., None] / x.shape[-1] + EPS)
    xf *= inv_rms
    xf *= weight.astype(np.float64)
    return xf.astype(np.float32)


TASK = Task(
    name="rmsnorm",
    description="RMSNorm over the last axis: out = x / sqrt(mean(x², axis=-1) + 1e-6) · weight, fp32.",
    inputs=[InputSpec("x", ("N", "D"), "float32"), InputSpec("weight", ("D",), "float32")],
    output=OutputSpec(("N", "D"), "float32"),
    reference=reference,
    dims={"N": 2048, "D": 2048},
    hidden_dims=[{"N": 512, "D": 1024}, {"N": 768, "D": 1536}, {"N": 2176, "D": 2560}],
    tolerance=Tolerance(rtol=1e-4, atol=1e-5),
    constraints="N % 128 == 0, D % 512 == 0",
    vector_elems=lambda d: d["N"] * d["D"],
    baseline="baselines/rmsnorm.py",
    distributions=("normal", "heavy_tailed", "large", "constant_rows"),
    level=2,
    tags=("reduction", "normalization", "memory-bound"),
)
