"""softmax: row softmax of a (1024, 2048) fp32 matrix (level 2).

Level 2 rather than 1: each row needs a reduction (max, then sum) before its elementwise
pass, so the kernel must keep a whole row on chip or do two passes. The reference subtracts
the row max in float64, so it is exact for the 'large' (×1000) and heavy-tailed inputs where a
naive exp overflows; a kernel must do the same to pass.
"""

import numpy as np

from nkiagent.tasks.spec import InputSpec, OutputSpec, Task, Tolerance


def reference(x: np.ndarray) -> np.ndarray:
    """exp(x − max) / Σ exp(x − max) along the last axis, in float64."""
    xf = x.astype(np.float64)
    e = np.exp(xf - xf.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


TASK = Task(
    name="softmax",
    description="Softmax over the last axis of an fp32 matrix: out[i, j] = exp(x[i, j]) / Σ_k exp(x[i, k]).",
    inputs=[InputSpec("x", ("N", "D"), "float32")],
    output=OutputSpec(("N", "D"), "float32"),
    reference=reference,
    dims={"N": 1024, "D": 2048},
    hidden_dims=[{"N": 256, "D": 3072}, {"N": 1280, "D": 1024}, {"N": 1152, "D": 2560}],
    tolerance=Tolerance(rtol=1e-4, atol=1e-5),
    constraints="N % 128 == 0, D % 512 == 0",
    vector_elems=lambda d: d["N"] * d["D"],
    scalar_elems=lambda d: d["N"] * d["D"],
    baseline="baselines/softmax.py",
    level=2,
    tags=("reduction", "normalization", "memory-bound"),
)
