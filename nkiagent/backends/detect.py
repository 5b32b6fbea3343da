"""Run-time detection of AWS's Neuron software: packages, compiler, devices, profiler.

Nothing here is an install-time dependency. The Python packages are probed in a separate
interpreter (``python -m nkiagent.backends.detect``) so that the probe never sees — or
disturbs — the emulator modules this process may have installed as ``nki``/``neuronxcc``,
and so that a broken or slow AWS install cannot hang the caller. The public-PyPI
placeholders named ``nki`` and ``neuronx-cc`` are recognised and do not count.

Rules (nki-reference.md §1.1): ``nki`` counts when its version is ≥ 0.3 and it has
``simulate`` and ``isa.nc_matmul``; ``neuronxcc.nki`` counts when it has ``simulate_kernel``.
Devices are ``/dev/neuron*`` (``NKIAGENT_NEURON_DEVICES`` may name another glob, for
containers that mount them elsewhere), with ``neuron-ls --json-output`` for core counts.
"""

from __future__ import annotations

import glob
import importlib.machinery
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["DEVICE_GLOB_ENV", "Toolchain", "detect"]

#: Environment variable naming the glob of Neuron device files (default ``/dev/neuron*``).
DEVICE_GLOB_ENV = "NKIAGENT_NEURON_DEVICES"

_PROBE_TIMEOUT_S = 60.0


@dataclass
class Toolchain:
    """What AWS Neuron software this machine has. Empty fields mean "not found"."""

    nki_version: str = ""  #: real ``nki`` (≥ 0.3 with ``simulate`` and ``isa.nc_matmul``)
    nki_path: str = ""  #: the directory holding the ``nki`` package (the worker imports it from there)
    neuronxcc_version: str = ""  #: real ``neuronxcc`` whose ``nki`` has ``simulate_kernel``
    neuronxcc_path: str = ""
    neuronx_cc: str = ""  #: the ``neuronx-cc`` executable
    neuronx_cc_version: str = ""
    devices: list[str] = field(default_factory=list)  #: ``/dev/neuron*``
    neuron_ls: str = ""
    neuron_cores: int = 0  #: NeuronCores over all devices (from ``neuron-ls``; 0 when unknown)
    neuron_profile: str = ""
    neuron_explorer: str = ""
    notes: list[str] = field(default_factory=list)  #: why something found did not count

    @property
    def has_simulator(self) -> bool:
        return bool(self.nki_version or self.neuronxcc_version)

    @property
    def has_hardware(self) -> bool:
        """Devices, a compiler package to build NEFFs with, and a profiler to time them."""
        return bool(self.devices and self.has_simulator and self.profiler)

    @property
    def profiler(self) -> str:
        """``neuron-profile`` if present, else ``neuron-explorer`` (same ``capture``/``view`` verbs)."""
        return self.neuron_profile or self.neuron_explorer

    def package_paths(self) -> list[str]:
        """Directories to put on ``sys.path`` so another interpreter imports the same packages."""
        return sorted({p for p in (self.nki_path, self.neuronxcc_path) if p})

    def versions(self) -> dict[str, str]:
        """The toolchain versions recorded with every result measured or checked by it."""
        out = {"nki": self.nki_version, "neuronxcc": self.neuronxcc_version, "neuronx-cc": self.neuronx_cc_version,
               "profiler": os.path.basename(self.profiler)}
        return {k: v for k, v in out.items() if v}

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "has_simulator": self.has_simulator, "has_hardware": self.has_hardware}


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for p in text.split(".")[:3]:
        m = re.match(r"\d+", p)
        parts.append(int(m.group()) if m else 0)
    return tuple(parts)


def _probe_packages() -> dict[str, Any]:
    """Run inside the probe interpreter: which real packages import, and from where."""
    import importlib

    out: dict[str, Any] = {"notes": []}
    try:
        nki = importlib.import_module("nki")
        try:
            isa = importlib.import_module("nki.isa")
        except ImportError:
            isa = None  # the public-PyPI placeholder has no submodules
        version = str(getattr(nki, "__version__", "0"))
        if _version_tuple(version) >= (0, 3) and hasattr(nki, "simulate") and hasattr(isa, "nc_matmul"):
            out["nki_version"] = version
            out["nki_path"] = os.path.dirname(os.path.dirname(os.path.abspath(str(nki.__file__))))
        else:
            out["notes"].append(f"nki {version} found but it is not AWS's NKI ≥ 0.3 (no simulate / isa.nc_matmul, or too old)")
    except ImportError:
        pass
    except Exception as exc:  # noqa: BLE001 — a broken install is reported, not raised
        out["notes"].append(f"importing nki failed: {type(exc).__name__}: {exc}")
    try:
        ncc = importlib.import_module("neuronxcc")
        legacy = importlib.import_module("neuronxcc.nki")
        if hasattr(legacy, "simulate_kernel"):
            out["neuronxcc_version"] = str(getattr(ncc, "__version__", "unknown"))
            out["neuronxcc_path"] = os.path.dirname(os.path.dirname(os.path.abspath(str(ncc.__file__))))
        else:
            out["notes"].append("neuronxcc found but neuronxcc.nki has no simulate_kernel (placeholder package?)")
    except ImportError:
        pass
    except Exception as exc:  # noqa: BLE001
        out["notes"].append(f"importing neuronxcc.nki failed: {type(exc).__name__}: {exc}")
    return out


