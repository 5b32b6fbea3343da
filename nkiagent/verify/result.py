"""The evaluation result: the one JSON contract every consumer (agent, UI, search, exports) reads."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["VERDICTS", "Check", "EvalResult"]

VERDICTS = ("pass", "fail", "rejected")


@dataclass
class Check:
    """One named check with its outcome and details."""

    name: str
    ok: bool
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvalResult:
    """Verdict of one kernel on one task and target (DESIGN.md's evaluation contract).

    ``latency_us`` and ``baseline_latency_us`` carry ``timing_source``; ``speedup`` is only set
    when the verdict is ``pass``.
    """

    verdict: str
    task: str
    target: str
    reasons: list[str] = field(default_factory=list)
    compiled: bool = False
    correct: bool = False
    checks: list[Check] = field(default_factory=list)
    latency_us: float | None = None
    timing_source: str = "emulator-estimate"
    model_version: str = ""
    baseline_latency_us: float | None = None
    speedup: float | None = None
    sol_latency_us: float | None = None
    fraction_of_peak: float | None = None
    profile: dict[str, Any] = field(default_factory=dict)
    code_sha256: str = ""
    backend: str = "emulator"  #: ``emulator``, ``neuron-sim`` or ``neuron-hw``
    toolchain: dict[str, str] = field(default_factory=dict)  #: versions of the real toolchain that checked or timed it
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def add(self, name: str, ok: bool, detail: str = "", **data: Any) -> Check:
        check = Check(name, ok, detail, data)
        self.checks.append(check)
        return check
