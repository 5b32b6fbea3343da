"""Rewards computed from evaluation JSON: named, versioned specs that only honest kernels can earn.

Every spec first sorts an evaluation into one of four outcomes and then scores it, so the
ordering that matters for training holds by construction and is checked by tests::

    rejected (a cheat)  <  compile failure  <  wrong answer  <  any pass

A cheat scoring at least as much as an honest failure would teach a model that cheating is a
cheap way to "compile" (kernel-agents-landscape.md §6.4). Speed terms are clipped so an
outlier (or an exploit the verifier missed) cannot dominate a batch. A spec is named on the
command line as ``NAME`` or ``NAME@VERSION`` (``gated-speedup``, ``tiered@1``), or as a
weighted sum ``weighted:compiles=0.3,correct=0.4,speedup=0.3`` (``cap=…`` sets the speedup
clip); ``spec.id`` (``gated-speedup@1``) is what exports record next to every reward.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_GAMMA",
    "DEFAULT_SPEC",
    "OUTCOMES",
    "Reward",
    "RewardSpec",
    "discounted_returns",
    "get_spec",
    "outcome_of",
    "spec_names",
]

#: Outcomes from worst to best; every spec's rewards are strictly increasing along this order.
OUTCOMES = ("rejected", "compile_fail", "wrong", "pass")
DEFAULT_SPEC = "gated-speedup"
#: Kevin's best multi-turn setting (sum aggregation, γ = 0.4).
DEFAULT_GAMMA = 0.4


@dataclass(frozen=True)
class Reward:
    """One scored evaluation: its outcome, the named components and the total."""

    outcome: str
    components: dict[str, float]
    reward: float
    spec: str

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "components": dict(self.components), "reward": self.reward, "spec": self.spec}


def outcome_of(evaluation: Mapping[str, Any] | None) -> str:
    """``rejected`` | ``compile_fail`` | ``wrong`` | ``pass`` from an evaluation dict (DESIGN.md's contract).

    Anything without a verdict (no code, unparsable output, a missing evaluation) counts as a
    compile failure: it cannot be better than wrong code nor as bad as a cheat.
    """
    if not evaluation:
        return "compile_fail"
    verdict = evaluation.get("verdict")
    if verdict == "rejected":
        return "rejected"
    if verdict == "pass":
        return "pass"
    return "wrong" if evaluation.get("compiled") else "compile_fail"


def _speedup(ev: Mapping[str, Any]) -> float:
    """The pass's speedup, 1.0 when there is no baseline to compare against (neither reward nor penalty)."""
    sp = ev.get("speedup")
    if sp is None or not isinstance(sp, (int, float)) or math.isnan(sp):
        return 1.0
    return max(0.0, float(sp))


def _fraction(ev: Mapping[str, Any]) -> float:
    f = ev.get("fraction_of_peak")
    if f is None or not isinstance(f, (int, float)) or math.isnan(f):
        return 0.0
    return min(1.0, max(0.0, float(f)))


def _clip(x: float, lo: float, hi: float) -> float:
    return min(hi, max(lo, x))


ScoreFn = Callable[[str, Mapping[str, Any]], dict[str, float]]


@dataclass(frozen=True)
class RewardSpec:
    """A named, versioned reward: ``score(evaluation)`` → :class:`Reward`.

    ``fn(outcome, evaluation)`` returns the components; the reward is their sum. ``bounds``
    is the closed interval every reward of this spec lies in (tests check it).
    """

    name: str
    version: int
    description: str
    fn: ScoreFn = field(repr=False, compare=False)
    bounds: tuple[float, float] = (-1.0, 1.0)
    params: tuple[tuple[str, float], ...] = ()

    @property
    def id(self) -> str:
        extra = ",".join(f"{k}={v:g}" for k, v in self.params)
        return f"{self.name}@{self.version}" + (f":{extra}" if extra else "")

    def score(self, evaluation: Mapping[str, Any] | None) -> Reward:
        out = outcome_of(evaluation)
        comps = self.fn(out, evaluation or {})
        total = round(sum(comps.values()), 6)
        return Reward(out, {k: round(v, 6) for k, v in comps.items()}, total, self.id)


# -- the builtin specs ------------------------------------------------------------------------------


def _gated_speedup(cap: float) -> ScoreFn:
    """Kevin-32B: ``0.3·correct + speedup·correct``, speed clipped at ``cap``; failures tiered below 0."""
    floor = {"rejected": -1.0, "compile_fail": -0.5, "wrong": 0.0}

    def fn(out: str, ev: Mapping[str, Any]) -> dict[str, float]:
        if out != "pass":
            return {"penalty": floor[out]}
        return {"correct": 0.3, "speedup": _clip(_speedup(ev), 0.0, cap)}

    return fn


#: Dr. Kernel "like_kernel" bands: (minimum speedup, reward), checked in order.
TIERS = ((3.0, 1.0), (2.0, 0.8), (1.5, 0.6), (1.2, 0.4), (1.0, 0.2))


def _tiered(out: str, ev: Mapping[str, Any]) -> dict[str, float]:
    """Dr. Kernel: decoy −1, compile failure −0.5, incorrect −0.3, passes in speedup bands (−0.1 when slower)."""
    if out != "pass":
        return {"penalty": {"rejected": -1.0, "compile_fail": -0.5, "wrong": -0.3}[out]}
    sp = _speedup(ev)
    return {"tier": next((r for lo, r in TIERS if sp >= lo), -0.1)}


def _log_speedup(lo: float, hi: float) -> ScoreFn:
    """``0.5 + 0.5·clip(log2 speedup, lo, hi)`` for a pass (so 1× → 0.5, 4× → 1.5); failures below 0."""

    def fn(out: str, ev: Mapping[str, Any]) -> dict[str, float]:
        if out != "pass":
            return {"penalty": {"rejected": -1.0, "compile_fail": -0.5, "wrong": -0.25}[out]}
        sp = _speedup(ev)
        log = math.log2(sp) if sp > 0 else lo
        return {"correct": 0.5, "log_speedup": 0.5 * _clip(log, lo, hi)}

    return fn


def _sol(out: str, ev: Mapping[str, Any]) -> dict[str, float]:
    """``0.1 + 0.9·fraction of speed of light`` for a pass (bounded by construction); failures at or below 0."""
    if out != "pass":
        return {"penalty": {"rejected": -1.0, "compile_fail": -0.5, "wrong": 0.0}[out]}
    return {"correct": 0.1, "fraction_of_peak": 0.9 * _fraction(ev)}


#: Base of the weighted spec per outcome (KernelGYM's penalties): with non-negative weights on
#: components that only grow along OUTCOMES, these keep the ordering strict for any weights.
WEIGHTED_BASE = {"rejected": -1.0, "compile_fail": -0.5, "wrong": -0.3, "pass": 0.0}
WEIGHTED_COMPONENTS = ("compiles", "correct", "speedup", "fraction_of_peak")


def _weighted(weights: Mapping[str, float], cap: float) -> ScoreFn:
    def fn(out: str, ev: Mapping[str, Any]) -> dict[str, float]:
        passed = out == "pass"
        values = {
            "compiles": 1.0 if out in ("wrong", "pass") else 0.0,
            "correct": 1.0 if passed else 0.0,
            "speedup": _clip(_speedup(ev), 0.0, cap) / cap if passed else 0.0,
            "fraction_of_peak": _fraction(ev) if passed else 0.0,
        }
        comps = {"base": WEIGHTED_BASE[out]}
        comps.update({k: w * values[k] for k, w in weights.items() if w})
        return comps

    return fn


def _parse_params(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"reward parameter {part!r} must look like name=number")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise ValueError(f"reward parameter {key.strip()!r} must be a number, got {value.strip()!r}") from None
    return out


def _builtin(name: str, params: dict[str, float]) -> RewardSpec:
    def take(allowed: Sequence[str]) -> None:
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            raise ValueError(f"reward spec {name!r} takes {', '.join(allowed) or 'no parameters'}; unknown: {', '.join(unknown)}")

    if name == "gated-speedup":
        take(["cap"])
        cap = params.get("cap", 10.0)
        if cap <= 0:
            raise ValueError("cap must be positive")
        return RewardSpec(
            name,
            1,
            "Kevin-32B: 0.3·correct + min(speedup, cap)·correct; wrong 0, compile failure −0.5, cheat −1",
            _gated_speedup(cap),
            (-1.0, 0.3 + cap),
            tuple(sorted(params.items())),
        )
    if name == "tiered":
        take([])
        return RewardSpec(
            name,
            1,
            "Dr. Kernel bands: ≥3× 1.0, ≥2× 0.8, ≥1.5× 0.6, ≥1.2× 0.4, ≥1× 0.2, slower −0.1; wrong −0.3, compile failure −0.5, cheat −1",
            _tiered,
            (-1.0, 1.0),
        )
    if name == "log-speedup":
        take(["lo", "hi"])
        lo, hi = params.get("lo", -1.0), params.get("hi", 2.0)
        if not lo < hi or lo < -1.0:
            raise ValueError("log-speedup needs -1 ≤ lo < hi (so every pass stays above a wrong answer)")
        return RewardSpec(
            name,
            1,
            "0.5 + 0.5·clip(log2 speedup, lo, hi) for a pass; wrong −0.25, compile failure −0.5, cheat −1",
            _log_speedup(lo, hi),
            (-1.0, 0.5 + 0.5 * hi),
            tuple(sorted(params.items())),
        )
    if name == "sol":
        take([])
        return RewardSpec(
            name, 1, "0.1 + 0.9·fraction of the speed of light for a pass; wrong 0, compile failure −0.5, cheat −1", _sol, (-1.0, 1.0)
        )
    if name == "weighted":
        take([*WEIGHTED_COMPONENTS, "cap"])
        cap = params.pop("cap", 3.0)
        weights = {k: params.get(k, 0.0) for k in WEIGHTED_COMPONENTS} if params else {"compiles": 0.3, "correct": 0.4, "speedup": 0.3}
        if any(w < 0 for w in weights.values()) or cap <= 0:
            raise ValueError(
                "weighted reward weights must be ≥ 0 and cap > 0 (negative weights could rank a cheat above an honest failure)"
            )
        shown = tuple(sorted({**{k: w for k, w in weights.items() if w}, "cap": cap}.items()))
        return RewardSpec(
            name,
            1,
            "Σ weight·component over compiles, correct, speedup/cap, fraction_of_peak, plus base penalties "
            "(wrong −0.3, compile failure −0.5, cheat −1)",
            _weighted(weights, cap),
            (-1.0, sum(weights.values())),
            shown,
        )
    raise KeyError(f"unknown reward spec {name!r}; available: {', '.join(spec_names())}")


def spec_names() -> list[str]:
    return ["gated-speedup", "tiered", "log-speedup", "sol", "weighted"]


def get_spec(text: str = DEFAULT_SPEC) -> RewardSpec:
    """Parse ``NAME[@VERSION][:k=v,…]`` (``weighted:…`` takes its weights the same way)."""
    head, _, params = text.strip().partition(":")
    name, _, version = head.partition("@")
    spec = _builtin(name.strip(), _parse_params(params))
    if version and version.strip().lstrip("v") != str(spec.version):
        raise ValueError(f"reward spec {name} has version {spec.version}, not {version!r}")
    return spec


def discounted_returns(rewards: Sequence[float], gamma: float = DEFAULT_GAMMA) -> list[float]:
    """``R_t = Σ_{k ≥ t} γ^(k−t) r_k`` for every step (Kevin's multi-turn credit assignment)."""
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    out = [0.0] * len(rewards)
    acc = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        acc = rewards[t] + gamma * acc
        out[t] = round(acc, 6)
    return out
