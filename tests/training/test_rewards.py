"""Reward specs: the honesty ordering, clipping and bounds for every spec, over random evaluation results."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nkiagent.training.rewards import OUTCOMES, discounted_returns, get_spec, outcome_of

SPECS = [
    "gated-speedup",
    "tiered",
    "log-speedup",
    "sol",
    "weighted",
    "gated-speedup:cap=3",
    "log-speedup:lo=-1,hi=3",
    "weighted:compiles=0.1,correct=0.2,speedup=2,fraction_of_peak=0.5,cap=5",
    "weighted:speedup=1",
]

speedups = st.one_of(st.none(), st.floats(min_value=0.0, max_value=1e12), st.just(float("nan")), st.just(float("inf")))
fractions = st.one_of(st.none(), st.floats(min_value=-5.0, max_value=5.0))


@st.composite
def evaluation(draw: st.DrawFn, verdict: str, compiled: bool | None = None) -> dict[str, Any]:
    """An evaluation dict as the verifier writes it, with adversarial numbers (a cheat may claim any speedup)."""
    return {
        "verdict": verdict,
        "compiled": draw(st.booleans()) if compiled is None else compiled,
        "correct": verdict == "pass",
        "speedup": draw(speedups),
        "fraction_of_peak": draw(fractions),
        "latency_us": draw(st.one_of(st.none(), st.floats(min_value=0, max_value=1e6))),
    }


@pytest.mark.parametrize("name", SPECS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_rejected_below_compile_failure_below_wrong_below_any_pass(name: str, data: st.DataObject) -> None:
    spec = get_spec(name)
    cheat = data.draw(evaluation("rejected"))
    broken = data.draw(evaluation("fail", compiled=False))
    wrong = data.draw(evaluation("fail", compiled=True))
    ok = data.draw(evaluation("pass", compiled=True))
    r = [spec.score(e) for e in (cheat, broken, wrong, ok)]
    assert [x.outcome for x in r] == list(OUTCOMES)
    assert r[0].reward < r[1].reward < r[2].reward < r[3].reward, [x.to_dict() for x in r]
    assert r[0].reward <= 0.0  # a cheat never earns anything, whatever speedup it claims
    lo, hi = spec.bounds
    assert all(lo <= x.reward <= hi and math.isfinite(x.reward) for x in r)  # speed terms are clipped


@pytest.mark.parametrize("name", SPECS)
def test_the_worst_pass_beats_the_best_failure(name: str) -> None:
    spec = get_spec(name)
    slowest = spec.score({"verdict": "pass", "compiled": True, "speedup": 1e-9, "fraction_of_peak": 0.0})
    wrong_but_claims = spec.score({"verdict": "fail", "compiled": True, "speedup": 1e9, "fraction_of_peak": 1.0})
    assert slowest.reward > wrong_but_claims.reward


def test_formulas_match_their_sources() -> None:
    ev = {"verdict": "pass", "compiled": True, "speedup": 2.5, "fraction_of_peak": 0.5}
    assert get_spec("gated-speedup").score(ev).reward == pytest.approx(0.3 + 2.5)  # Kevin: 0.3·correct + speedup·correct
    assert get_spec("gated-speedup:cap=2").score(ev).reward == pytest.approx(2.3)
    assert get_spec("tiered").score(ev).reward == 0.8  # Dr. Kernel: ≥2x → 0.8
    assert get_spec("tiered").score({**ev, "speedup": 0.9}).reward == -0.1
    assert get_spec("tiered").score({"verdict": "fail", "compiled": True}).reward == -0.3
    assert get_spec("tiered").score({"verdict": "fail", "compiled": False}).reward == -0.5
    assert get_spec("tiered").score({"verdict": "rejected"}).reward == -1.0
    assert get_spec("log-speedup").score({**ev, "speedup": 4.0}).reward == pytest.approx(1.5)
    assert get_spec("log-speedup").score({**ev, "speedup": 1e6}).reward == pytest.approx(1.5)  # clipped at log2 = 2
    assert get_spec("sol").score(ev).reward == pytest.approx(0.1 + 0.9 * 0.5)
    w = get_spec("weighted").score(ev)  # KernelGYM's default weights 0.3 / 0.4 / 0.3, speedup clipped at 3
    assert w.components == {"base": 0.0, "compiles": 0.3, "correct": 0.4, "speedup": pytest.approx(0.3 * 2.5 / 3)}
    assert get_spec("weighted").score({"verdict": "pass", "compiled": True, "speedup": None}).components["speedup"] == pytest.approx(0.1)


def test_outcomes_and_missing_evaluations() -> None:
    assert outcome_of(None) == "compile_fail"
    assert outcome_of({"verdict": "fail", "compiled": True}) == "wrong"
    assert outcome_of({"verdict": "rejected", "compiled": True}) == "rejected"


def test_spec_names_versions_and_errors() -> None:
    assert get_spec("tiered@1").id == "tiered@1" and get_spec("tiered@v1").id == "tiered@1"
    assert get_spec("gated-speedup").id == "gated-speedup@1"
    assert get_spec("weighted:speedup=1").id == "weighted@1:cap=3,speedup=1"
    with pytest.raises(ValueError, match="version 1, not '2'"):
        get_spec("tiered@2")
    with pytest.raises(KeyError, match="unknown reward spec 'kevin'; available: gated-speedup, tiered, log-speedup, sol, weighted"):
        get_spec("kevin")
    with pytest.raises(ValueError, match="weights must be ≥ 0"):
        get_spec("weighted:correct=-1")
    with pytest.raises(ValueError, match="takes cap; unknown: gamma"):
        get_spec("gated-speedup:gamma=2")
    with pytest.raises(ValueError, match="must look like name=number"):
        get_spec("weighted:correct")


@settings(max_examples=100, deadline=None)
@given(rewards=st.lists(st.floats(min_value=-1, max_value=11), max_size=12), gamma=st.floats(min_value=0, max_value=1))
def test_returns_are_discounted_sums(rewards: list[float], gamma: float) -> None:
    got = discounted_returns(rewards, gamma)
    for t in range(len(rewards)):
        assert got[t] == pytest.approx(sum(gamma ** (k - t) * rewards[k] for k in range(t, len(rewards))), abs=1e-5)


def test_returns_with_kevins_gamma() -> None:
    assert discounted_returns([0.0, -1.0, 2.0], 0.4) == [pytest.approx(-0.4 + 0.32), pytest.approx(-0.2), 2.0]
    with pytest.raises(ValueError, match=r"gamma must be in \[0, 1\]"):
        discounted_returns([1.0], 1.5)
