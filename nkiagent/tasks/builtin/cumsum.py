"""cumsum: inclusive prefix sum along the last axis of (512, 2048) fp32 (level 2).

Level 2: a loop-carried dependence along each row (VectorE scans, carried across free-dim
tiles). An fp32 running sum drifts from the exact one by rounding that grows with the row
length and with cancellation (heavy-tailed rows), so element-wise bounds are meaningless
for the near-zero partial sums; the tolerance is relative L2 instead. 1e-5 is ~15× the
drift of a sequential fp32 scan on these inputs, while a bf16 running sum (~1e-2) fails.
"""

import numpy as np

from nkiagent.tasks.spec import InputSpec, OutputSpec, Task, Tolerance


def reference(x: np.ndarray) -> np.ndarray:
    """Exact (float64) prefix sums, returned as fp32."""
    return np.cumsum(x.astype(np.float64), axis=-1).astype(np.float32)


TASK = Task(
    name="cumsum",
    description="Inclusive cumulative sum over the last axis of an fp32 matrix: out[i, j] = Σ_{k ≤ j} x[i, k].",
    inputs=[InputSpec("x", ("N", "D"), "float32")],
    output=OutputSpec(("N", "D"), "float32"),
    reference=reference,
    dims={"N": 512, "D": 2048},
    hidden_dims=[{"N": 256, "D": 1024}, {"N": 384, "D": 3072}, {"N": 640, "D": 2560}],
    tolerance=Tolerance(rel_l2=1e-5),
    constraints="N % 128 == 0, D % 512 == 0",
    vector_elems=lambda d: d["N"] * d["D"],
    baseline="baselines/cumsum.py",
    level=2,
    tags=("scan", "memory-bound"),
)
