"""AWS's own ``nki`` inside the sandboxed worker: importing the real packages and finding the kernel in a file.

The worker (``backend="neuron-sim"``) and the Neuron backend's hardware driver run kernels on AWS's
packages instead of the emulator; both need the same two steps, which live here, below the
backends, so the worker never imports a backend.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["pick_real_kernel", "real_simulator"]


def pick_real_kernel(namespace: dict[str, Any], name: str | None) -> Any:
    """The kernel object of a file run under AWS's packages: ``name``, else ``kernel``, else the only jitted function."""
    if name:
        if name not in namespace:
            raise LookupError(f"kernel file defines no function {name!r}")
        return namespace[name]
    if "kernel" in namespace:
        return namespace["kernel"]
    found = [
        v
        for k, v in namespace.items()
        if not k.startswith("_")
        and callable(v)
        and type(v).__module__.split(".")[0] in ("nki", "neuronxcc", "nkiagent")
        and not isinstance(v, type)
        and type(v).__name__ != "module"
    ]
    if len(found) == 1:
        return found[0]
    raise LookupError("expected exactly one @nki.jit kernel in the file; name it `kernel`")


class _SimResult:
    """What the worker reads from a run: outputs and warnings."""

    def __init__(self, outputs: Any) -> None:
        self.outputs = outputs
        self.warnings: list[str] = []


def real_simulator(api: str, package_paths: Sequence[str]) -> Any:
    """Import AWS's packages (from ``package_paths`` first) and return ``run(kernel, arrays)``.

    Called by the worker before its audit hook is installed, so the packages load normally.
    """
    import importlib

    for p in reversed(list(package_paths)):
        if p not in sys.path:
            sys.path.insert(0, p)
    for name in [m for m in sys.modules if m == "nki" or m.startswith(("nki.", "neuronxcc"))]:
        del sys.modules[name]  # never the emulator's shims
    if api == "0.1":
        legacy = importlib.import_module("neuronxcc.nki")
        for sub in ("language", "isa"):
            importlib.import_module(f"neuronxcc.nki.{sub}")
        if not hasattr(legacy, "simulate_kernel"):
            raise ImportError("neuronxcc.nki has no simulate_kernel: AWS's neuronx-cc package is needed for NKI 0.1 kernels")
        return lambda kernel, arrays: _SimResult(legacy.simulate_kernel(kernel, *arrays))
    nki = importlib.import_module("nki")
    for sub in ("language", "isa"):
        importlib.import_module(f"nki.{sub}")
    if not hasattr(nki, "simulate"):
        raise ImportError("nki has no simulate(): AWS's nki ≥ 0.3 is needed for the real simulator")
    return lambda kernel, arrays: _SimResult(nki.simulate(kernel)(*arrays))
