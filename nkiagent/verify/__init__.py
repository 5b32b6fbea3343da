"""The verifier: static gate, sandboxed evaluation, correctness and integrity checks, verdicts."""

from .gate import GATE_VERSION, Violation, check_source

__all__ = ["GATE_VERSION", "Violation", "check_source"]
