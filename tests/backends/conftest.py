"""Fixtures for the backend contract tests: a machine with the fake Neuron software, or with none.

These tests check nkiagent's side of the contract with AWS's tools — what it detects, which
backend it picks, how it maps compiler errors, parses profiler summaries, pins cores and caches
artifacts — against the fakes in ``tests/fixtures/neuron_fake`` (labelled fixtures). They do not
test AWS's tools.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from nkiagent.backends import Toolchain, detect

FAKE = Path(__file__).resolve().parents[1] / "fixtures" / "neuron_fake"


class FakeNeuron:
    """The environment of a Trainium machine made of fixtures, and the calls its tools recorded."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log_path = root / "calls.jsonl"

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        rows = [json.loads(line) for line in self.log_path.read_text().splitlines() if line.strip()]
        return [r for r in rows if tool is None or r["tool"] == tool]

    def toolchain(self) -> Toolchain:
        return detect()


def _base_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("NKIAGENT_NEURON_DEVICES", str(tmp_path / "dev" / "neuron*"))
    monkeypatch.setenv("NKI_FAKE_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.delenv("NKIAGENT_BACKEND", raising=False)
    (tmp_path / "dev").mkdir()


@pytest.fixture
def fake_neuron(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNeuron:
    """Fake nki 0.3 + neuronxcc packages, neuronx-cc / neuron-ls / neuron-profile, and one device with 2 cores."""
    _base_env(monkeypatch, tmp_path)
    (tmp_path / "dev" / "neuron0").touch()
    monkeypatch.setenv("PATH", f"{FAKE / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", str(FAKE / "python"))
    monkeypatch.setenv("NKI_FAKE_CORES", "2")
    return FakeNeuron(tmp_path)


@pytest.fixture
def no_neuron(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A machine without any Neuron software (no fake on PATH or PYTHONPATH, no devices)."""
    _base_env(monkeypatch, tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    return tmp_path
