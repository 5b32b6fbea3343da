"""`nkiagent task new` turns the user's own NumPy/PyTorch code into a task that the verifier uses."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from nkiagent.cli import main
from nkiagent.tasks import load_task_file
from nkiagent.verify.verifier import VerifyOptions, verify

MODEL = """
import numpy as np
import torch

class Gate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(256, 128, bias=False)

    def forward(self, x):
        return torch.sigmoid(self.proj(x))

def double(x):
    return x * np.float32(2.0)
"""

KERNEL = """
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        t = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128, :])
        u = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=u, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=u)
    return out
"""


@pytest.fixture()
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(MODEL))
    return path


def test_task_from_torch_module_uses_fixed_weights_and_valid_hidden_shapes(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tasks" / "gate.py"
    assert main(["task", "new", "--from", f"{model}:Gate", "--inputs", "x:512x256:float32", "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    task = load_task_file(out)
    assert task.name == "gate" and task.output_shape() == (512, 128) and task.output.dtype == "float32"
    assert task.hidden_dims and all(h["X1"] == 256 for h in task.hidden_dims)  # feature dim is fixed by the weights
    x = np.random.default_rng(1).standard_normal((512, 256)).astype(np.float32)
    torch.manual_seed(0)
    expect = torch.sigmoid(torch.nn.Linear(256, 128, bias=False)(torch.from_numpy(x))).detach().numpy()
    np.testing.assert_allclose(task.reference(x), expect, rtol=1e-6)
    for dims in task.all_dims():
        shape = task.input_shapes(dims)[0]
        assert task.reference(np.zeros(shape, np.float32)).shape == task.output_shape(dims)


def test_kernel_for_a_user_numpy_function_passes_verification(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "double.py"
    assert main(["task", "new", "--from", f"{model}:double", "--inputs", "x:512x256:float32", "--out", str(out)]) == 0
    kernel = tmp_path / "kernel.py"
    kernel.write_text(textwrap.dedent(KERNEL))
    res = verify(kernel, load_task_file(out), "trn2", VerifyOptions(seeds=2))
    assert res.verdict == "pass", res.reasons
    assert res.latency_us and res.timing_source == "emulator-estimate" and res.speedup is None  # user tasks have no baseline


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--from", "MODEL:nope", "--inputs", "x:4:float32"], "has no attribute 'nope'"),
        (["--from", "MODEL:double", "--inputs", "x:4x:float32"], "must look like NAME:DIMxDIM:DTYPE"),
        (["--from", "MODEL:double", "--inputs", "x:4:float77"], "unknown dtype 'float77'"),
        (["--from", "missing.py:f", "--inputs", "x:4:float32"], "no such file: missing.py"),
    ],
)
def test_bad_input_is_a_usage_error_naming_the_problem(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    argv = [a.replace("MODEL", str(model)) for a in argv]
    assert main(["task", "new", *argv, "--out", str(tmp_path / "t.py")]) == 2
    assert message in capsys.readouterr().err
