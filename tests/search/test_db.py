"""The candidate database: events are the record, SQLite the index (rebuilt when missing), rewards and cells."""

from __future__ import annotations

from pathlib import Path

from nkiagent.search.db import CandidateDB, cell_of, reward_of
from nkiagent.search.report import evals_to_fraction
from nkiagent.sessions.store import SessionStore

PASS = {
    "verdict": "pass",
    "latency_us": 50.0,
    "speedup": 2.0,
    "timing_source": "emulator-estimate",
    "profile": {"bottleneck": "memory-bound (DMA)", "summary": "s", "engines": {"big": "dropped"}},
    "reasons": [],
}
SRC = "X = 1  # nkiagent: tune [1, 2]\n\n@nki.jit\ndef kernel(a):\n    for i in nl.affine_range(4):\n        for j in nl.affine_range(2):\n            pass\n"


def test_rewards_order_cheats_below_failures_below_passes() -> None:
    assert reward_of({"verdict": "rejected"}) == -1.0
    assert reward_of({"verdict": "fail", "compiled": True}) == 0.0
    assert reward_of({"verdict": "pass", "speedup": 1.7}) == 1.7
    assert reward_of({"verdict": "pass", "speedup": None}) == 1.0


def test_cells_are_bottleneck_class_and_loop_structure() -> None:
    assert cell_of(PASS, SRC) == ("memory", "loops2/≤40")
    assert cell_of({"verdict": "fail"}, "def f():\n    pass\n") == ("fail", "loops0/≤40")
    assert cell_of({"verdict": "pass", "profile": {"bottleneck": "compute-bound (VectorE)"}}, "x = 1\n" * 100) == ("compute", "loops0/≤160")


def test_candidates_are_events_and_index_and_survive_a_lost_index(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    session = store.create({"kind": "search"})
    db = CandidateDB(session)
    a = db.add(SRC, {"verdict": "fail", "reasons": ["wrong answer"] * 9}, parents=[], strategy="evolve")
    b = db.add(
        SRC + "# b\n",
        PASS,
        parents=[0],
        strategy="evolve",
        island=1,
        generation=2,
        turn=3,
        cost_usd=0.25,
        mutation="m",
        model_turn={"content": "c"},
    )
    c = db.add(SRC + "# c\n", {**PASS, "speedup": 3.0, "latency_us": 33.3}, parents=[1, 0], strategy="evolve", island=0, generation=3)
    assert (a.candidate_id, b.candidate_id, c.candidate_id) == (0, 1, 2)
    assert len(a.evaluation["reasons"]) == 5 and "engines" not in b.evaluation["profile"]
    assert [x.candidate_id for x in db.top(5)] == [2, 1] and [x.candidate_id for x in db.top(5, island=1)] == [1]
    assert db.best() is c and db.cost_usd() == 0.25 and db.by_sha(b.code_sha256) is b
    events = [e for e in session.events() if e["type"] == "candidate"]
    assert [e["parents"] for e in events] == [[], [0], [1, 0]]
    assert {"candidate_id", "parents", "strategy", "island", "generation", "turn", "model_turn", "evaluation", "reward"} <= set(events[1])
    assert events[1]["reward"] == 2.0 and events[0]["reward"] == 0.0 and events[1]["model_turn"] == {"content": "c"}
    assert db.source(c).endswith("# c\n")
    db.close()
    session.close()
    (session.dir / "candidates.sqlite").unlink()
    reopened = CandidateDB(store.open(session.id))
    assert reopened.query("SELECT candidate_id, island, speedup FROM candidates ORDER BY candidate_id") == [
        (0, 0, None),
        (1, 1, 2.0),
        (2, 0, 3.0),
    ]
    assert reopened.best().candidate_id == 2  # type: ignore[union-attr]
    reopened.close()


def test_evaluations_to_reach_a_fraction_of_the_best() -> None:
    assert evals_to_fraction([0.5, 0.5, 0.95, 1.0]) == 3
    assert evals_to_fraction([1.0, 1.0]) == 1
    assert evals_to_fraction([0.0, 0.0]) is None and evals_to_fraction([]) is None
