"""The search engine: one loop under every strategy — propose, de-duplicate, evaluate, record, check the budget.

A search is a session (``sessions/<id>/``, ``meta.json`` with ``kind: search``) whose
``candidate`` events are the :class:`~.db.CandidateDB`. Per round the strategy names the
children it wants; the operator proposes them (model calls run concurrently, up to
``model_concurrency``; litellm's backoff handles rate limits); proposals already in the
database are dropped; the executor evaluates the rest in parallel through the cascade; the
results are recorded in the order asked, so a fixed seed gives the same database with any
executor. The round counter and the strategy's state (migrants) are persisted in
``meta.json`` after every round, so :func:`resume_search` continues where a stopped or killed
search left off.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ..sessions.store import Session, SessionStore
from .db import Candidate, CandidateDB
from .evaluate import EvalJob, Executor, make_executor
from .mutate import ModelMutator, MutationRequest, Mutator, Proposal, TunableMutator, feedback_text
from .strategies import ChildSpec, Strategy, make_strategy

__all__ = ["SearchConfig", "SearchOutcome", "SearchRun", "make_mutator", "resume_search", "run_search", "starting_kernel"]


@dataclass
class SearchConfig:
    """Everything that defines a search; stored in ``meta.json`` so a resume needs only the session."""

    task: str
    strategy: str
    model: str = "builtin/tuner"
    target: str = "trn2"
    seed: int = 0
    temperature: float = 0.7
    api_base: str | None = None
    kernel: str | None = None  #: starting kernel file (default: the search's or demo's tunable kernel, else the baseline)
    # budgets (None: no limit)
    max_candidates: int = 16
    budget_usd: float | None = None
    max_seconds: float | None = None
    target_speedup: float | None = None
    target_sol: float | None = None  #: stop at this fraction of the speed of light (0–1)
    patience: int | None = None  #: stop after this many candidates without a new best
    # strategies
    beam_width: int = 2
    samples: int = 2  #: beam: children per beam and step
    islands: int = 2
    per_island: int = 2
    migrate_every: int = 3
    # evaluation
    workers: int | None = None
    executor: str = "local"
    ray_address: str | None = None
    model_concurrency: int = 4
    cascade: bool = True
    seeds: int = 1  #: correctness seeds of the full stage (the agent's `eval` uses 5)
    hidden: bool = True

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class SearchOutcome:
    session: Session
    stop_reason: str
    best: Candidate | None
    candidates: int
    cost_usd: float
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "session_id": self.session.id,
            "session_dir": str(self.session.dir),
            "stop_reason": self.stop_reason,
            "candidates": self.candidates,
            "cost_usd": round(self.cost_usd, 6),
            "seconds": round(self.seconds, 2),
            "best": None
            if best is None
            else {
                "candidate_id": best.candidate_id,
                "speedup": best.speedup,
                "latency_us": best.evaluation.get("latency_us"),
                "timing_source": best.evaluation.get("timing_source"),
                "code_sha256": best.code_sha256,
                "kernel": str(self.session.dir / "kernels" / f"{best.code_sha256}.py"),
            },
        }


def starting_kernel(task: Any, given: str | None = None) -> str:
    """The starting kernel's text: ``given``, else the agent's (a demo kernel with tunables, or the task's baseline)."""
    if given:
        return Path(given).read_text()
    from ..agent.runner import starting_kernel as session_start_kernel

    return session_start_kernel(task).read_text()


def make_mutator(cfg: SearchConfig, task: Any) -> Mutator:
    """``builtin/tuner`` drives tunables directly; any other model spec proposes edits through the model."""
    if cfg.model == "builtin/tuner":
        return TunableMutator()
    from ..agent.models import get_model

    opts: dict[str, Any] = {}
    if not cfg.model.startswith("scripted:"):
        opts["temperature"] = cfg.temperature
        if cfg.api_base:
            opts["api_base"] = cfg.api_base
    return ModelMutator(get_model(cfg.model, **opts), task, cfg.target)


class SearchRun:
    """One open search: the database, the operator, the executor, the budget and the persisted state."""

    def __init__(
        self,
        session: Session,
        config: SearchConfig,
        mutator: Mutator,
        executor: Executor,
        on_candidate: Callable[[Candidate], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        self.session = session
        self.config = config
        self.mutator = mutator
        self.executor = executor
        self.offline = isinstance(mutator, TunableMutator)
        self.db = CandidateDB(session)
        self.strategy: Strategy = make_strategy(config.strategy)
        self.state: dict[str, Any] = dict(session.meta().get("search_state") or {"round": 0, "extra_cost_usd": 0.0, "seconds": 0.0})
        self.on_candidate = on_candidate
        self.should_stop = should_stop  #: asked before every round: a person (the UI's ctrl+c) may stop the search
        self._t0 = time.monotonic()
        self._empty_rounds = 0

    # -- state ---------------------------------------------------------------------------------------
    @property
    def round(self) -> int:
        return int(self.state["round"])

    def seconds(self) -> float:
        return float(self.state.get("seconds", 0.0)) + time.monotonic() - self._t0

    def cost_usd(self) -> float:
        return self.db.cost_usd() + float(self.state.get("extra_cost_usd", 0.0))

    def _persist(self) -> None:
        self.session.update_meta(search_state={**self.state, "seconds": self.seconds()})

    def note(self, text: str, **fields_: Any) -> None:
        self.session.append("note", text=text, round=self.round, **fields_)

    # -- budget ----------------------------------------------------------------------------------------
    def stop_reason(self) -> str:
        """Why the search must stop now ("" to go on)."""
        cfg = self.config
        best = self.db.best()
        if self.should_stop is not None and self.should_stop():
            return "stopped by the user"
        if len(self.db) >= cfg.max_candidates:
            return f"max candidates ({cfg.max_candidates}) evaluated"
        if cfg.budget_usd is not None and self.cost_usd() >= cfg.budget_usd:
            return f"budget of ${cfg.budget_usd:g} spent (${self.cost_usd():.4f})"
        if cfg.max_seconds is not None and self.seconds() >= cfg.max_seconds:
            return f"wall time of {cfg.max_seconds:g} s used"
        if best is not None and cfg.target_speedup is not None and (best.speedup or 0.0) >= cfg.target_speedup:
            return f"target speedup {cfg.target_speedup:g}× reached ({best.speedup}×)"
        if best is not None and cfg.target_sol is not None and (best.evaluation.get("fraction_of_peak") or 0.0) >= cfg.target_sol:
            return f"target {100 * cfg.target_sol:g}% of the speed of light reached"
        if best is not None and cfg.patience is not None and len(self.db) - 1 - best.candidate_id >= cfg.patience:
            return f"plateau: {cfg.patience} candidates without a new best"
        if self._empty_rounds >= 3:
            return "search space exhausted: three rounds proposed nothing new"
        return ""

    # -- the loop ---------------------------------------------------------------------------------------
    def _record(
        self, source: str, ev: dict[str, Any], *, parents: list[int], island: int, generation: int, turn: int, proposal: Proposal
    ) -> Candidate:
        c = self.db.add(
            source,
            ev,
            parents=parents,
            strategy=self.strategy.name,
            island=island,
            generation=generation,
            turn=turn,
            stage=str(ev.get("stage", "full")),
            cost_usd=proposal.cost_usd,
            mutation=proposal.why,
            model_turn=proposal.model_turn,
        )
        if self.on_candidate is not None:
            self.on_candidate(c)
        return c

    def _job(self, source: str) -> EvalJob:
        return EvalJob(
            source, self.config.task, self.config.target, seeds=self.config.seeds, hidden=self.config.hidden, cascade=self.config.cascade
        )

    def start(self, source: str) -> None:
        """Evaluate the starting kernel as candidate 0 (once; a resumed search already has it)."""
        if len(self.db):
            return
        (ev,) = self.executor.map([self._job(source)])
        self._record(source, ev, parents=[], island=0, generation=0, turn=0, proposal=Proposal(source, "starting kernel"))

    def _request(self, spec: ChildSpec, seen: set[str]) -> MutationRequest:
        messages = self._trajectory(spec.parent) if spec.refine and isinstance(self.mutator, ModelMutator) else None
        return MutationRequest(
            spec.parent,
            self.db.source(spec.parent),
            [(c, self.db.source(c)) for c in spec.inspirations],
            spec.seed,
            spec.temperature,
            seen,
            messages,
        )

    def _trajectory(self, parent: Candidate) -> list[dict[str, Any]]:
        """A refine conversation rebuilt from the database: the opening on the start, then each turn and its evaluation."""
        assert isinstance(self.mutator, ModelMutator)
        root = self.db.candidates[0]
        messages = self.mutator.opening(root, self.db.source(root), [])
        for c in self.db.candidates[1:]:
            if not c.model_turn:
                continue
            calls = c.model_turn.get("tool_calls") or []
            messages.append({"role": "assistant", "content": c.model_turn.get("content", ""), **({"tool_calls": calls} if calls else {})})
            text = feedback_text(c)
            messages += [{"role": "tool", "tool_call_id": call["id"], "content": text} for call in calls]
        messages.append(
            {
                "role": "user",
                "content": f"The best kernel so far is candidate #{parent.candidate_id}; your next edit applies to it:\n"
                f"```python\n{self.db.source(parent)}\n```",
            }
        )
        return messages

    def step(self) -> list[Candidate]:
        """One round: the strategy's children, proposed, de-duplicated, evaluated and recorded."""
        specs = self.strategy.next_round(self)[: max(0, self.config.max_candidates - len(self.db))]
        seen = {c.code_sha256 for c in self.db.candidates}
        if self.mutator.concurrent and len(specs) > 1:
            with ThreadPoolExecutor(max_workers=max(1, self.config.model_concurrency), thread_name_prefix="nkiagent-model") as pool:
                proposals = list(pool.map(lambda s: self.mutator.propose(self._request(s, seen)), specs))
        else:
            proposals = []
            for s in specs:
                proposals.append(self.mutator.propose(self._request(s, seen)))
                if proposals[-1].source is not None:
                    seen.add(hashlib.sha256(proposals[-1].source.encode()).hexdigest())
        kept: list[tuple[ChildSpec, Proposal, str]] = []
        shas: set[str] = {c.code_sha256 for c in self.db.candidates}
        for spec, prop in zip(specs, proposals):
            if prop.source is None:
                self.state["extra_cost_usd"] = float(self.state.get("extra_cost_usd", 0.0)) + prop.cost_usd
                self.note(
                    f"no child from candidate #{spec.parent.candidate_id}: {prop.why}", model_turn=prop.model_turn, cost_usd=prop.cost_usd
                )
                continue
            sha = hashlib.sha256(prop.source.encode()).hexdigest()
            if sha in shas:
                self.state["extra_cost_usd"] = float(self.state.get("extra_cost_usd", 0.0)) + prop.cost_usd
                continue
            shas.add(sha)
            kept.append((spec, prop, prop.source))
        results = self.executor.map([self._job(src) for _, _, src in kept])
        out = [
            self._record(src, ev, parents=[s.parent.candidate_id], island=s.island, generation=s.generation, turn=s.turn, proposal=p)
            for (s, p, src), ev in zip(kept, results)
        ]
        self._empty_rounds = 0 if out else self._empty_rounds + 1
        self.state["round"] = self.round + 1
        self._persist()
        return out

    def run(self, start_source: str) -> str:
        """Search until a budget or the strategy stops it; the stop reason."""
        self.start(start_source)
        while not (reason := self.stop_reason()):
            self.step()
        self._persist()
        return reason


def _open(
    session: Session, cfg: SearchConfig, on_candidate: Callable[[Candidate], None] | None, should_stop: Callable[[], bool] | None
) -> tuple[SearchRun, str]:
    from ..tasks import get_task

    task = get_task(cfg.task)
    mutator = make_mutator(cfg, task)
    if isinstance(mutator, ModelMutator):
        session.update_meta(tools=mutator.tools)  # the tools a model search offers, for exports
    executor = make_executor(cfg.executor, cfg.workers, cfg.ray_address)
    return SearchRun(session, cfg, mutator, executor, on_candidate, should_stop), starting_kernel(task, cfg.kernel)


def _finish(run: SearchRun, reason: str) -> SearchOutcome:
    best = run.db.best()
    run.session.append(
        "session_end", stop_reason=reason, best=None if best is None else best.candidate_id, candidates=len(run.db), cost_usd=run.cost_usd()
    )
    return SearchOutcome(run.session, reason, best, len(run.db), run.cost_usd(), run.seconds())


def _drive(
    session: Session, cfg: SearchConfig, on_candidate: Callable[[Candidate], None] | None, should_stop: Callable[[], bool] | None = None
) -> SearchOutcome:
    run, source = _open(session, cfg, on_candidate, should_stop)
    try:
        return _finish(run, run.run(source))
    finally:
        run.executor.close()
        run.db.close()
        session.close()


def run_search(
    cfg: SearchConfig,
    sessions_dir: Path,
    on_candidate: Callable[[Candidate], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> SearchOutcome:
    """Start a new search session and run it to a stop (``should_stop`` returning True ends it after the current round)."""
    from .. import __version__
    from ..tasks import get_task

    make_strategy(cfg.strategy)  # an unknown name fails here, before a session is created
    task = get_task(cfg.task).name  # so does an unknown task
    session = SessionStore(sessions_dir).create(
        {
            "kind": "search",
            "task": task,
            "model": cfg.model,
            "strategy": cfg.strategy,
            "target": cfg.target,
            "config": asdict(cfg),
            "versions": {"nkiagent": __version__},
        }
    )
    session.append("session_start", kind="search", task=task, model=cfg.model, strategy=cfg.strategy, target=cfg.target)
    return _drive(session, cfg, on_candidate, should_stop)


def resume_search(
    session_dir: Path,
    overrides: dict[str, Any] | None = None,
    on_candidate: Callable[[Candidate], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> SearchOutcome:
    """Continue a stored search from its database (budgets may be raised with ``overrides``)."""
    session = SessionStore(session_dir.parent).open(session_dir.name)
    meta = session.meta()
    if meta.get("kind") != "search":
        session.close()
        raise ValueError(f"session {session_dir.name} is not a search (kind {meta.get('kind', 'agent')!r})")
    cfg = SearchConfig.from_dict({**meta["config"], **{k: v for k, v in (overrides or {}).items() if v is not None}})
    session.update_meta(config=asdict(cfg))
    session.append("note", text="search resumed", candidates=sum(1 for e in session.events() if e.get("type") == "candidate"))
    return _drive(session, cfg, on_candidate, should_stop)
