"""Mutation operators: how a search turns a parent kernel (plus inspirations) into a child.

Both operators answer a :class:`MutationRequest` with a :class:`Proposal` — the child's source
and the model turn that produced it, recorded with the candidate — and both mutate by *diffs*:
exact ``old → new`` replacements on the parent (``edit_file`` calls), never a blind rewrite.

* :class:`TunableMutator` is ``builtin/tuner`` for searches: it drives the ``# nkiagent: tune``
  constants directly (with :func:`nkiagent.agent.tuner.scan_tunables` and the tuner's
  :class:`~nkiagent.agent.tuner.Tunable` neighbours), so every strategy runs offline. At
  temperature ≥ 1 it samples every tunable independently (best-of-N's independent samples);
  below 1 it steps one or two tunables to a neighbouring choice, favouring the knobs the
  parent's bottleneck points at (tile sizes when memory-bound, as the tuner does), and with
  inspirations it sometimes copies a setting from one of them (crossover).
* :class:`ModelMutator` asks any model (litellm, scripted) for ``edit_file`` calls on the parent,
  with a prompt that shows the parent's code and measured result and the inspirations' code
  and results; a refine trajectory passes its whole conversation instead.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..agent.tools import compact_evaluation
from ..agent.tuner import Tunable, TunableValue, scan_tunables
from ..agent.types import Message, Model
from .db import Candidate

__all__ = ["KERNEL_NAME", "ModelMutator", "MutationRequest", "Mutator", "Proposal", "TunableMutator", "apply_edits", "feedback_text"]

KERNEL_NAME = "kernel.py"  #: the file name models edit in search prompts


@dataclass
class MutationRequest:
    """What an operator may use: the parent, inspirations, the search's randomness and what is known already."""

    parent: Candidate
    parent_source: str
    inspirations: list[tuple[Candidate, str]] = field(default_factory=list)
    seed: int = 0
    temperature: float = 0.7
    seen: set[str] = field(default_factory=set)  #: sha256 of every kernel already evaluated (or proposed in this round)
    messages: list[Message] | None = None  #: a refine trajectory's conversation so far (model operators only)


@dataclass
class Proposal:
    """A child (``source`` None: nothing usable was proposed, ``why`` says why) and the turn that produced it."""

    source: str | None
    why: str
    model_turn: dict[str, Any] | None = None
    cost_usd: float = 0.0


class Mutator(Protocol):
    name: str
    concurrent: bool  #: worth calling from several threads (a remote model) rather than in sequence (cheap, local)

    def propose(self, req: MutationRequest) -> Proposal: ...


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _turn(content: str, edits: list[tuple[str, str]], model: str, cost: float = 0.0) -> dict[str, Any]:
    """A model turn as a candidate records it: text, the ``edit_file`` calls, usage."""
    calls = [
        {
            "id": f"edit-{i}",
            "type": "function",
            "function": {"name": "edit_file", "arguments": json.dumps({"path": KERNEL_NAME, "old": o, "new": n})},
        }
        for i, (o, n) in enumerate(edits)
    ]
    return {"content": content, "tool_calls": calls, "model": model, "usage": {"cost_usd": cost}}


