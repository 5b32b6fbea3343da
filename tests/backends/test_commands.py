"""`nkiagent crosscheck` and `nkiagent integrate`, on the fake toolchain and on a machine without Neuron software."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nkiagent.commands.crosscheck import crosscheck, render_report
from nkiagent.commands.integrate import resolve_kernel, run_integrate
from nkiagent.tasks import get_task

from .conftest import FakeNeuron

ROOT = Path(__file__).resolve().parents[2]
VECTOR_ADD = ROOT / "nkiagent" / "tasks" / "builtin" / "baselines" / "vector_add.py"


def test_crosscheck_reports_estimate_against_measurement(fake_neuron: FakeNeuron, monkeypatch: pytest.MonkeyPatch) -> None:
    from nkiagent.backends import NeuronBackend

    monkeypatch.setenv("NKI_FAKE_TIMES", "20")
    from nkiagent.verify.verifier import VerifyOptions

    real = NeuronBackend("neuron-hw", fake_neuron.toolchain(), warmup=0, captures=2)
    report = crosscheck(VECTOR_ADD, get_task("vector_add"), "trn2", real, VerifyOptions(seeds=1, distributions=("normal",), hidden=False))
    emu, hw = report["sides"]["emulator"], report["sides"]["real"]
    assert (emu["verdict"], emu["timing_source"], hw["verdict"], hw["timing_source"], hw["latency_us"]) == (
        "pass", "emulator-estimate", "pass", "neuron-profile", 20.0)
    assert report["numerics"]["identical"] is True  # the fake's "hardware" computes with the emulator
    ratio = round(emu["latency_us"] / 20.0, 4)
    assert report["latency_ratio_estimate_over_measured"] == ratio
    assert report["differences"] == [f"latency: emulator estimate {emu['latency_us']:.3f} µs vs measured 20.000 µs (estimate / measured = {ratio:.3f})"]
    text = render_report(report)
    assert "| | emulator | neuron-hw |" in text and "| verdict | pass | pass |" in text
    assert "| measurement spread | — | 0.00% over 2 captures |" in text


def test_crosscheck_without_neuron_runs_the_emulator_side(no_neuron: Path) -> None:
    from nkiagent.backends import get_backend
    from nkiagent.verify.verifier import VerifyOptions

    assert get_backend("auto").name == "emulator"  # what `nkiagent crosscheck` resolves to here: no real side
    report = crosscheck(VECTOR_ADD, get_task("vector_add"), "trn2", None, VerifyOptions(seeds=1, distributions=("normal",), hidden=False))
    text = render_report(report)
    assert "| | emulator |" in text and "| verdict | pass |" in text
    assert report["differences"] == ["no real Neuron toolchain on this machine: only the emulator was run (see `nkiagent doctor`)"]


def _integrate(source: str, into: str, inputs: str | None, sessions_dir: str = "sessions", task: str | None = None) -> int:
    return run_integrate(argparse.Namespace(source=source, into=into, inputs=inputs, task=task, sessions_dir=sessions_dir))


def test_integrate_writes_a_wrapper_whose_fallback_passes_its_generated_test(no_neuron: Path, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "model.py").write_text("import numpy as np\n\n\ndef add(a, b):\n    return np.add(a, b)\n\n\ndef sub(a, b):\n    return a - b\n")
    shapes = "a:128x512:float32,b:128x512:float32"
    assert _integrate(str(VECTOR_ADD), f"{proj / 'model.py'}:add", shapes) == 0
    assert _integrate(str(VECTOR_ADD), f"{proj / 'model.py'}:sub", shapes) == 0  # the wrong function: its test must fail
    assert sorted(p.name for p in proj.iterdir()) == ["model.py", "model_add_nki.py", "model_add_nki_kernel.py", "model_sub_nki.py",
                                                      "model_sub_nki_kernel.py", "test_model_add_nki.py", "test_model_sub_nki.py"]
    assert (proj / "model_add_nki_kernel.py").read_text() == VECTOR_ADD.read_text()
    assert (proj / "model.py").read_text().endswith("return a - b\n")  # the user's file is untouched
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", "test_model_add_nki.py", "test_model_sub_nki.py"],
                          cwd=proj, capture_output=True, text=True, env=dict(os.environ), timeout=300, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for outcome in ("PASSED test_model_add_nki.py::test_wrapper_matches_original", "PASSED test_model_add_nki.py::test_kernel_matches_original_on_simulator",
                    "PASSED test_model_sub_nki.py::test_wrapper_matches_original", "FAILED test_model_sub_nki.py::test_kernel_matches_original_on_simulator"):
        assert outcome in proc.stdout, proc.stdout
    assert "1 failed, 3 passed" in proc.stdout


def test_integrate_takes_a_sessions_best_passing_kernel(tmp_path: Path) -> None:
    sdir = tmp_path / "sessions" / "20261130-000000-abcdef"
    (sdir / "kernels").mkdir(parents=True)
    (sdir / "kernels" / "fast.py").write_text("# fast\n")
    (sdir / "kernels" / "slow.py").write_text("# slow\n")
    (sdir / "meta.json").write_text(json.dumps({"task": "vector_add"}))
    events = [{"type": "evaluation", "result": {"verdict": "pass", "latency_us": 9.0, "code_sha256": "slow", "timing_source": "emulator-estimate"}},
              {"type": "evaluation", "result": {"verdict": "fail", "latency_us": 1.0, "code_sha256": "broken"}},
              {"type": "evaluation", "result": {"verdict": "pass", "latency_us": 4.5, "code_sha256": "fast", "timing_source": "neuron-profile"}}]
    (sdir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    kernel, origin, task = resolve_kernel(sdir.name, str(tmp_path / "sessions"))
    assert (kernel, task) == (sdir / "kernels" / "fast.py", "vector_add")
    assert origin == "session 20261130-000000-abcdef (best pass, 4.500 µs neuron-profile)"
    with pytest.raises(FileNotFoundError, match="neither a kernel file nor a session"):
        resolve_kernel("nope", str(tmp_path / "sessions"))


def test_profile_on_hardware_reports_the_profilers_measurement(fake_neuron: FakeNeuron, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """`nkiagent profile --backend neuron-hw` times the kernel with (fake) neuron-profile instead of estimating it."""
    from nkiagent.cli import main

    monkeypatch.setenv("NKI_FAKE_TIMES", "20")
    rc = main(["profile", str(VECTOR_ADD), "--inputs", "a:256x512:float32,b:256x512:float32", "--backend", "neuron-hw", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["timing_source"] == "neuron-profile" and out["latency_us"] == 20.0
    assert out["measurement"]["median_us"] == 20.0 and out["measurement"]["stable"] is True
    assert len(fake_neuron.calls("nki.baremetal")) == 1 and fake_neuron.calls("neuron-profile capture") and fake_neuron.calls("neuron-profile view")
