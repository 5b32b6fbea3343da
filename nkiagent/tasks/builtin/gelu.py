"""gelu: the tanh approximation of GELU on a (1024, 2048) bf16 matrix (level 1).

``0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))``, as in GPT-2 and ``torch.nn.GELU(approximate="tanh")``.
Written out op by op it is a chain of VectorE passes; ScalarE has the whole function as one
activation (``gelu_apprx_tanh``). bf16-sized tolerance as for ``silu``.
"""

import math

import numpy as np

from nkiagent.tasks.spec import InputSpec, OutputSpec, Task, Tolerance


def reference(x: np.ndarray) -> np.ndarray:
    """The tanh approximation in float64 (tanh saturates, so 'large' inputs stay finite)."""
    xf = x.astype(np.float64)
    inner = math.sqrt(2.0 / math.pi) * (xf + 0.044715 * xf * xf * xf)
    return (0.5 * xf * (1.0 + np.tanh(inner))).astype(np.float32)


TASK = Task(
    name="gelu",
    description="GELU, tanh approximation, of a bf16 matrix: out = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), returned in bf16.",
    inputs=[InputSpec("x", ("N", "D"), "bfloat16")],
    output=OutputSpec(("N", "D"), "bfloat16"),
    reference=reference,
    dims={"N": 1024, "D": 2048},
    hidden_dims=[{"N": 384, "D": 1536}, {"N": 640, "D": 2560}, {"N": 1152, "D": 2560}],
    tolerance=Tolerance(rtol=1.6e-2, atol=1e-3),
    constraints="N % 128 == 0, D % 512 == 0",
    scalar_elems=lambda d: d["N"] * d["D"],
    baseline="baselines/gelu.py",
    level=1,
    tags=("elementwise", "activation", "bf16", "memory-bound"),
)
