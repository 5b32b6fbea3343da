"""A stored session read back as turns and candidates: the one view every exporter works from.

Only session files are read (``meta.json``, ``events.jsonl``, ``kernels/``), so any session
ever written can be exported later. A *turn* is one model call: the messages it was sent,
the assistant message it answered, and what followed before the next call (tool calls, the
review decision, applied edits, evaluations, candidates). The whole trajectory is the last
request's messages with every assistant message replaced by the original answer of its turn
(the context sent to the model may have condensed older proposals), plus the last answer.

A turn is *trainable* (SFT weight 1) when its answer changed the kernel in force at its
prompt without a tool error, unless its edit was turned down — by the person (reject,
partial or rewritten by the reviewer) or by the verifier (an applied edit whose evaluation
did not pass) — or anything it evaluated was ``rejected`` as a cheat. Turns are rewarded
the way a trainer's reward function rewards the same answer (:mod:`.answers`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .answers import Applied, apply_answer, needs_evaluation, score_answer
from .rewards import OUTCOMES, Reward, RewardSpec, discounted_returns, outcome_of

__all__ = ["Candidate", "SessionRecord", "Turn", "Verify", "iter_session_dirs", "load_session", "tool_schemas"]

#: Verifies kernels of a session's task and target: codes → evaluation dicts, in order.
Verify = Callable[[Sequence[str]], list[dict[str, Any]]]

#: Review actions whose turn is not trained on: the person did not take the proposal as it was.
USER_REFUSALS = frozenset({"reject", "partial", "edit"})


@dataclass
class Turn:
    turn: int
    completion: dict[str, Any] | None = None
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    reviews: list[str] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)  #: code sha256 of each edit applied in this turn
    candidates: list[str] = field(default_factory=list)  #: code sha256 of each candidate of this turn
    request: bytes = field(default=b"", repr=False)  #: the raw ``model_request`` line, decoded only when asked for
    kernel_sha256: str | None = None  #: the kernel in force in the workspace when the model was asked (``None``: not recorded)
    _prompt: list[dict[str, Any]] | None = field(default=None, repr=False)

    @property
    def prompt(self) -> list[dict[str, Any]]:
        """The messages the model was sent (decoded on first use: most exports need only the last turn's)."""
        if self._prompt is None:
            self._prompt = list(json.loads(self.request).get("messages") or []) if self.request else []
        return self._prompt

    @property
    def evaluation(self) -> dict[str, Any] | None:
        """The turn's last evaluation (what its action led to), if it evaluated anything."""
        return self.evaluations[-1] if self.evaluations else None

    @property
    def cheated(self) -> bool:
        return any(ev.get("verdict") == "rejected" for ev in self.evaluations)

    @property
    def user_refused(self) -> bool:
        return any(r in USER_REFUSALS for r in self.reviews)

    @property
    def trainable(self) -> bool:
        if self.completion is None or self.cheated or self.user_refused:
            return False
        applied_failed = bool(self.applied) and any(ev.get("verdict") != "pass" for ev in self.evaluations)
        return not applied_failed


@dataclass
class Candidate:
    """A kernel that was evaluated: from the agent loop (no parents) or a search strategy (with parents)."""

    index: int
    code_sha256: str
    evaluation: dict[str, Any]
    turn: int | None
    candidate_id: str = ""
    parents: tuple[str, ...] = ()
    strategy: str = ""
    message: dict[str, Any] | None = None  #: the assistant message that produced it, when the event carries one
    prompt: list[dict[str, Any]] | None = None  #: the messages a search's model saw when it wrote this child

    @property
    def outcome(self) -> str:
        return outcome_of(self.evaluation)

    def rank(self) -> tuple[int, float]:
        """Sort key: outcome first, then speedup among passes."""
        sp = self.evaluation.get("speedup") if self.outcome == "pass" else None
        return OUTCOMES.index(self.outcome), float(sp) if isinstance(sp, (int, float)) else 0.0


@dataclass
class SessionRecord:
    id: str
    dir: Path
    meta: dict[str, Any]
    start: dict[str, Any]
    turns: list[Turn]
    candidates: list[Candidate]
    trajectory: list[dict[str, Any]]  #: the whole conversation (assistant messages as originally answered)
    trajectory_turns: list[int | None]  #: per trajectory message: the turn of an assistant message, else None
    tool_names: list[str]
    _applied: dict[int, Applied] = field(default_factory=dict, repr=False)

    @property
    def task(self) -> str:
        return str(self.start.get("task") or self.meta.get("task") or "")

    @property
    def model(self) -> str:
        return str(self.start.get("model") or self.meta.get("model") or "")

    @property
    def target(self) -> str:
        return str(self.start.get("target") or self.meta.get("target") or "")

    @property
    def strategy(self) -> str:
        return str(self.meta.get("strategy") or next((c.strategy for c in self.candidates if c.strategy), "") or "refine")

    def turn(self, n: int | None) -> Turn | None:
        return next((t for t in self.turns if t.turn == n), None) if n is not None else None

    def best(self) -> Candidate | None:
        """The passing candidate with the highest speedup, if any passed."""
        passing = [c for c in self.candidates if c.outcome == "pass"]
        return max(passing, key=lambda c: c.rank()) if passing else None

    def kernel(self, sha: str) -> str | None:
        p = self.dir / "kernels" / f"{sha}.py"
        return p.read_text() if sha and p.is_file() else None

    @property
    def kernel_path(self) -> str:
        return str(self.start.get("kernel_path") or self.meta.get("kernel_path") or "")

    def kernel_at(self, turn: Turn) -> str | None:
        """The kernel in force when ``turn``'s model was asked: the starting kernel the session logged, or the
        last edit applied before; a session older than that log starts from the task's starting kernel."""
        if turn.kernel_sha256:
            return self.kernel(turn.kernel_sha256)
        try:
            from .env import starting_kernel

            return starting_kernel(self.task)[0]
        except (KeyError, FileNotFoundError, ValueError):
            return None

    def kernel_by_id(self, candidate_id: str) -> str | None:
        c = next((x for x in self.candidates if x.candidate_id == candidate_id), None)
        return self.kernel(c.code_sha256) if c is not None else None

    def applied(self, turn: Turn) -> Applied:
        """``turn``'s answer applied to the kernel in force at its prompt (cached)."""
        if turn.turn not in self._applied:
            self._applied[turn.turn] = apply_answer(turn.completion, self.kernel_at(turn), self.kernel_path or None)
        return self._applied[turn.turn]

    def trainable(self, turn: Turn) -> bool:
        """SFT weight 1: the turn's own rule (:attr:`Turn.trainable`), and its answer changed the kernel without a tool error."""
        a = self.applied(turn)
        return turn.trainable and a.changed and not a.errors

    def evaluation_of(self, code: str) -> dict[str, Any] | None:
        """The session's evaluation of exactly this code, if it evaluated it."""
        sha = hashlib.sha256(code.encode()).hexdigest()
        for ev in [*(e for t in self.turns for e in t.evaluations), *(c.evaluation for c in self.candidates)]:
            if ev.get("code_sha256") == sha and ev.get("verdict"):
                return ev
        return None

    def score(
        self, answers: Sequence[tuple[Any, str | None, str | None]], spec: RewardSpec, verify: Verify | None = None
    ) -> list[tuple[Reward, dict[str, Any] | None] | None]:
        """(reward, evaluation) of each ``(answer, kernel in force, kernel path)``, as a trainer's reward function
        scores it (:func:`~.answers.score_answer`), from the session's own evaluations. A kernel the session never
        evaluated (a proposal the person turned down) is verified with ``verify``; without it the answer gets ``None``."""
        applied = [apply_answer(ans, kernel, path) for ans, kernel, path in answers]
        evals = [self.evaluation_of(a.code or "") if needs_evaluation(a) else None for a in applied]
        missing = [i for i, (a, ev) in enumerate(zip(applied, evals)) if needs_evaluation(a) and ev is None]
        if missing and verify is not None:
            for i, ev in zip(missing, verify([applied[i].code or "" for i in missing])):
                evals[i] = ev
        return [None if needs_evaluation(a) and ev is None else (score_answer(a, spec, ev), ev) for a, ev in zip(applied, evals)]

    def rewards(
        self, spec: RewardSpec, gamma: float, verify: Verify | None = None
    ) -> list[tuple[Turn, Reward, float, dict[str, Any] | None]]:
        """(turn, reward, return, evaluation) for every answered turn that could be scored (see :meth:`score`).

        A cheating turn's return is capped at its own (negative) reward: later successes must not make a cheat look worth it."""
        answered = [t for t in self.turns if t.completion is not None]
        scored = self.score([(t.completion, self.kernel_at(t), self.kernel_path or None) for t in answered], spec, verify)
        kept = [(t, s) for t, s in zip(answered, scored) if s is not None]
        returns = discounted_returns([s[0].reward for _, s in kept], gamma)
        return [(t, r, min(g, r.reward) if r.outcome == "rejected" else g, ev) for (t, (r, ev)), g in zip(kept, returns)]

    def parent_prompt(self, c: Candidate) -> list[dict[str, Any]]:
        """The context a search child was written in, rebuilt from the session: the task and the parent kernel(s).

        A model-driven search records the exact messages with each child, and those are used;
        ``builtin/tuner`` children have none, so their prompt is rebuilt from what the session keeps.
        """
        if c.prompt:
            return c.prompt
        by_id = {x.candidate_id: x for x in self.candidates if x.candidate_id}
        parts = [f"Task: {self.task} on {self.target}. Improve the kernel below: keep it correct, make it faster."]
        for pid in c.parents:
            parent = by_id.get(pid)
            code = self.kernel(parent.code_sha256) if parent is not None else None
            if parent is not None and code is not None:
                ev = parent.evaluation
                parts.append(f"Candidate #{pid} ({ev.get('verdict')}, speedup {ev.get('speedup')}):\n```python\n{code.rstrip()}\n```")
        return [{"role": "user", "content": "\n\n".join(parts)}]

    def workspace_roots(self) -> list[str]:
        """Directories whose absolute paths the scrubber makes relative."""
        return [str(self.meta.get("workspace") or ""), str(self.dir), str(self.dir.parent)]


def _candidate(k: int, e: dict[str, Any], last_eval: dict[str, Any] | None) -> Candidate:
    inline = e.get("evaluation")
    if isinstance(inline, dict):
        ev: dict[str, Any] = inline
    elif last_eval is not None and last_eval.get("code_sha256") == e.get("code_sha256"):
        ev = last_eval
    else:  # only the candidate's summary fields
        ev = {k2: e.get(k2) for k2 in ("verdict", "latency_us", "speedup", "timing_source", "code_sha256")}
    turn = e.get("turn")
    mt = e.get("model_turn") if isinstance(e.get("model_turn"), dict) else e.get("message")  # a search records the model's answer inline
    msg = (
        {"role": "assistant", "content": mt.get("content"), **({"tool_calls": mt["tool_calls"]} if mt.get("tool_calls") else {})}
        if isinstance(mt, dict)
        else None
    )
    prompt = mt.get("prompt") if isinstance(mt, dict) and isinstance(mt.get("prompt"), list) else None
    return Candidate(
        k,
        str(e.get("code_sha256") or ev.get("code_sha256") or ""),
        dict(ev),
        turn if isinstance(turn, int) else None,
        "" if e.get("candidate_id") is None else str(e["candidate_id"]),
        tuple(str(p) for p in e.get("parents") or ()),
        str(e.get("strategy") or ""),
        msg,
        prompt,
    )


_REQUEST = re.compile(rb'^\{\s*"type"\s*:\s*"model_request"')
_TURN = re.compile(rb'"turn"\s*:\s*(\d+)')


def load_session(directory: str | Path) -> SessionRecord:
    """Read one session folder into a :class:`SessionRecord`.

    ``model_request`` lines (the bulk of a session: each repeats the conversation so far) are
    kept raw and decoded only when a turn's prompt is used; every other event is decoded here.
    A torn last line (a killed writer) is skipped, as :func:`~nkiagent.sessions.store.read_events` does.
    """
    d = Path(directory)
    meta_path = d / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    turns: dict[int, Turn] = {}
    candidates: list[Candidate] = []
    start: dict[str, Any] = {}
    last_request = b""
    last_eval: dict[str, Any] | None = None
    current = 0
    in_force: str | None = None  #: sha256 of the kernel in the workspace now
    path = d / "events.jsonl"
    lines = path.read_bytes().split(b"\n") if path.is_file() else []
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        torn_tail = k >= len(lines) - 2
        if _REQUEST.match(line) and not torn_tail:
            m = _TURN.search(line)
            current = int(m.group(1)) if m else current + 1
            turns[current] = Turn(current, request=line, kernel_sha256=in_force)
            last_request = line
            continue
        try:
            e = json.loads(line)
        except ValueError:
            if torn_tail:
                break
            raise ValueError(f"{path}:{k + 1}: corrupt event line (not the last line, so not a torn write)") from None
        kind = e.get("type")
        n = e.get("turn", current)
        if kind == "model_request":
            current = n
            turns[n] = Turn(n, request=line, kernel_sha256=in_force)
            last_request = line
        elif kind == "model_response":
            turns.setdefault(n, Turn(n)).completion = e.get("message")
        elif kind == "evaluation":
            last_eval = e.get("result") or {}
            turns.setdefault(n, Turn(n)).evaluations.append(last_eval)
        elif kind == "candidate":
            c = _candidate(len(candidates), e, last_eval)
            candidates.append(c)
            owner = turns.setdefault(c.turn if c.turn is not None else n, Turn(n))
            owner.candidates.append(c.code_sha256)
            if isinstance(e.get("evaluation"), dict) and not (last_eval and last_eval.get("code_sha256") == c.code_sha256):
                owner.evaluations.append(c.evaluation)  # search candidates carry their evaluation inline
        elif kind == "review_decision":
            turns.setdefault(n, Turn(n)).reviews.append(str((e.get("decision") or {}).get("action", "")))
        elif kind == "edit_applied":
            turns.setdefault(n, Turn(n)).applied.append(str(e.get("code_sha256") or ""))
            if e.get("path") == start.get("kernel_path"):
                in_force = str(e.get("code_sha256") or "") or None
        elif kind == "session_start":
            start = e
            in_force = str(e["kernel_sha256"]) if e.get("kernel_sha256") else in_force
    ordered = [turns[k] for k in sorted(turns)]
    request = json.loads(last_request) if last_request else None
    trajectory, owners = _trajectory(ordered, request)
    tool_names = [str(t) for t in (request or {}).get("tools") or []]
    return SessionRecord(str(meta.get("id") or d.name), d, meta, start, ordered, candidates, trajectory, owners, tool_names)


def _trajectory(turns: list[Turn], last_request: dict[str, Any] | None) -> tuple[list[dict[str, Any]], list[int | None]]:
    if last_request is None:
        return [], []
    answered = [t for t in turns if t.completion is not None]
    messages: list[dict[str, Any]] = []
    owners: list[int | None] = []
    k = 0
    for m in last_request.get("messages") or []:
        if m.get("role") == "assistant" and k < len(answered):
            messages.append(answered[k].completion or m)
            owners.append(answered[k].turn)
            k += 1
        else:
            messages.append(m)
            owners.append(None)
    last = answered[-1] if answered else None
    if last is not None and last.turn == last_request.get("turn") and k < len(answered):
        messages.append(last.completion or {})
        owners.append(last.turn)
    return messages, owners


def iter_session_dirs(root: str | Path) -> Iterator[Path]:
    """Session folders under ``root`` (itself one, or its children), sorted."""
    r = Path(root)
    if (r / "events.jsonl").is_file():
        yield r
        return
    if not r.is_dir():
        raise FileNotFoundError(f"no sessions at {root}")
    for d in sorted(r.iterdir()):
        if (d / "events.jsonl").is_file():
            yield d


def tool_schemas(names: list[str], recorded: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI function schemas for the tools a session offered, from the schemas it recorded in ``meta.json``.

    Read from the session, not from the installed tools, which may have changed since; a name the
    session did not record gets an empty-parameters schema.
    """
    known = {str((t.get("function") or {}).get("name")): t for t in recorded if isinstance(t, dict)}
    return [
        known.get(n) or {"type": "function", "function": {"name": n, "description": "", "parameters": {"type": "object", "properties": {}}}}
        for n in names
    ]
