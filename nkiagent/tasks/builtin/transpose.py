"""transpose: out = xᵀ for a (2048, 1024) fp32 matrix — pure data movement (level 1).

No arithmetic at all: the work is getting 128 × 128 blocks across the partition dimension
(TensorE ``nc_transpose`` into PSUM, or a DMA transpose) while keeping the HBM reads and
writes in long contiguous runs. Every route moves values unchanged, so the answer must be
exact.
"""

import numpy as np

from nkiagent.tasks.spec import InputSpec, OutputSpec, Task, Tolerance


def reference(x: np.ndarray) -> np.ndarray:
    """A contiguous copy of xᵀ."""
    return np.ascontiguousarray(x.T)


TASK = Task(
    name="transpose",
    description="Transpose of an fp32 matrix: out[C, R] = x[R, C]ᵀ.",
    inputs=[InputSpec("x", ("R", "C"), "float32")],
    output=OutputSpec(("C", "R"), "float32"),
    reference=reference,
    dims={"R": 2048, "C": 1024},
    hidden_dims=[{"R": 1024, "C": 1024}, {"R": 640, "C": 1536}, {"R": 2176, "C": 1152}],
    tolerance=Tolerance(rtol=0.0, atol=0.0),
    constraints="R % 128 == 0, C % 128 == 0",
    baseline="baselines/transpose.py",
    level=1,
    tags=("data-movement", "transpose", "memory-bound"),
)
