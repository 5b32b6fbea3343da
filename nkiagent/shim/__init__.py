"""The importable NKI front-ends with timing: the emulator's ``nki`` / ``neuronxcc.nki`` plus the cost model.

The emulator imports only NumPy and ml_dtypes, so it cannot answer ``neuronxcc.nki.benchmark``
or ``neuronxcc.nki.profile``: those report the cost model's estimate, and the cost model
(:mod:`nkiagent.perf`) is a layer above it. This thin layer sits above both: :func:`install`
puts the emulator's faces in place (:func:`nkiagent.emu.install`) and then swaps its own
``neuronxcc`` / ``neuronxcc.nki`` packages in, which are the emulator's plus ``benchmark``,
``profile`` and ``jit(mode="benchmark")`` from :mod:`.legacy`. The submodules kernels import
(``neuronxcc.nki.language``, ``.isa`` …) stay the emulator's own objects.

Everything that runs kernels calls this ``install`` (the sandbox worker, the test suite,
the benchmarks); :func:`nkiagent.emu.install` alone gives the same faces, with ``benchmark``
and ``profile`` refused by name.
"""

from __future__ import annotations

import sys

from nkiagent import emu

__all__ = ["install", "uninstall"]


def install(force: bool = False) -> str:
    """:func:`nkiagent.emu.install` (same arguments and answer), with the legacy face's timing entry points wired up.

    AWS's real ``neuronxcc`` (left in place unless ``force``) keeps its own ``benchmark``.
    """
    from nkiagent.emu import neuronxcc as emu_legacy

    answer = emu.install(force)
    if sys.modules.get("neuronxcc") is emu_legacy:
        from . import neuronxcc as legacy_face

        sys.modules["neuronxcc"] = legacy_face
        sys.modules["neuronxcc.nki"] = legacy_face.nki
    return answer


def uninstall() -> None:
    """Remove the emulator's and this layer's ``nki`` / ``neuronxcc`` modules from ``sys.modules`` (used by tests)."""
    from . import neuronxcc as legacy_face

    if sys.modules.get("neuronxcc") is legacy_face:
        from nkiagent.emu import neuronxcc as emu_legacy

        sys.modules["neuronxcc"] = emu_legacy  # emu.uninstall removes what it recognises as its own
        sys.modules["neuronxcc.nki"] = emu_legacy.nki
    emu.uninstall()