class TunableMutator:
    """``builtin/tuner`` as a search operator; see the module docstring."""

    name = "builtin/tuner"
    concurrent = False
    attempts = 48  #: tries to find a configuration not evaluated yet before giving up on this parent

    def propose(self, req: MutationRequest) -> Proposal:
        tunables, problems = scan_tunables(req.parent_source)
        if not tunables:
            return Proposal(None, "the parent declares no `# nkiagent: tune` constants" + (f" ({'; '.join(problems)})" if problems else ""))
        rng = random.Random(req.seed)
        donors = [{t.name: t.value for t in scan_tunables(src)[0]} for _, src in req.inspirations]
        bottleneck = str((req.parent.evaluation.get("profile") or {}).get("bottleneck", "")).lower()
        for attempt in range(self.attempts):
            values, why = self._values(tunables, rng, req.temperature, donors, bottleneck, widen=attempt // 16)
            edits = [(t.text, t.line_with(values[t.name])) for t in tunables if values[t.name] != t.value]
            if not edits:
                continue
            source = req.parent_source
            for old, new in edits:
                source = source.replace(old, new, 1)
            if _sha(source) not in req.seen:
                return Proposal(source, why, _turn(why, edits, self.name))
        return Proposal(None, f"no configuration near candidate {req.parent.candidate_id} is left unevaluated")

    @staticmethod
    def _values(
        tunables: list[Tunable], rng: random.Random, temperature: float, donors: list[dict[str, TunableValue]], bottleneck: str, widen: int
    ) -> tuple[dict[str, TunableValue], str]:
        values: dict[str, TunableValue] = {t.name: t.value for t in tunables}
        if temperature >= 1.0:
            for t in tunables:
                values[t.name] = rng.choice(t.choices)
            return values, "independent sample: " + ", ".join(f"{n} = {v!r}" for n, v in values.items())
        differing = [(d, n) for d in donors for n, v in d.items() if n in values and v != values[n]]
        if differing and rng.random() < 0.35:
            donor, name = rng.choice(differing)
            values[name] = donor[name]
            return values, f"crossover: {name} = {donor[name]!r} from an inspiration"

        def weight(t: Tunable) -> float:
            if bottleneck.startswith(("memory", "latency")):
                return 3.0 if t.is_size else 1.0
            if bottleneck.startswith("compute"):
                return 1.0 if t.is_size else 3.0
            return 1.0

        moves = 1 + (rng.random() < temperature / 2) + widen
        for _ in range(min(moves, len(tunables))):
            t = rng.choices(tunables, weights=[weight(t) for t in tunables])[0]
            step = rng.choice((1, -1)) * (1 + (widen > 0 and rng.random() < 0.5))
            value = values[t.name]
            for _ in range(abs(step)):
                ahead, back = t.neighbour(value, 1 if step > 0 else -1), t.neighbour(value, -1 if step > 0 else 1)
                value = ahead if ahead is not None else back if back is not None else value  # False and 0 are choices too
            values[t.name] = value
        moved = ", ".join(f"{t.name} = {values[t.name]!r}" for t in tunables if values[t.name] != t.value) or "no change"
        return values, f"step ({bottleneck or 'no profile'}): {moved}"


def feedback_text(c: Candidate) -> str:
    """A candidate's measured result as the model reads it (the agent loop's compact evaluation)."""
    ev = {"task": "", "target": "", **c.evaluation}
    return f"candidate #{c.candidate_id} (cascade stage {c.stage}):\n" + compact_evaluation(ev)


def apply_edits(source: str, turn_calls: list[tuple[str, dict[str, Any]]]) -> tuple[str | None, str]:
    """Apply ``edit_file`` / ``write_file`` calls to ``source`` in order; (None, why) at the first that cannot apply."""
    for name, args in turn_calls:
        if name == "write_file" and isinstance(args.get("content"), str):
            source = args["content"]
        elif name == "edit_file":
            old, new = args.get("old"), args.get("new")
            if not isinstance(old, str) or not isinstance(new, str) or not old:
                return None, "edit_file needs string `old` and `new`"
            n = source.count(old)
            if n != 1:
                return None, f"edit_file: `old` occurs {n} times in the parent (it must occur exactly once): {old[:80]!r}"
            source = source.replace(old, new, 1)
        else:
            return None, f"the search only applies edit_file and write_file, not {name}"
    return source, ""


class ModelMutator:
    """Any :class:`~nkiagent.agent.types.Model` as a search operator; see the module docstring."""

    concurrent = True

    def __init__(self, model: Model, task: Any, target: str) -> None:
        from ..agent.tools import load_tools

        self.model = model
        self.name = model.name
        self.task = task
        self.target = target
        self.tools = [s.schema() for s in load_tools(None, ["edit_file", "write_file"]).values()]

    def opening(self, parent: Candidate, parent_source: str, inspirations: list[tuple[Candidate, str]]) -> list[Message]:
        """The first messages for a parent: the agent's system prompt, the task, the parent and the inspirations with their results."""
        from ..agent.prompts import system_prompt, task_prompt

        parts = [
            task_prompt(self.task, KERNEL_NAME, self.target),
            "",
            f"## Parent kernel ({KERNEL_NAME})",
            "```python",
            parent_source,
            "```",
            "Its measured result:",
            feedback_text(parent),
        ]
        for c, src in inspirations:
            parts += ["", f"## Inspiration: candidate #{c.candidate_id}", "```python", src, "```", feedback_text(c)]
        parts += [
            "",
            (
                f"Propose one improvement of the parent as edit_file calls on {KERNEL_NAME} (exact `old` text from the parent, "
                "unique, and its replacement), or write_file for a rewrite. The search evaluates your result and keeps it only "
                "if the verifier passes it."
            ),
        ]
        return [{"role": "system", "content": system_prompt(self.target)}, {"role": "user", "content": "\n".join(parts)}]

    def propose(self, req: MutationRequest) -> Proposal:
        from ..agent.models import ModelError

        messages = req.messages if req.messages is not None else self.opening(req.parent, req.parent_source, req.inspirations)
        try:
            turn = self.model.complete(messages, self.tools)
        except ModelError as exc:  # after the model's own retries: this child is lost, the search goes on (or runs dry and stops)
            return Proposal(None, f"model error: {exc}")
        record = {
            "prompt": messages,
            "content": turn.content,
            "tool_calls": [tc.to_message() for tc in turn.tool_calls],
            "model": turn.model or self.name,
            "usage": {
                "prompt_tokens": turn.usage.prompt_tokens,
                "completion_tokens": turn.usage.completion_tokens,
                "cost_usd": turn.usage.cost_usd,
            },
        }
        bad = next((tc.error for tc in turn.tool_calls if tc.error), "")
        if bad:
            return Proposal(None, bad, record, turn.usage.cost_usd)
        if not turn.tool_calls:
            return Proposal(None, "the model proposed no edit", record, turn.usage.cost_usd)
        source, why = apply_edits(req.parent_source, [(tc.name, tc.arguments) for tc in turn.tool_calls])
        if source is not None and source == req.parent_source:
            source, why = None, "the edit leaves the parent unchanged"
        return Proposal(source, why or (turn.content.strip()[:200] or "model edit"), record, turn.usage.cost_usd)
