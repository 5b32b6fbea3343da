"""vector_add: a + b for (2048, 1024) fp32 — the smallest memory-bound task."""

from nkiagent.tasks.spec import InputSpec, OutputSpec, Task, Tolerance


def reference(a, b):
    return a + b


TASK = Task(
    name="vector_add",
    description="Element-wise sum of two fp32 matrices: out = a + b.",
    inputs=[InputSpec("a", ("N", "D"), "float32"), InputSpec("b", ("N", "D"), "float32")],
    output=OutputSpec(("N", "D"), "float32"),
    reference=reference,
    dims={"N": 2048, "D": 1024},
    hidden_dims=[{"N": 256, "D": 512}, {"N": 1024, "D": 1536}],
    tolerance=Tolerance(rtol=1e-6, atol=1e-6),
    constraints="N % 128 == 0",
    vector_elems=lambda d: d["N"] * d["D"],
    baseline="baselines/vector_add.py",
    level=1,
    tags=("elementwise", "memory-bound"),
)
