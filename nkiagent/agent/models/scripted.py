"""A model that replays assistant turns from a JSONL file: reproducible demos and tests, no network.

Each line is one assistant turn::

    {"content": "text", "tool_calls": [{"name": "edit_file", "arguments": {"path": "…", "old": "…", "new": "…"}}]}

``arguments`` may also be a JSON string, which is parsed like a real model's (so a script can
replay malformed arguments); a call may give its ``id``. Blank lines are skipped.

The turn answered is chosen by the conversation, not by a counter: the next turn is the one after
as many turns as ``messages`` holds assistant messages. Replays are therefore deterministic, and a
resumed session continues where it stopped instead of starting the script over.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..types import Message, ModelTurn
from .base import ModelError, tool_call

__all__ = ["SCRIPTS_DIR", "ScriptedModel"]

SCRIPTS_DIR = Path(__file__).resolve().parent.parent / "scripts"  #: scripts shipped in the package, usable by name


class ScriptedModel:
    """``scripted:PATH``: PATH is a file, or the name of a script in :data:`SCRIPTS_DIR` (with or without ``.jsonl``)."""

    def __init__(self, spec: str | Path) -> None:
        given = str(spec).removeprefix("scripted:")
        self.path = _find(given)
        self.name = f"scripted:{given}"
        self.turns = _load(self.path)

    def complete(self, messages: list[Message], tools: list[dict[str, Any]], on_token: Callable[[str], None] | None = None) -> ModelTurn:
        """The script's next turn for this conversation; its content is streamed to ``on_token`` in one piece."""
        index = sum(1 for m in messages if m.get("role") == "assistant")
        if index >= len(self.turns):
            raise ModelError(
                self.name, "scripted", f"the script {self.path} has {len(self.turns)} turns and the conversation asks for turn {index + 1}"
            )
        turn = self.turns[index]
        content = turn.get("content") or ""
        if content and on_token is not None:
            on_token(content)
        calls = [
            tool_call(c.get("id") or f"call_{index + 1}_{i}", c["name"], c.get("arguments"))
            for i, c in enumerate(turn.get("tool_calls") or [])
        ]
        return ModelTurn(content=content, tool_calls=calls, model=self.name, finish_reason="tool_calls" if calls else "stop")


def _find(given: str) -> Path:
    for path in (Path(given), SCRIPTS_DIR / given, SCRIPTS_DIR / f"{given}.jsonl"):
        if path.is_file():
            return path
    shipped = ", ".join(sorted(p.stem for p in SCRIPTS_DIR.glob("*.jsonl"))) or "none"
    raise FileNotFoundError(f"no script {given!r}: not a file, nor a shipped script (shipped: {shipped})")


def _load(path: Path) -> list[dict[str, Any]]:
    """Every turn, checked up front so a bad script fails when the session starts, not halfway through."""
    turns = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            turn = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{n}: not JSON ({exc})") from None
        calls = turn.get("tool_calls") if isinstance(turn, dict) else None
        if (
            not isinstance(turn, dict)
            or not isinstance(calls or [], list)
            or not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in calls or [])
        ):
            raise ValueError(f'{path}:{n}: a turn is {{"content": str, "tool_calls": [{{"name": str, "arguments": object}}, ...]}}')
        turns.append(turn)
    if not turns:
        raise ValueError(f"{path}: the script has no turns")
    return turns
