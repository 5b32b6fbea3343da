"""End-to-end smoke test: the example kernel runs through ``nki.simulate`` and matches NumPy."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from nkiagent import emu


def _load_example(name: str):
    path = Path(__file__).resolve().parents[2] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_example_vector_add_matches_numpy_and_traces() -> None:
    import nki

    mod = _load_example("vector_add")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 256)).astype(np.float32)
    b = rng.standard_normal((512, 256)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(mod.vector_add)(a, b), a + b)
    trace = emu.Trace()
    emu.run_kernel(mod.vector_add, (a, b), trace=trace, target="trn1")
    assert trace.counts() == {"dma_copy": 12, "tensor_tensor": 4}
    assert trace.target == "trn1"
