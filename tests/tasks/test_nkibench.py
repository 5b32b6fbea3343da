"""The NKIBench loader reads a checkout's layout (summary.json, references, kernels) as it is.

The checkout here is a miniature written by the test in NKIBench's documented layout, with
our own tiny reference and kernel: no AccelOpt code is used or copied.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from nkiagent.cli import main
from nkiagent.tasks.nkibench import NKIBENCH_REL_L2, load_nkibench
from nkiagent.verify.verifier import VerifyOptions, verify

REFERENCE = """
import numpy as np

M = 256
N = 512

def get_inputs():
    x = np.abs(np.random.normal(loc=0, scale=1.0, size=(M, N))).astype(np.float32)
    return [x]

def forward(x):
    return np.sqrt(x) * 2

def transform_to_nki_inputs(inputs):
    return [np.reshape(inputs[0], (2, 128, 512))]
"""

KERNEL = """
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(x):
    out = nl.ndarray((2, 128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(2):
        t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[b])
        u = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.activation(dst=u, op=nl.sqrt, data=t, scale=4.0)
        nisa.dma_copy(dst=out[b], src=u)
    return out
"""


@pytest.fixture()
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    bench = tmp_path / "AccelOpt" / "NKIBench"
    (bench / "reference").mkdir(parents=True)
    (bench / "kernels").mkdir()
    (bench / "reference" / "sqrt2_M256_N512_numpy_1.py").write_text(textwrap.dedent(REFERENCE))
    (bench / "kernels" / "sqrt2_M256_N512_0.py").write_text(textwrap.dedent(KERNEL))
    summary = {
        "sqrt2": {
            "seed": "./seeds/sqrt2.yaml",
            "cases": {
                "1": {
                    "values": {"M": 256, "N": 512},
                    "impls": [{"task": "./reference/sqrt2_M256_N512_numpy_1.py", "kernel": "./kernels/sqrt2_M256_N512_0.py"}],
                }
            },
        }
    }
    (bench / "summary.json").write_text(json.dumps(summary))
    return tmp_path / "AccelOpt"


def test_loader_maps_layouts_inputs_and_tolerance(checkout: Path) -> None:
    task = load_nkibench(checkout)["sqrt2"]
    assert task.name == "nkibench/sqrt2" and task.tolerance.rel_l2 == NKIBENCH_REL_L2 == 2e-5
    assert [s.shape for s in task.inputs] == [(2, 128, 512)] and task.output.shape == (256, 512)
    (x,) = task.generate(3)
    assert x.shape == (2, 128, 512) and (x >= 0).all()  # the reference's own input semantics (abs)
    np.testing.assert_array_equal(task.generate(3)[0], x)  # seeded: reproducible
    assert not np.array_equal(task.generate(4)[0], x)
    np.testing.assert_allclose(task.reference(x), np.sqrt(x.reshape(256, 512)) * 2, rtol=1e-6)
    assert task.baseline_path().name == "sqrt2_M256_N512_0.py"
    cached = list((checkout.parent / "cache" / "nkiagent").glob("nkibench-*.json"))
    assert len(cached) == 1  # the signature is cached: the next load runs nothing


def test_benchmark_kernel_passes_and_is_its_own_baseline(checkout: Path) -> None:
    task = load_nkibench(checkout)["sqrt2"]
    res = verify(task.baseline_path(), task, "trn1", VerifyOptions(seeds=2))
    assert res.verdict == "pass", res.reasons
    assert res.speedup == 1.0 and res.checks[-1].name == "speed_of_light"


def test_cli_lists_and_evaluates_the_suite(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "--suite", "nkibench", "--nkibench-dir", str(checkout)]) == 0
    assert "nkibench/sqrt2" in capsys.readouterr().out
    kernel = str(checkout / "NKIBench" / "kernels" / "sqrt2_M256_N512_0.py")
    assert main(["eval", kernel, "--task", "sqrt2", "--suite", "nkibench", "--nkibench-dir", str(checkout), "--seeds", "1"]) == 0
    assert main(["eval", kernel, "--task", "nope", "--suite", "nkibench", "--nkibench-dir", str(checkout)]) == 2
    assert "unknown NKIBench task(s) nope" in capsys.readouterr().err
