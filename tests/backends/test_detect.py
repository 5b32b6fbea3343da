"""Detection and backend selection against the fake Neuron software (our side of the contract only)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from nkiagent.backends import BackendUnavailable, detect, select_backend
from nkiagent.cli import main

from .conftest import FAKE, FakeNeuron


def test_detects_packages_compiler_devices_cores_and_profiler(fake_neuron: FakeNeuron) -> None:
    tc = fake_neuron.toolchain()
    assert tc.nki_version == "0.3.0"
    assert tc.neuronxcc_version == "2.21.33363.0+fake"
    assert tc.nki_path == str(FAKE / "python") and tc.package_paths() == [str(FAKE / "python")]
    assert tc.neuronx_cc == str(FAKE / "bin" / "neuronx-cc") and tc.neuronx_cc_version == "2.21.33363.0+fake"
    assert tc.devices == [str(fake_neuron.root / "dev" / "neuron0")]
    assert tc.neuron_cores == 2
    assert tc.neuron_profile == str(FAKE / "bin" / "neuron-profile") and tc.neuron_explorer == ""
    assert tc.has_simulator and tc.has_hardware
    assert tc.versions() == {"nki": "0.3.0", "neuronxcc": "2.21.33363.0+fake", "neuronx-cc": "2.21.33363.0+fake", "profiler": "neuron-profile"}
    assert select_backend("auto", tc) == "neuron-hw"
    assert select_backend("neuron-sim", tc) == "neuron-sim"
    assert select_backend("emulator", tc) == "emulator"


def test_core_count_comes_from_neuron_ls(fake_neuron: FakeNeuron, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NKI_FAKE_CORES", "8")
    assert fake_neuron.toolchain().neuron_cores == 8


def test_packages_without_devices_select_the_real_simulator(fake_neuron: FakeNeuron) -> None:
    (fake_neuron.root / "dev" / "neuron0").unlink()
    tc = fake_neuron.toolchain()
    assert tc.has_simulator and not tc.has_hardware and tc.neuron_cores == 0
    assert select_backend("auto", tc) == "neuron-sim"
    with pytest.raises(BackendUnavailable) as err:
        select_backend("neuron-hw", tc)
    assert str(err.value) == "--backend neuron-hw needs Neuron devices (/dev/neuron*) (run `nkiagent doctor`)"


def test_public_pypi_placeholder_nki_does_not_count(no_neuron: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(FAKE / "placeholder"))
    tc = detect(refresh=True)
    assert tc.nki_version == "" and not tc.has_simulator
    assert tc.notes == ["nki 0.0.1 found but it is not AWS's NKI ≥ 0.3 (no simulate / isa.nc_matmul, or too old)"]
    assert select_backend("auto", tc) == "emulator"
    with pytest.raises(BackendUnavailable) as err:
        select_backend("neuron-sim", tc)
    assert "neither was found" in str(err.value)


def test_nothing_installed_means_emulator(no_neuron: Path) -> None:
    tc = detect(refresh=True)
    assert not tc.has_simulator and not tc.has_hardware and tc.devices == [] and tc.versions() == {}
    assert select_backend("auto", tc) == "emulator"
    with pytest.raises(ValueError, match="unknown backend 'gpu'"):
        select_backend("gpu", tc)


def test_doctor_says_everything_runs_on_the_emulator(no_neuron: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "  nki (AWS, >= 0.3)            not found" in out
    assert "eval / run / crosscheck (--backend auto) -> emulator" in out
    assert "No Neuron software found: every command runs on the embedded emulator" in out


def test_doctor_reports_the_fake_trainium(fake_neuron: FakeNeuron, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["backends"]["eval"] == "neuron-hw" and data["backends"]["profile"] == "emulator"
    assert data["toolchain"]["neuron_cores"] == 2 and data["toolchain"]["has_hardware"] is True


def test_eval_refuses_an_absent_backend_with_a_clear_message(no_neuron: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kernel = Path(__file__).resolve().parents[2] / "nkiagent" / "tasks" / "builtin" / "baselines" / "vector_add.py"
    assert main(["eval", str(kernel), "--task", "vector_add", "--backend", "neuron-hw"]) == 2
    assert capsys.readouterr().err.strip() == ("nkiagent eval: --backend neuron-hw needs Neuron devices (/dev/neuron*), AWS's nki or neuronx-cc "
                                               "package, neuron-profile or neuron-explorer (run `nkiagent doctor`)")
    assert "NKIAGENT_BACKEND" not in os.environ
