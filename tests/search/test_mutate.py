"""The operators without evaluation: tunable steps, samples and crossover by seed; edits applied as exact diffs."""

from __future__ import annotations

import hashlib
from pathlib import Path

from nkiagent.agent.tuner import scan_tunables
from nkiagent.search.db import Candidate
from nkiagent.search.mutate import MutationRequest, TunableMutator, apply_edits

from .test_search import DEMO

SOURCE = Path(DEMO).read_text()  # TILE_COLS = 128 of [128, 256, 512, 1024]; ROWS_PER_PARTITION = 1 of [1, 2, 4]
PARENT = Candidate(
    0, "sha", [], "evolve", 0, 0, 0, "full", {"verdict": "pass", "latency_us": 1.0, "profile": {"bottleneck": "memory-bound (DMA)"}}, 1.0
)


def _values(src: str) -> dict[str, object]:
    return {t.name: t.value for t in scan_tunables(src)[0]}


def _sha(src: str) -> str:
    return hashlib.sha256(src.encode()).hexdigest()


def test_steps_are_local_diffs_and_reproducible_by_seed() -> None:
    m = TunableMutator()
    a = m.propose(MutationRequest(PARENT, SOURCE, seed=1, temperature=0.0))
    assert a.source is not None and a.source == m.propose(MutationRequest(PARENT, SOURCE, seed=1, temperature=0.0)).source
    changed = {k: v for k, v in _values(a.source).items() if _values(SOURCE)[k] != v}
    assert changed in ({"TILE_COLS": 256}, {"ROWS_PER_PARTITION": 2})  # one neighbouring choice of one tunable
    (call,) = a.model_turn["tool_calls"]  # type: ignore[index]
    assert call["function"]["name"] == "edit_file" and a.why.startswith("step (memory-bound (dma)): ")
    samples = {m.propose(MutationRequest(PARENT, SOURCE, seed=s, temperature=1.0)).source for s in range(12)}
    assert len(samples) >= 5  # independent samples spread over the 12 settings


def test_crossover_copies_a_setting_from_an_inspiration() -> None:
    donor = SOURCE.replace("TILE_COLS = 128 ", "TILE_COLS = 1024 ")
    inspiration = Candidate(5, "sha5", [], "evolve", 1, 1, 0, "full", {"verdict": "pass"}, 2.0)
    whys = [TunableMutator().propose(MutationRequest(PARENT, SOURCE, [(inspiration, donor)], seed=s, temperature=0.0)) for s in range(10)]
    cross = [p for p in whys if p.why.startswith("crossover")]
    assert cross and all(
        p.why == "crossover: TILE_COLS = 1024 from an inspiration" and _values(p.source or "")["TILE_COLS"] == 1024 for p in cross
    )


def test_a_parent_whose_neighbourhood_is_evaluated_gives_nothing() -> None:
    tunables = scan_tunables(SOURCE)[0]
    everything = set()
    for tile in tunables[0].choices:
        for rows in tunables[1].choices:
            everything.add(
                _sha(SOURCE.replace(tunables[0].text, tunables[0].line_with(tile)).replace(tunables[1].text, tunables[1].line_with(rows)))
            )
    p = TunableMutator().propose(MutationRequest(PARENT, SOURCE, seed=0, temperature=0.5, seen=everything))
    assert p.source is None and p.why == "no configuration near candidate 0 is left unevaluated"
    p = TunableMutator().propose(MutationRequest(PARENT, "X = 1\n", seed=0))
    assert p.source is None and p.why == "the parent declares no `# nkiagent: tune` constants"


def test_edits_apply_in_order_and_refuse_ambiguity() -> None:
    assert apply_edits("a b a", [("edit_file", {"old": "b", "new": "c"}), ("edit_file", {"old": "c a", "new": "d"})]) == ("a d", "")
    assert apply_edits("a b a", [("edit_file", {"old": "a", "new": "x"})]) == (
        None,
        "edit_file: `old` occurs 2 times in the parent (it must occur exactly once): 'a'",
    )
    assert apply_edits("x", [("write_file", {"content": "y"})]) == ("y", "")
    assert apply_edits("x", [("submit", {})]) == (None, "the search only applies edit_file and write_file, not submit")
