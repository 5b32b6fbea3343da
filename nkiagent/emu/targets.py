"""The three Trainium generations the emulator models, and the rules that differ by target.

Numbers come from ``nki-reference.md`` §3.1–§3.3 (KLR / nkipy hardware constants,
AWS architecture guides). Timing numbers live in :mod:`nkiagent.perf`, not here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["TARGETS", "Target", "default_target_name", "get_target"]


@dataclass(frozen=True, slots=True)
class Target:
    """Per-generation limits the emulator enforces."""

    name: str
    nc_version: int  #: ``nisa.nc_version`` value: gen2 (trn1), gen3 (trn2), gen4 (trn3)
    sbuf_usable_bytes: int  #: compiler-usable SBUF bytes per partition
    psum_bytes: int = 16384  #: per partition
    psum_bank_bytes: int = 2048
    pmax: int = 128
    gemm_stationary_fmax: int = 128
    gemm_moving_fmax: int = 512
    psum_fmax: int = 512
    bn_stats_fmax: int = 512
    #: largest matmul moving free size by dst dtype (trn3 can use all of PSUM)
    matmul_moving_max_fp32: int = 512
    matmul_moving_max_bf16: int = 512
    matmul_bf16_dst: bool = False
    scalar_bias_ok: bool = False  #: scalar ``bias=`` to activation (v3+)

    @property
    def psum_banks(self) -> int:
        return self.psum_bytes // self.psum_bank_bytes


TARGETS: dict[str, Target] = {
    "trn1": Target("trn1", 2, 180224),
    "trn2": Target("trn2", 3, 212984, scalar_bias_ok=True),
    "trn3": Target(
        "trn3", 4, 245752, matmul_moving_max_fp32=4096, matmul_moving_max_bf16=8192, matmul_bf16_dst=True, scalar_bias_ok=True
    ),
}
_ALIASES = {"inf2": "trn1", "gen2": "trn1", "gen3": "trn2", "gen4": "trn3"}


def default_target_name() -> str:
    """``NEURON_PLATFORM_TARGET_OVERRIDE`` if set, else trn2 (the most common instance today)."""
    return os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "") or "trn2"


def get_target(name: str | Target | None = None) -> Target:
    """Resolve a target name (or alias such as ``gen3``/``inf2``) to its :class:`Target`."""
    if isinstance(name, Target):
        return name
    key = (name or default_target_name()).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in TARGETS:
        raise ValueError(f"unknown target {name!r}; choose one of trn1, trn2, trn3")
    return TARGETS[key]
