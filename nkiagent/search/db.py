"""The candidate database: every kernel a search evaluated, shared by all strategies, resumable.

The session's ``events.jsonl`` is the record: each candidate is one ``candidate`` event with
``candidate_id, parents, strategy, island, generation, turn, model_turn, evaluation, reward``
(plus ``code_sha256``, ``stage``, ``cost_usd``, ``mutation``), and its code is in
``kernels/<sha256>.py``. ``candidates.sqlite`` in the session folder is a queryable index of the
same rows; it is rebuilt from the events whenever the two disagree (a crash between the two
writes, a deleted index), so the events alone make a search resumable and exportable.
"""

from __future__ import annotations

import ast
import json
import math
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from ..sessions.store import Session

__all__ = ["Candidate", "CandidateDB", "cell_of", "compact_evaluation_dict", "reward_of"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS candidates (
    candidate_id INTEGER PRIMARY KEY, code_sha256 TEXT NOT NULL, parents TEXT NOT NULL, strategy TEXT NOT NULL,
    island INTEGER NOT NULL, generation INTEGER NOT NULL, turn INTEGER NOT NULL, stage TEXT NOT NULL,
    verdict TEXT NOT NULL, latency_us REAL, speedup REAL, fraction_of_peak REAL, bottleneck TEXT NOT NULL,
    reward REAL NOT NULL, cost_usd REAL NOT NULL, mutation TEXT NOT NULL, evaluation TEXT NOT NULL,
    model_turn TEXT, ts REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS by_island ON candidates (island, verdict, speedup);
CREATE INDEX IF NOT EXISTS by_sha ON candidates (code_sha256);
"""
_COLUMNS = (
    "candidate_id",
    "code_sha256",
    "parents",
    "strategy",
    "island",
    "generation",
    "turn",
    "stage",
    "verdict",
    "latency_us",
    "speedup",
    "fraction_of_peak",
    "bottleneck",
    "reward",
    "cost_usd",
    "mutation",
    "evaluation",
    "model_turn",
    "ts",
)
#: evaluation fields a candidate keeps (the full profile stays in the verifier's answer; the summary text is kept for prompts)
_EVAL_KEYS = (
    "verdict",
    "task",
    "target",
    "reasons",
    "compiled",
    "correct",
    "latency_us",
    "timing_source",
    "model_version",
    "baseline_latency_us",
    "speedup",
    "sol_latency_us",
    "fraction_of_peak",
    "code_sha256",
    "backend",
    "wall_s",
)


def compact_evaluation_dict(ev: dict[str, Any]) -> dict[str, Any]:
    """The evaluation as a candidate stores it: the contract's fields, reasons capped, the profile's bottleneck and summary."""
    out = {k: ev.get(k) for k in _EVAL_KEYS if k in ev}
    out["reasons"] = list(ev.get("reasons", []))[:5]
    prof = ev.get("profile") or {}
    out["profile"] = {k: prof[k] for k in ("bottleneck", "summary", "advice") if k in prof}
    return out


def reward_of(ev: dict[str, Any]) -> float:
    """The scalar a search optimizes and the exporters may train on: why these values.

    ``pass`` earns its speedup over the task's baseline (1.0 when no baseline was measured), so
    a kernel twice as fast is worth twice as much; ``fail`` earns 0; ``rejected`` (a cheat: the
    static gate, an integrity check or a latency below the speed of light) earns −1, below any
    honest attempt.
    """
    verdict = ev.get("verdict")
    if verdict == "pass":
        return float(ev.get("speedup") or 1.0)
    return -1.0 if verdict == "rejected" else 0.0


def _bottleneck_class(ev: dict[str, Any]) -> str:
    """``memory``, ``compute``, ``latency`` or ``other`` for a passing kernel; the verdict otherwise."""
    if ev.get("verdict") != "pass":
        return str(ev.get("verdict", "fail"))
    text = str((ev.get("profile") or {}).get("bottleneck", "")).lower()
    return next((k for k in ("memory", "compute", "latency") if text.startswith(k)), "other")


_SIZE_BUCKETS = (40, 80, 160)


def cell_of(evaluation: dict[str, Any], source: str) -> tuple[str, str]:
    """The MAP-Elites cell: (bottleneck class, code-structure feature).

    The structure feature is the loop-nesting depth and a size bucket of the code lines, so a
    kernel restructured into a deeper pipeline lands in another cell than a retuned one.
    """
    lines = [ln for ln in source.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    size = next((f"≤{b}" for b in _SIZE_BUCKETS if len(lines) <= b), f">{_SIZE_BUCKETS[-1]}")
    return _bottleneck_class(evaluation), f"loops{_loop_depth(source)}/{size}"


def _loop_depth(source: str) -> int:
    """The deepest nesting of ``for``/``while`` loops (parsed, never run; 0 for code that does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return 0

    def depth(node: ast.AST) -> int:
        inner = max((depth(child) for child in ast.iter_child_nodes(node)), default=0)
        return inner + 1 if isinstance(node, (ast.For, ast.While, ast.AsyncFor)) else inner

    return depth(tree)


@dataclass
class Candidate:
    """One evaluated kernel and how it was found."""

    candidate_id: int
    code_sha256: str
    parents: list[int]
    strategy: str
    island: int
    generation: int
    turn: int
    stage: str  #: the last cascade stage it ran: ``static``, ``small`` or ``full``
    evaluation: dict[str, Any]
    reward: float
    cost_usd: float = 0.0
    mutation: str = ""
    model_turn: dict[str, Any] | None = None
    ts: float = 0.0
    cell: tuple[str, str] = ("fail", "")

    @property
    def verdict(self) -> str:
        return str(self.evaluation.get("verdict", "fail"))

    @property
    def passed(self) -> bool:
        return self.verdict == "pass" and self.evaluation.get("latency_us") is not None

    @property
    def speedup(self) -> float | None:
        return self.evaluation.get("speedup")

    @property
    def score(self) -> float:
        """Ranking among candidates: passing ones by speedup (or 1/latency without a baseline), then the rest by reward."""
        if self.passed:
            return float(self.speedup) if self.speedup is not None else 1.0 / float(self.evaluation["latency_us"])
        return self.reward - 10.0

    def event_fields(self) -> dict[str, Any]:
        return {
            "candidate_id": self.candidate_id,
            "code_sha256": self.code_sha256,
            "parents": self.parents,
            "strategy": self.strategy,
            "island": self.island,
            "generation": self.generation,
            "turn": self.turn,
            "stage": self.stage,
            "model_turn": self.model_turn,
            "evaluation": self.evaluation,
            "reward": self.reward,
            "cost_usd": self.cost_usd,
            "mutation": self.mutation,
            "verdict": self.verdict,
            "latency_us": self.evaluation.get("latency_us"),
            "speedup": self.speedup,
            "timing_source": self.evaluation.get("timing_source"),
            "cell": list(self.cell),
        }

    @classmethod
    def from_event(cls, e: dict[str, Any]) -> Candidate:
        kind, feature = e.get("cell") or ("fail", "")  # JSON gives the cell back as a list of two
        return cls(
            int(e["candidate_id"]),
            e["code_sha256"],
            [int(p) for p in e.get("parents", [])],
            e.get("strategy", ""),
            int(e.get("island", 0)),
            int(e.get("generation", 0)),
            int(e.get("turn", 0)),
            e.get("stage", "full"),
            e.get("evaluation") or {},
            float(e.get("reward", 0.0)),
            float(e.get("cost_usd", 0.0)),
            e.get("mutation", ""),
            e.get("model_turn"),
            float(e.get("ts", 0.0)),
            (str(kind), str(feature)),
        )


@dataclass
class CandidateDB:
    """The candidates of one session: appended to its events, indexed in SQLite, kept in memory in id order."""

    session: Session
    candidates: list[Candidate] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._by_sha: dict[str, Candidate] = {}
        self._conn = sqlite3.connect(self.session.dir / "candidates.sqlite", check_same_thread=False)
        self._conn.executescript(_SCHEMA)
        for e in self.session.events():
            if e.get("type") == "candidate" and "candidate_id" in e:
                c = Candidate.from_event(e)
                self.candidates.append(c)
                self._by_sha.setdefault(c.code_sha256, c)
        indexed = self._conn.execute("SELECT COUNT(*), COALESCE(MAX(candidate_id), -1) FROM candidates").fetchone()
        if tuple(indexed) != (len(self.candidates), self.candidates[-1].candidate_id if self.candidates else -1):
            with self._conn:
                self._conn.execute("DELETE FROM candidates")
                for c in self.candidates:
                    self._index(c)

    def _index(self, c: Candidate) -> None:
        row = (
            c.candidate_id,
            c.code_sha256,
            json.dumps(c.parents),
            c.strategy,
            c.island,
            c.generation,
            c.turn,
            c.stage,
            c.verdict,
            c.evaluation.get("latency_us"),
            c.speedup,
            c.evaluation.get("fraction_of_peak"),
            c.cell[0],
            c.reward,
            c.cost_usd,
            c.mutation,
            json.dumps(c.evaluation, default=str),
            json.dumps(c.model_turn, default=str) if c.model_turn else None,
            c.ts,
        )
        self._conn.execute(f"INSERT OR REPLACE INTO candidates ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})", row)

    def add(
        self,
        source: str,
        evaluation: dict[str, Any],
        *,
        parents: list[int],
        strategy: str,
        island: int = 0,
        generation: int = 0,
        turn: int = 0,
        stage: str = "full",
        cost_usd: float = 0.0,
        mutation: str = "",
        model_turn: dict[str, Any] | None = None,
    ) -> Candidate:
        """Record one evaluated kernel: its code, a ``candidate`` event (durable first), then the index row."""
        sha = self.session.save_kernel(source)
        ev = compact_evaluation_dict(evaluation)
        c = Candidate(
            len(self.candidates),
            sha,
            parents,
            strategy,
            island,
            generation,
            turn,
            stage,
            ev,
            reward_of(ev),
            cost_usd,
            mutation,
            model_turn,
            cell=cell_of(evaluation, source),
        )
        c.ts = float(self.session.append("candidate", **c.event_fields())["ts"])
        with self._conn:
            self._index(c)
        self.candidates.append(c)
        self._by_sha.setdefault(sha, c)
        return c

    def source(self, c: Candidate) -> str:
        return self.session.kernel(c.code_sha256)

    def by_sha(self, sha: str) -> Candidate | None:
        return self._by_sha.get(sha)

    def __len__(self) -> int:
        return len(self.candidates)

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Read-only SQL over the ``candidates`` table (for reports and ad-hoc questions)."""
        return [tuple(r) for r in self._conn.execute(sql, params).fetchall()]

    def top(self, k: int, island: int | None = None, ids: set[int] | None = None) -> list[Candidate]:
        """The ``k`` best passing candidates (by speedup, then latency, then age), optionally of one island or id set."""
        where = "verdict = 'pass' AND latency_us IS NOT NULL"
        params: list[Any] = []
        if island is not None:
            where += " AND island = ?"
            params.append(island)
        rows = self.query(
            f"SELECT candidate_id FROM candidates WHERE {where} ORDER BY COALESCE(speedup, 0) DESC, latency_us ASC, candidate_id ASC",
            tuple(params),
        )
        picked = [self.candidates[r[0]] for r in rows if ids is None or r[0] in ids]
        return picked[:k]

    def best(self) -> Candidate | None:
        top = self.top(1)
        return top[0] if top else None

    def cost_usd(self) -> float:
        return math.fsum(c.cost_usd for c in self.candidates)

    def close(self) -> None:
        self._conn.close()
