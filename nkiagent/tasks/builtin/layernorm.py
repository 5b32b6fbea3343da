"""layernorm: LayerNorm over the last axis of (2048, 2048) fp32, eps 1e-5 (level 2).

``(x − mean) / sqrt(var + eps) · weight + bias`` with the biased variance, as
``torch.nn.LayerNorm``. Level 2: two row statistics (VectorE ``bn_stats``/``bn_aggr`` give both
in one pass) feed the elementwise pass; weight and bias are broadcast to all partitions.
"""

import numpy as np

from nkiagent.tasks.spec import InputSpec, OutputSpec, Task, Tolerance

EPS = 1e-5


def reference(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Two-pass mean and variance in float64, returned as fp32."""
    xf = x.astype(np.float64)
    centred = xf - xf.mean(axis=-1, keepdims=True)
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    return (centred / np.sqrt(var + EPS) * weight.astype(np.float64) + bias.astype(np.float64)).astype(np.float32)


TASK = Task(
    name="layernorm",
    description="LayerNorm over the last axis: out = (x − mean) / sqrt(var + 1e-5) · weight + bias (biased variance), fp32.",
    inputs=[InputSpec("x", ("N", "D"), "float32"), InputSpec("weight", ("D",), "float32"), InputSpec("bias", ("D",), "float32")],
    output=OutputSpec(("N", "D"), "float32"),
    reference=reference,
    dims={"N": 2048, "D": 2048},
    hidden_dims=[{"N": 384, "D": 1536}, {"N": 768, "D": 1024}, {"N": 2176, "D": 2560}],
    tolerance=Tolerance(rtol=1e-4, atol=1e-5),
    constraints="N % 128 == 0, D % 512 == 0",
    vector_elems=lambda d: d["N"] * d["D"],
    baseline="baselines/layernorm.py",
    distributions=("normal", "heavy_tailed", "large", "offset", "constant_rows"),
    level=2,
    tags=("reduction", "normalization", "memory-bound"),
)
