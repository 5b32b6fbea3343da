"""swiglu: the gated MLP of Llama-style transformers, bf16 weights, fp32 result.

``out = (silu(x·w_gate) ⊙ (x·w_up)) · w_down``: three matmuls on TensorE, SiLU on ScalarE
and the gating product on VectorE. Computing the hidden activations transposed
(``hᵀ = w_gateᵀ·xᵀ``, features on partitions) makes them the stationary operand of the down
projection directly, so only ``x`` ever needs a transpose.
"""

import numpy as np

from nkiagent.tasks.spec import InputSpec, OutputSpec, Task, Tolerance


def reference(x: np.ndarray, w_gate: np.ndarray, w_up: np.ndarray, w_down: np.ndarray) -> np.ndarray:
    """Products of the bf16 inputs in fp32 (exact products, ~1e-7 relative sums), the gating in fp64."""
    xf = x.astype(np.float32)
    gate = (xf @ w_gate.astype(np.float32)).astype(np.float64)
    with np.errstate(over="ignore"):
        hidden = gate / (1.0 + np.exp(-gate)) * (xf @ w_up.astype(np.float32))
    return hidden.astype(np.float32) @ w_down.astype(np.float32)


TASK = Task(
    name="swiglu",
    description=(
        "SwiGLU feed-forward block: out = (silu(x @ w_gate) * (x @ w_up)) @ w_down with silu(g) = g·sigmoid(g); "
        "bf16 inputs, fp32 accumulation, fp32 result."
    ),
    inputs=[
        InputSpec("x", ("N", "D"), "bfloat16", layout="row-major [N, D]: one token per row"),
        InputSpec("w_gate", ("D", "F"), "bfloat16", layout="D-major (row-major [D, F])"),
        InputSpec("w_up", ("D", "F"), "bfloat16", layout="D-major (row-major [D, F])"),
        InputSpec("w_down", ("F", "D"), "bfloat16", layout="F-major (row-major [F, D])"),
    ],
    output=OutputSpec(("N", "D"), "float32"),
    reference=reference,
    dims={"N": 512, "D": 1024, "F": 1024},
    hidden_dims=[{"N": 128, "D": 512, "F": 1024}, {"N": 256, "D": 512, "F": 1536}, {"N": 640, "D": 1536, "F": 1152}],
    # The hidden activations are rounded to bf16 for the down projection (~1e-3 relative L2).
    tolerance=Tolerance(rel_l2=1e-2),
    constraints="N % 128 == 0, D % 512 == 0, F % 128 == 0",
    flops=lambda d: 6 * d["N"] * d["D"] * d["F"],
    baseline="baselines/swiglu.py",
    level=3,
    tags=("mlp", "fused", "matmul", "tensor-engine", "scalar-engine", "bf16"),
)
