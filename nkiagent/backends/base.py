"""The one backend interface, its result, and how a backend is chosen.

``Backend.run(kernel_source, inputs, target) -> RunResult`` runs one kernel on one set of
NumPy inputs, out of the caller's process, and says where every number came from.
Names: ``emulator`` (the embedded emulator and cost model), ``neuron-sim`` (AWS's
``nki.simulate`` / ``simulate_kernel``), ``neuron-hw`` (a Trainium device, timed with
``neuron-profile``); ``auto`` resolves to the best one this machine has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .detect import Toolchain

__all__ = ["BACKEND_CHOICES", "Backend", "BackendUnavailable", "RunResult", "detect_api", "select_backend"]

BACKEND_CHOICES = ("auto", "emulator", "neuron-sim", "neuron-hw")


class BackendUnavailable(RuntimeError):
    """The requested backend needs Neuron software this machine does not have."""


@dataclass
class RunResult:
    """One run of a kernel: outputs or an error, and, when timed, latency with its source."""

    backend: str
    target: str
    outputs: list[np.ndarray] = field(default_factory=list)
    error: dict[str, Any] | None = None  #: ``kind``, ``type``/``code``, ``message``, ``location``
    latency_us: float | None = None
    timing_source: str = ""  #: ``emulator-estimate`` or ``neuron-profile``
    profile: Any = None  #: a :class:`nkiagent.perf.Profile` when timed
    toolchain: dict[str, str] = field(default_factory=dict)
    measurement: dict[str, Any] = field(default_factory=dict)  #: hardware: captures, median, spread, cache hit …

    @property
    def ok(self) -> bool:
        return self.error is None


class Backend(Protocol):
    """Runs kernels; implemented by :class:`EmulatorBackend` and :class:`NeuronBackend`."""

    name: str

    def run(self, kernel_source: str, inputs: list[np.ndarray], target: str, *, kernel_name: str | None = None,
            timed: bool = True) -> RunResult: ...

    def versions(self) -> dict[str, str]: ...


def detect_api(source: str) -> str:
    """``0.1`` for legacy ``neuronxcc.nki`` kernels, else ``0.3``."""
    return "0.1" if "neuronxcc" in source else "0.3"


def select_backend(requested: str, toolchain: Toolchain) -> str:
    """Resolve ``requested`` (one of :data:`BACKEND_CHOICES`) on this machine.

    ``auto`` picks hardware when present, else the real simulator, else the emulator.
    Asking for a Neuron backend that is absent raises :class:`BackendUnavailable` saying what is missing.
    """
    if requested not in BACKEND_CHOICES:
        raise ValueError(f"unknown backend {requested!r}; choose one of {', '.join(BACKEND_CHOICES)}")
    if requested == "auto":
        return "neuron-hw" if toolchain.has_hardware else "neuron-sim" if toolchain.has_simulator else "emulator"
    if requested == "neuron-sim" and not toolchain.has_simulator:
        raise BackendUnavailable("--backend neuron-sim needs AWS's nki (≥ 0.3) or neuronx-cc Python package; "
                                 "neither was found (run `nkiagent doctor`)")
    if requested == "neuron-hw" and not toolchain.has_hardware:
        missing = [what for what, ok in (("Neuron devices (/dev/neuron*)", toolchain.devices), ("AWS's nki or neuronx-cc package", toolchain.has_simulator),
                                         ("neuron-profile or neuron-explorer", toolchain.profiler)) if not ok]
        raise BackendUnavailable(f"--backend neuron-hw needs {', '.join(missing)} (run `nkiagent doctor`)")
    return requested
