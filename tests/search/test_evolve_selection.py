"""Evolve's bookkeeping on a hand-built database (no evaluation): MAP-Elites cells, migration, parents and inspirations."""

from __future__ import annotations

from pathlib import Path

from nkiagent.search.engine import SearchConfig, SearchRun
from nkiagent.search.evaluate import LocalExecutor
from nkiagent.search.mutate import TunableMutator
from nkiagent.search.strategies import Evolve
from nkiagent.sessions.store import SessionStore


def _ev(speedup: float, bottleneck: str) -> dict:
    return {"verdict": "pass", "latency_us": 100.0 / speedup, "speedup": speedup, "profile": {"bottleneck": bottleneck}}


def test_cells_migration_and_parent_choice(tmp_path: Path) -> None:
    session = SessionStore(tmp_path).create({"kind": "search"})
    run = SearchRun(
        session,
        SearchConfig(task="vector_add", strategy="evolve", islands=2, per_island=3, migrate_every=3),
        TunableMutator(),
        LocalExecutor(1),
    )
    shallow = "X = 1\nfor i in range(2):\n    pass\n"
    deep = "X = 1\nfor i in range(2):\n    for j in range(2):\n        pass\n"
    add = run.db.add
    add(shallow, _ev(1.0, "memory-bound (DMA)"), parents=[], strategy="evolve")  # 0: start
    add(shallow + "#1\n", _ev(1.5, "memory-bound (DMA)"), parents=[0], strategy="evolve", island=0)  # 1
    add(deep, _ev(1.2, "compute-bound (VectorE)"), parents=[0], strategy="evolve", island=0)  # 2
    add(shallow + "#3\n", _ev(2.0, "memory-bound (DMA)"), parents=[0], strategy="evolve", island=1)  # 3
    add(shallow + "#4\n", {"verdict": "fail"}, parents=[0], strategy="evolve", island=1)  # 4
    archive = Evolve.archive(run)
    assert {cell: c.candidate_id for cell, c in archive.items()} == {("memory", "loops1/≤40"): 3, ("compute", "loops2/≤40"): 2}
    assert [c.candidate_id for c in Evolve.population(run, 1)] == [0, 3, 4]
    run.state["round"] = 3  # a migration round
    specs = Evolve().next_round(run)
    assert run.state["migrants"] == {"1": [1], "0": [3]}
    assert [c.candidate_id for c in Evolve.population(run, 0)] == [0, 1, 2, 3] and [c.candidate_id for c in Evolve.population(run, 1)] == [
        0,
        1,
        3,
        4,
    ]
    notes = [e["text"] for e in session.events() if e["type"] == "note"]
    assert notes == [
        "migration: candidate #1 (speedup 1.5) from island 0 to island 1",
        "migration: candidate #3 (speedup 2.0) from island 1 to island 0",
    ]
    assert [(s.island, s.generation) for s in specs] == [(0, 4)] * 3 + [(1, 4)] * 3
    for s in specs:
        assert s.parent.candidate_id in {c.candidate_id for c in Evolve.population(run, s.island)} | {
            c.candidate_id for c in archive.values()
        }
        assert s.parent not in s.inspirations and 1 <= len(s.inspirations) <= 2
    assert specs == Evolve().next_round(run)  # the same round asks for the same children (resume-safe)
    assert run.state["migrants"] == {"1": [1], "0": [3]}  # and migrates once
    run.db.close()
    run.executor.close()
