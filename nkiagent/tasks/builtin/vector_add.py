"""vector_add: a + b for (2048, 1024) fp32 — the smallest memory-bound task (level 1).

Three HBM streams (two loads, one store) and one VectorE add per element: the whole game
is DMA size and overlap. fp32 addition is exact up to one rounding, which the reference
reproduces bit for bit, so the tolerance is tight.
"""

import numpy as np

from nkiagent.tasks.spec import InputSpec, OutputSpec, Task, Tolerance


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fp32 sum: the exact result rounded once, as any correct kernel produces it."""
    return a + b


TASK = Task(
    name="vector_add",
    description="Element-wise sum of two fp32 matrices: out = a + b.",
    inputs=[InputSpec("a", ("N", "D"), "float32"), InputSpec("b", ("N", "D"), "float32")],
    output=OutputSpec(("N", "D"), "float32"),
    reference=reference,
    dims={"N": 2048, "D": 1024},
    hidden_dims=[{"N": 256, "D": 512}, {"N": 1024, "D": 1536}, {"N": 2176, "D": 1536}],
    tolerance=Tolerance(rtol=1e-6, atol=1e-6),
    constraints="N % 128 == 0, D % 512 == 0",
    vector_elems=lambda d: d["N"] * d["D"],
    baseline="baselines/vector_add.py",
    level=1,
    tags=("elementwise", "memory-bound"),
)
