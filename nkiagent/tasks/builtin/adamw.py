"""adamw: one fused AdamW optimizer step over fp32 tensors, returning param, m and v stacked.

Four input streams and three output streams per element with a dozen flops between them,
including a square root and a reciprocal: memory-bound on paper, but a naive kernel that
spends one VectorE pass per operation (and VectorE's slow reciprocal) is engine-bound. The
work spreads over ScalarE (scaled squares, sqrt, reciprocal), VectorE and GpSimd.
Hyperparameters are fixed: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01, and
this is step 10 (bias corrections 1 - 0.9¹⁰ and 1 - 0.999¹⁰).
"""

import numpy as np

from nkiagent.tasks.spec import InputSpec, OutputSpec, Task, Tolerance

LR, BETA1, BETA2, EPS, WEIGHT_DECAY, STEP = 1e-3, 0.9, 0.999, 1e-8, 0.01, 10


def reference(param: np.ndarray, grad: np.ndarray, exp_avg: np.ndarray, exp_avg_sq: np.ndarray) -> np.ndarray:
    """``torch.optim.AdamW``'s update in fp64: decoupled weight decay, bias-corrected moments."""
    p, g = param.astype(np.float64), grad.astype(np.float64)
    m = BETA1 * exp_avg.astype(np.float64) + (1 - BETA1) * g
    v = BETA2 * exp_avg_sq.astype(np.float64) + (1 - BETA2) * g * g
    denom = np.sqrt(v / (1 - BETA2**STEP)) + EPS
    p_new = p * (1 - LR * WEIGHT_DECAY) - LR / (1 - BETA1**STEP) * m / denom
    return np.stack([p_new, m, v]).astype(np.float32)


_HYPER = f"lr={LR}, beta1={BETA1}, beta2={BETA2}, eps={EPS}, weight_decay={WEIGHT_DECAY}, step={STEP}"

TASK = Task(
    name="adamw",
    description=(
        f"One AdamW step ({_HYPER}): m = beta1·exp_avg + (1-beta1)·grad; v = beta2·exp_avg_sq + (1-beta2)·grad²; "
        "param' = param·(1 - lr·weight_decay) - lr/(1-beta1^step) · m / (sqrt(v/(1-beta2^step)) + eps). "
        "Returns stack([param', m, v]) of shape [3, N, D], fp32."
    ),
    inputs=[
        InputSpec("param", ("N", "D"), "float32", layout="row-major [N, D]"),
        InputSpec("grad", ("N", "D"), "float32", layout="row-major [N, D]"),
        InputSpec("exp_avg", ("N", "D"), "float32", layout="row-major [N, D]: first moment before the step"),
        InputSpec("exp_avg_sq", ("N", "D"), "float32", layout="row-major [N, D]: second moment before the step", domain="nonnegative"),
    ],
    output=OutputSpec((3, "N", "D"), "float32"),
    reference=reference,
    dims={"N": 512, "D": 1024},
    hidden_dims=[{"N": 256, "D": 512}, {"N": 128, "D": 1536}, {"N": 640, "D": 1536}],
    # fp32 arithmetic in any order stays within a few ulps of the fp64 reference.
    tolerance=Tolerance(rtol=1e-5, atol=1e-5),
    constraints="N % 128 == 0, D % 512 == 0",
    # Speed of light from HBM alone: every operation can run on VectorE, ScalarE or GpSimd, so no
    # per-engine element count is a lower bound.
    baseline="baselines/adamw.py",
    distributions=("normal", "heavy_tailed", "large", "constant_rows"),
    level=2,
    tags=("optimizer", "elementwise", "fused", "memory-bound", "scalar-engine"),
)
