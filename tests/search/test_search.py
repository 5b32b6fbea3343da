"""Every strategy end to end offline (builtin/tuner), budgets, and resume after an interruption.

The task is vector_add on a small shape (``small_vector_add.py``) from the demo kernel, which
starts at 0.5426× the baseline (narrow tiles, emulator-estimate on trn2); its 12 tunable
settings reach 1.4238× (TILE_COLS 1024, ROWS_PER_PARTITION 1). One seed and the visible shape
keep the tests fast; the cascade runs in evolve.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import nkiagent.agent
from nkiagent.search import SearchConfig, resume_search, run_search
from nkiagent.search.db import Candidate
from nkiagent.sessions.store import read_events

START = 0.5426
TASK = str(Path(__file__).with_name("small_vector_add.py"))
DEMO = str(Path(nkiagent.agent.__file__).parent / "demo_kernels" / "vector_add.py")


def _cfg(strategy: str, **kw: object) -> SearchConfig:
    base: dict[str, object] = {
        "task": TASK,
        "kernel": DEMO,
        "strategy": strategy,
        "max_candidates": 5,
        "workers": 2,
        "hidden": False,
        "cascade": False,
    }
    return SearchConfig(**{**base, **kw})  # type: ignore[arg-type]


def _candidates(session_dir: Path) -> list[dict]:
    return [e for e in read_events(session_dir / "events.jsonl") if e["type"] == "candidate"]


@pytest.mark.parametrize("strategy", ["best-of-n", "refine", "beam", "evolve"])
def test_each_strategy_runs_offline_and_records_its_lineage(tmp_path: Path, strategy: str) -> None:
    extra = {"cascade": True} if strategy == "evolve" else {}
    out = run_search(_cfg(strategy, max_candidates=4, **extra), tmp_path)
    cands = _candidates(out.session.dir)
    assert out.stop_reason == "max candidates (4) evaluated" and out.candidates == 4 == len(cands)
    assert [c["candidate_id"] for c in cands] == [0, 1, 2, 3]
    assert cands[0]["parents"] == [] and cands[0]["speedup"] == START and cands[0]["mutation"] == "starting kernel"
    assert len({c["code_sha256"] for c in cands}) == 4  # never the same kernel twice
    assert all(c["strategy"] == strategy and c["timing_source"] == "emulator-estimate" for c in cands)
    assert all(c["verdict"] == "pass" and c["reward"] == c["speedup"] for c in cands)  # every tunable setting is correct
    assert all(c["model_turn"]["tool_calls"][0]["function"]["name"] == "edit_file" for c in cands[1:])
    best = max(c["speedup"] for c in cands)
    assert out.best is not None and out.best.speedup == best > START
    meta = json.loads((out.session.dir / "meta.json").read_text())
    assert meta["kind"] == "search" and meta["config"]["strategy"] == strategy and meta["search_state"]["round"] >= 1
    if strategy == "best-of-n":
        assert all(c["parents"] == [0] for c in cands[1:]) and all(c["mutation"].startswith("independent sample") for c in cands[1:])
    if strategy == "refine":  # one trajectory: every turn edits the best so far
        for c in cands[1:]:
            earlier = [d for d in cands if d["candidate_id"] < c["candidate_id"]]
            assert c["parents"] == [max(earlier, key=lambda d: (d["speedup"], -d["candidate_id"]))["candidate_id"]]
    if strategy == "beam":  # 2 beams × 2 samples; the first step has only the start as a beam
        assert [c["parents"] for c in cands[1:3]] == [[0], [0]] and all(c["generation"] == 2 for c in cands[3:])
    if strategy == "evolve":
        assert {c["island"] for c in cands[1:]} == {0, 1} and {c["stage"] for c in cands} == {"full"}
        assert all(tuple(c["cell"]) == ("memory", "loops2/≤80") for c in cands)


def test_budget_stops_target_speedup_patience_and_wall_time(tmp_path: Path) -> None:
    out = run_search(_cfg("best-of-n", max_candidates=12, target_speedup=0.54), tmp_path / "a")
    assert out.stop_reason == "target speedup 0.54× reached (0.5426×)" and out.candidates == 1
    out = run_search(_cfg("refine", max_candidates=30, patience=1), tmp_path / "b")
    assert out.stop_reason == "plateau: 1 candidates without a new best"
    assert out.candidates - 1 - out.best.candidate_id == 1  # type: ignore[union-attr]
    out = run_search(_cfg("evolve", max_seconds=0.0), tmp_path / "c")
    assert out.stop_reason == "wall time of 0 s used" and out.candidates == 1
    fraction = out.best.evaluation["fraction_of_peak"]  # type: ignore[union-attr]
    assert 0.0 < fraction < 1.0
    out = run_search(_cfg("beam", max_candidates=6, target_sol=fraction), tmp_path / "d")
    assert out.stop_reason == f"target {100 * fraction:g}% of the speed of light reached" and out.candidates == 1
    seen: list[Candidate] = []
    out = run_search(_cfg("evolve", max_candidates=30), tmp_path / "e", on_candidate=seen.append, should_stop=lambda: len(seen) >= 2)
    assert out.stop_reason == "stopped by the user" and 2 <= out.candidates == len(seen) < 30  # after the round in flight, all recorded
    assert read_events(out.session.dir / "events.jsonl")[-1]["stop_reason"] == "stopped by the user"


def test_a_small_search_space_is_exhausted_not_looped_forever(tmp_path: Path) -> None:
    out = run_search(SearchConfig(task="softmax", strategy="beam", max_candidates=40, workers=2, hidden=False, cascade=False), tmp_path)
    assert out.stop_reason == "search space exhausted: three rounds proposed nothing new"
    assert out.candidates == 4  # FUSE_EXP_SUM × SCALE_ON_SCALAR, each evaluated once


def test_resume_after_interruption_continues_the_same_database(tmp_path: Path) -> None:
    def interrupt(c: Candidate) -> None:
        if c.candidate_id == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_search(_cfg("evolve", max_candidates=5), tmp_path, on_candidate=interrupt)
    (session_dir,) = tmp_path.iterdir()
    before = _candidates(session_dir)
    assert [c["candidate_id"] for c in before] == [0, 1, 2]
    (session_dir / "candidates.sqlite").unlink()  # the index is rebuilt from the events
    out = resume_search(session_dir)
    after = _candidates(session_dir)
    assert out.stop_reason == "max candidates (5) evaluated" and [c["candidate_id"] for c in after] == list(range(5))
    assert after[:3] == before and len({c["code_sha256"] for c in after}) == 5
    assert all(p < c["candidate_id"] for c in after for p in c["parents"])
    out = resume_search(session_dir, {"max_candidates": 6})  # a finished search continues with a raised budget
    assert out.candidates == 6
    notes = [e["text"] for e in read_events(session_dir / "events.jsonl") if e["type"] == "note"]
    assert notes.count("search resumed") == 2


def test_unknown_strategy_is_refused_before_a_session_exists(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown strategy 'annealing'; choose one of best-of-n, refine, beam, evolve"):
        run_search(_cfg("annealing"), tmp_path)
    assert not tmp_path.exists() or not any(tmp_path.iterdir())
