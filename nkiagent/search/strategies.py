"""The four strategies: small classes that only decide *which children to ask for next*.

Everything else — proposing (the operator), de-duplicating, cascade evaluation in parallel,
recording, budgets, resuming — is the engine's (:mod:`.engine`). A strategy reads the
candidate database and the persisted search state and returns one round of
:class:`ChildSpec`; it keeps no other state, so a resumed search continues the same way.
Randomness comes from ``random.Random(f"{seed}:{round}:…")``: a fixed seed gives the same
rounds whatever executor evaluates them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .db import Candidate

if TYPE_CHECKING:
    from .engine import SearchRun

__all__ = ["STRATEGIES", "Beam", "BestOfN", "ChildSpec", "Evolve", "Refine", "Strategy", "make_strategy"]


@dataclass
class ChildSpec:
    """One child to ask for: from ``parent`` with ``inspirations``, on ``island`` in ``generation``."""

    parent: Candidate
    seed: int
    temperature: float
    island: int = 0
    generation: int = 1
    turn: int = 0
    inspirations: list[Candidate] = field(default_factory=list)
    refine: bool = False  #: continue the refine trajectory's conversation (model operators)


class Strategy:
    """Base: ``name`` and :meth:`next_round`."""

    name = ""

    def next_round(self, run: SearchRun) -> list[ChildSpec]:
        raise NotImplementedError

    @staticmethod
    def _rng(run: SearchRun, *parts: object) -> random.Random:
        return random.Random(":".join(str(p) for p in (run.config.seed, run.round, *parts)))

    def _seed(self, run: SearchRun, *parts: object) -> int:
        return self._rng(run, "seed", *parts).randrange(2**31)


class BestOfN(Strategy):
    """N independent samples of the starting kernel (temperature, seeds); the best ``pass`` wins.

    With ``builtin/tuner`` an independent sample draws every tunable at random (temperature 1).
    A round asks for as many samples as there are evaluation slots, twice over.
    """

    name = "best-of-n"

    def next_round(self, run: SearchRun) -> list[ChildSpec]:
        root = run.db.candidates[0]
        temperature = max(1.0, run.config.temperature) if run.offline else run.config.temperature
        k = max(1, 2 * run.executor.workers)
        return [ChildSpec(root, self._seed(run, j), temperature, generation=1, turn=run.round) for j in range(k)]


class Refine(Strategy):
    """One trajectory: each turn edits the best kernel so far, seeing every earlier result (the agent loop's feedback).

    A model operator continues one conversation (its earlier turns and each turn's evaluation as
    the tool results); ``builtin/tuner`` makes one local step from the best configuration per turn.
    """

    name = "refine"

    def next_round(self, run: SearchRun) -> list[ChildSpec]:
        parent = run.db.best() or run.db.candidates[0]
        return [
            ChildSpec(parent, self._seed(run, 0), min(run.config.temperature, 0.5), generation=run.round + 1, turn=run.round, refine=True)
        ]


class Beam(Strategy):
    """B beams × K samples per step: the best B passing kernels so far (by speedup) each get K children that see their parent's result."""

    name = "beam"

    def next_round(self, run: SearchRun) -> list[ChildSpec]:
        beams = run.db.top(run.config.beam_width) or [run.db.candidates[0]]
        return [
            ChildSpec(b, self._seed(run, b.candidate_id, k), run.config.temperature, generation=run.round + 1, turn=run.round)
            for b in beams
            for k in range(run.config.samples)
        ]


class Evolve(Strategy):
    """Islands with migration and a MAP-Elites archive (AlphaEvolve / OpenEvolve style).

    Each island's population is its own candidates, the migrants it received and the starting
    kernel. Per child the parent is picked by exploitation (one of the island's 3 best),
    exploration (any passing member of the island) or elitism (the best of a random MAP-Elites
    cell, whatever its island); the prompt shows up to two inspirations — the elites of other
    cells and the island's best. Every ``migrate_every`` generations each island's best moves
    to the next island (a ring).
    """

    name = "evolve"
    exploit, explore = 0.6, 0.25  #: the rest of the probability mass picks elites

    def next_round(self, run: SearchRun) -> list[ChildSpec]:
        cfg = run.config
        generation = run.round + 1
        if run.round > 0 and run.round % cfg.migrate_every == 0 and run.state.get("migrated_round") != run.round:
            self._migrate(run)
            run.state["migrated_round"] = run.round  # once per round, also when a resumed search asks for this round again
        archive = self.archive(run)
        specs: list[ChildSpec] = []
        for island in range(cfg.islands):
            members = self.population(run, island)
            ranked = sorted((c for c in members if c.passed), key=lambda c: (-c.score, c.candidate_id))
            for j in range(cfg.per_island):
                rng = self._rng(run, island, j)
                r = rng.random()
                if ranked and r < self.exploit:
                    parent = rng.choice(ranked[:3])
                elif ranked and r < self.exploit + self.explore:
                    parent = rng.choice(ranked)
                elif archive:
                    parent = archive[rng.choice(sorted(archive))]
                else:
                    parent = run.db.candidates[0]
                inspirations = [e for _, e in sorted(archive.items()) if e.cell != parent.cell and e is not parent]
                rng.shuffle(inspirations)
                if ranked and ranked[0] is not parent and ranked[0] not in inspirations[:1]:
                    inspirations.insert(0, ranked[0])
                specs.append(
                    ChildSpec(parent, self._seed(run, island, j), cfg.temperature, island, generation, run.round, inspirations[:2])
                )
        return specs

    @staticmethod
    def archive(run: SearchRun) -> dict[tuple[str, str], Candidate]:
        """MAP-Elites: the best passing candidate of each (bottleneck class, structure) cell."""
        cells: dict[tuple[str, str], Candidate] = {}
        for c in run.db.candidates:
            if c.passed and (c.cell not in cells or c.score > cells[c.cell].score):
                cells[c.cell] = c
        return cells

    @staticmethod
    def population(run: SearchRun, island: int) -> list[Candidate]:
        migrants = set(run.state.get("migrants", {}).get(str(island), []))
        return [c for c in run.db.candidates if c.candidate_id == 0 or c.island == island or c.candidate_id in migrants]

    def _migrate(self, run: SearchRun) -> None:
        n = run.config.islands
        if n < 2:
            return
        migrants: dict[str, list[int]] = run.state.setdefault("migrants", {})
        for island in range(n):
            best = sorted((c for c in self.population(run, island) if c.passed), key=lambda c: (-c.score, c.candidate_id))
            dest = (island + 1) % n
            if best and best[0].island != dest and best[0].candidate_id not in migrants.get(str(dest), []):
                migrants.setdefault(str(dest), []).append(best[0].candidate_id)
                run.note(f"migration: candidate #{best[0].candidate_id} (speedup {best[0].speedup}) from island {island} to island {dest}")


STRATEGIES: dict[str, type[Strategy]] = {s.name: s for s in (BestOfN, Refine, Beam, Evolve)}


def make_strategy(name: str) -> Strategy:
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
    return STRATEGIES[name]()