def _run(argv: list[str], env: Mapping[str, str]) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, env=dict(env), check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout if proc.returncode == 0 else ""


def _cores(neuron_ls: str, env: Mapping[str, str]) -> int:
    """Total NeuronCores from ``neuron-ls --json-output`` (a list of devices with ``nc_count``)."""
    try:
        devices = json.loads(_run([neuron_ls, "--json-output"], env) or "[]")
        return sum(int(d.get("nc_count", 0)) for d in devices if isinstance(d, dict))
    except (ValueError, TypeError):
        return 0


_PROBES: dict[tuple[str, str], dict[str, Any]] = {}


def _importable(pythonpath: str) -> bool:
    """Whether a child interpreter could import ``nki`` or ``neuronxcc`` at all, looked up on disk only.

    ``PathFinder`` reads the path entries, not ``sys.modules``, so the emulator's modules do not
    count; where neither package exists (most machines), no probe process is started, which keeps
    ``auto`` backend selection off every command's startup time.
    """
    paths = [p for p in pythonpath.split(os.pathsep) if p] + [p for p in sys.path if p]
    return any(importlib.machinery.PathFinder.find_spec(name, paths) is not None for name in ("nki", "neuronxcc"))


def _probe(env: Mapping[str, str], refresh: bool) -> dict[str, Any]:
    """The package probe and the compiler's version: the slow part, cached per ``PATH``/``PYTHONPATH``."""
    key = (env.get("PATH", ""), env.get("PYTHONPATH", ""))
    if refresh or key not in _PROBES:
        raw = ""
        if _importable(key[1]):
            raw = _run([sys.executable, "-m", "nkiagent.backends.detect"], {**env, "PYTHONDONTWRITEBYTECODE": "1"})
        try:
            found = json.loads(raw.strip().splitlines()[-1]) if raw.strip() else {}
        except ValueError:
            found = {}
        compiler = shutil.which("neuronx-cc", path=key[0]) or ""
        if compiler:
            m = re.search(r"(\d+\.\d+[\w.+-]*)", _run([compiler, "--version"], env))
            found["neuronx_cc_version"] = m.group(1) if m else "unknown"
        _PROBES[key] = found
    return _PROBES[key]


def detect(env: Mapping[str, str] | None = None, refresh: bool = False) -> Toolchain:
    """Find the Neuron software visible with ``env`` (default: this process's environment).

    The package probe is cached per ``PATH``/``PYTHONPATH`` (``refresh=True`` probes again);
    executables, devices and ``neuron-ls`` are looked up on every call.
    """
    env = dict(os.environ if env is None else env)
    found = _probe(env, refresh)
    tc = Toolchain()
    for name in ("nki_version", "nki_path", "neuronxcc_version", "neuronxcc_path", "neuronx_cc_version"):
        setattr(tc, name, str(found.get(name, "")))
    tc.notes.extend(found.get("notes", []))
    path = env.get("PATH", "")
    tc.neuronx_cc = shutil.which("neuronx-cc", path=path) or ""
    tc.devices = sorted(glob.glob(env.get(DEVICE_GLOB_ENV) or "/dev/neuron*"))
    tc.neuron_ls = shutil.which("neuron-ls", path=path) or ""
    if tc.neuron_ls and tc.devices:
        tc.neuron_cores = _cores(tc.neuron_ls, env)
    tc.neuron_profile = shutil.which("neuron-profile", path=path) or ""
    tc.neuron_explorer = shutil.which("neuron-explorer", path=path) or ""
    if tc.devices and not tc.profiler:
        tc.notes.append("Neuron devices found but neither neuron-profile nor neuron-explorer is on PATH: no hardware timing")
    return tc


if __name__ == "__main__":
    print(json.dumps(_probe_packages()))
