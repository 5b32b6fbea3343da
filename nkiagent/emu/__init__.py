"""The embedded NKI emulator: run NKI kernels on the CPU with Trainium's rules enforced.

Use :func:`install` to make ``import nki`` resolve to the emulator (when AWS's package is
absent, or always with ``force=True``), then run kernels with ``nki.simulate(kernel)(*arrays)``
or, with a trace for the cost model, :func:`run_kernel`. Kernels written for the first API
generation (``import neuronxcc.nki``, NKI 0.1) run on the same core through the legacy
front-end in :mod:`nkiagent.emu.legacy` (``run_kernel(..., api="0.1")``).

The emulator imports only NumPy and ml_dtypes, so the legacy face it installs refuses
``neuronxcc.nki.benchmark`` and ``profile`` (they answer with the cost model, a layer above):
code that runs kernels installs through :func:`nkiagent.shim.install`, which adds them.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

from .errors import (
    NkiCapacityError,
    NkiError,
    NkiOutOfBoundsError,
    NkiRuntimeError,
    NkiTypeError,
    NkiUnsupportedError,
    NkiValidationError,
    NkiWarning,
)
from .frontend import Kernel, RunResult, ShapeSpec, jit, run_kernel, simulate
from .targets import TARGETS, Target, get_target
from .trace import Access, Instruction, Region, Trace

__all__ = [
    "TARGETS",
    "Access",
    "Instruction",
    "Kernel",
    "NkiCapacityError",
    "NkiError",
    "NkiOutOfBoundsError",
    "NkiRuntimeError",
    "NkiTypeError",
    "NkiUnsupportedError",
    "NkiValidationError",
    "NkiWarning",
    "Region",
    "RunResult",
    "ShapeSpec",
    "Target",
    "Trace",
    "get_target",
    "install",
    "jit",
    "real_neuronxcc_available",
    "real_nki_available",
    "run_kernel",
    "simulate",
    "uninstall",
]

_SHIM_MODULES = ("nki", "nki.language", "nki.language.dtypes", "nki.isa", "nki.isa.constants", "nki.typing", "nki.dtype",
                 "nki.tensor", "nki.compiler", "nki.builtin", "nki.collectives")
_LEGACY_MODULES = ("neuronxcc", "neuronxcc.nki", "neuronxcc.nki.language", "neuronxcc.nki.isa", "neuronxcc.nki.typing", "neuronxcc.nki.compiler")


def real_nki_available() -> bool:
    """True when AWS's real ``nki`` (≥ 0.2, with ``simulate`` and ``isa.nc_matmul``) is importable.

    The public-PyPI ``nki`` is an empty placeholder; it does not count.
    """
    current = sys.modules.get("nki")
    if current is not None and getattr(current, "__name__", "") != "nki":
        return False  # our shim is installed under that name
    if importlib.util.find_spec("nki") is None:
        return False
    try:
        mod = importlib.import_module("nki")
        isa = importlib.import_module("nki.isa")
    except Exception:  # noqa: BLE001 — AWS's package failing to import, for any reason, means it is not usable here
        return False
    version = str(getattr(mod, "__version__", "0"))
    try:
        major_minor = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        major_minor = (0, 0)
    return major_minor >= (0, 2) and hasattr(mod, "simulate") and hasattr(isa, "nc_matmul")


def real_neuronxcc_available() -> bool:
    """True when AWS's ``neuronxcc.nki`` (with ``simulate_kernel``) is importable, not our shim."""
    current = sys.modules.get("neuronxcc")
    if current is not None and getattr(current, "__name__", "") != "neuronxcc":
        return False
    if importlib.util.find_spec("neuronxcc") is None:
        return False
    try:
        return hasattr(importlib.import_module("neuronxcc.nki"), "simulate_kernel")
    except Exception:  # noqa: BLE001 — as above: a failing import of AWS's package means it is not usable
        return False


def install(force: bool = False) -> str:
    """Make ``import nki`` (and its submodules: ``nki.language``, ``nki.isa``, ``nki.isa.constants`` …) resolve to the emulator.

    ``import neuronxcc.nki`` (the 0.1 API, with ``.language``, ``.isa``, ``.typing`` and
    ``.compiler``) resolves to the emulator's legacy front-end likewise, unless AWS's
    ``neuronxcc`` is installed. Returns ``"emulator"`` when the ``nki`` shim is in place,
    ``"real"`` when AWS's package was found and left alone (pass ``force=True`` to shadow
    both real packages anyway).
    """
    if force or not real_neuronxcc_available():
        for name in _LEGACY_MODULES:
            sys.modules.pop(name, None)
        from . import neuronxcc as legacy_shim

        sys.modules["neuronxcc"] = legacy_shim
        sys.modules["neuronxcc.nki"] = legacy_shim.nki
        for sub in ("language", "isa", "typing", "compiler"):
            sys.modules[f"neuronxcc.nki.{sub}"] = getattr(legacy_shim.nki, sub)
    if not force and real_nki_available():
        return "real"
    for name in _SHIM_MODULES:
        sys.modules.pop(name, None)
    from . import nki as shim

    sys.modules["nki"] = shim
    sys.modules.update(shim.SUBMODULES)
    return "emulator"


def uninstall() -> None:
    """Remove the emulator's ``nki`` and ``neuronxcc`` modules from ``sys.modules`` (used by tests)."""
    from . import neuronxcc as legacy_shim
    from . import nki as shim

    if sys.modules.get("nki") is shim:
        for name in _SHIM_MODULES:
            sys.modules.pop(name, None)
    if sys.modules.get("neuronxcc") is legacy_shim:
        for name in _LEGACY_MODULES:
            sys.modules.pop(name, None)
