"""The verifier: static gate, sandboxed evaluation, correctness and integrity checks, verdicts.

The gate's names load on first use, so that light modules here (``protocol``) can be imported by
the CLI's argument parser without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .gate import GATE_VERSION, Violation, check_source

__all__ = ["GATE_VERSION", "Violation", "check_source"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import gate

        return getattr(gate, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
