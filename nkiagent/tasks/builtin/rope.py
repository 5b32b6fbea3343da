"""rope: rotary position embedding, half-split (GPT-NeoX / Llama) form, in fp32 (level 1).

Each row of ``x`` is cut into halves ``x₁ = x[:, :H]`` and ``x₂ = x[:, H:]`` and rotated by the
per-position angles whose cosines and sines are given: ``out = [x₁·cos − x₂·sin, x₂·cos + x₁·sin]``.
Four products and two sums per pair of elements, all on the vector engines, with five HBM
streams: memory-bound on paper, but four fp32 multiplies per pair make VectorE the wall for a
naive kernel. The sums may cancel, so the element-wise bound leans on the RMS-scaled atol.
"""

import numpy as np

from nkiagent.tasks.spec import InputSpec, OutputSpec, Task, Tolerance


def reference(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """The rotation in float64, returned as fp32."""
    xf, c, s = x.astype(np.float64), cos.astype(np.float64), sin.astype(np.float64)
    h = c.shape[-1]
    x1, x2 = xf[:, :h], xf[:, h:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1).astype(np.float32)


TASK = Task(
    name="rope",
    description=(
        "Rotary position embedding (half-split form) of fp32 rows: with H = D/2, x1 = x[:, :H], x2 = x[:, H:], "
        "out = concat(x1·cos − x2·sin, x2·cos + x1·sin) along the last axis."
    ),
    inputs=[
        InputSpec("x", ("N", "D"), "float32", layout="row-major [N, D]; D = 2·H"),
        InputSpec("cos", ("N", "H"), "float32", layout="row-major [N, H]: cos of each position's angles"),
        InputSpec("sin", ("N", "H"), "float32", layout="row-major [N, H]: sin of each position's angles"),
    ],
    output=OutputSpec(("N", "D"), "float32"),
    reference=reference,
    dims={"N": 2048, "D": 1024, "H": 512},
    hidden_dims=[{"N": 256, "D": 512, "H": 256}, {"N": 640, "D": 1536, "H": 768}, {"N": 2176, "D": 1536, "H": 768}],
    tolerance=Tolerance(rtol=1e-5, atol=1e-5),
    constraints="N % 128 == 0, D == 2·H, H % 256 == 0",
    vector_elems=lambda d: d["N"] * d["D"],
    baseline="baselines/rope.py",
    level=1,
    tags=("elementwise", "positional-embedding", "memory-bound"),
)
