"""causal_attention: single-head attention where query i sees keys 0 … i only.

Half of the score matrix is masked, so a good kernel skips the key blocks above the
diagonal on both products (about half of TensorE's work) and masks only the diagonal
blocks — with GpSimd's affine_select or by adding a precomputed mask. As in ``attention``,
the 'large' inputs make the softmax nearly one-hot: scores must come from fp32 q and k.
"""

import numpy as np

from nkiagent.tasks.spec import InputSpec, OutputSpec, Task, Tolerance


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """fp64 scores with the upper triangle at -inf, max-subtracted softmax, fp64 product with v."""
    scores = q.astype(np.float64) @ k.astype(np.float64).T / np.sqrt(q.shape[1])
    scores[np.triu_indices(scores.shape[0], 1)] = -np.inf
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (p @ v.astype(np.float64) / p.sum(axis=-1, keepdims=True)).astype(np.float32)


TASK = Task(
    name="causal_attention",
    description=(
        "Single-head causal attention: out = softmax(q · kᵀ / sqrt(D) + mask, axis=-1) · v where mask[i, j] = -inf for j > i "
        "(query i attends to keys 0 … i); all fp32 [S, D]."
    ),
    inputs=[
        InputSpec("q", ("S", "D"), "float32", layout="row-major [S, D]: query i is row i"),
        InputSpec("k", ("S", "D"), "float32", layout="row-major [S, D]: key j is row j"),
        InputSpec("v", ("S", "D"), "float32", layout="row-major [S, D]: value j is row j"),
    ],
    output=OutputSpec(("S", "D"), "float32"),
    reference=reference,
    dims={"S": 1024, "D": 128},
    hidden_dims=[{"S": 256, "D": 128}, {"S": 640, "D": 64}, {"S": 1152, "D": 128}],
    tolerance=Tolerance(rel_l2=1e-2),  # the attention task's budget: bf16 P and v, fp32 scores
    constraints="S % 128 == 0, D <= 128; fp32 scores (×1000 inputs make each row's softmax nearly one-hot), bf16 P·v is fine.",
    # the unmasked half: S·(S+1)/2 score entries, each needing D multiply-adds in both products
    flops=lambda d: 2 * d["S"] * (d["S"] + 1) * d["D"],
    fp32_flops=lambda d: d["S"] * (d["S"] + 1) * d["D"],  # the scores q · kᵀ of the unmasked half
    baseline="baselines/causal_attention.py",
    level=3,
    tags=("attention", "causal", "softmax", "fused", "tensor-engine", "gpsimd"),
)
