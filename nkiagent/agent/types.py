"""The seams of the agent: plain data that crosses them, and the small Protocols behind them.

Messages are OpenAI-style chat dicts (``{"role", "content", "tool_calls"?, "tool_call_id"?}``),
the format litellm speaks and the session store records. A model turn is a
:class:`ModelTurn`; a tool is anything with a :class:`ToolSpec` and a handler.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Message", "Model", "ModelTurn", "ToolCall", "ToolContext", "ToolResult", "ToolSpec", "TurnCancelled", "Usage"]

Message = dict[str, Any]


class TurnCancelled(Exception):
    """The person cancelled the current turn; raised on the agent's thread, e.g. from the token
    callback while the model streams. It is not a model failure: the graph lets it through, so
    the run stops before the step is checkpointed and the session can go on from there."""


@dataclass
class ToolCall:
    """One call the model asked for. ``arguments`` is parsed JSON; ``raw_arguments`` is what it sent."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str = ""
    error: str = ""  #: set when the arguments were not valid JSON objects

    def to_message(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.raw_arguments or _dumps(self.arguments)},
        }


def _dumps(v: Any) -> str:
    import json

    return json.dumps(v)


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_usd += other.cost_usd


@dataclass
class ModelTurn:
    """What a model answered: text and/or tool calls, with usage."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    finish_reason: str = ""

    def to_message(self) -> Message:
        msg: Message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [tc.to_message() for tc in self.tool_calls]
        return msg

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class Model(Protocol):
    """Anything that answers a conversation: litellm, a scripted replay, the offline tuner."""

    name: str

    def complete(self, messages: list[Message], tools: list[dict[str, Any]], on_token: Callable[[str], None] | None = None) -> ModelTurn:
        """Answer ``messages``; ``tools`` are OpenAI tool schemas; ``on_token`` receives streamed text."""
        ...


@dataclass(frozen=True)
class ToolSpec:
    """A tool as data: what the model sees (name, description, JSON-schema parameters) and the handler it runs."""

    name: str
    description: str
    parameters: dict[str, Any]
    handler: str  #: ``module:function`` called as ``fn(ctx, **arguments) -> ToolResult | str``
    proposes_edit: bool = False  #: edits go through review before they touch the workspace

    def schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


@dataclass
class ToolResult:
    """What a tool returns to the model, plus structured data for the session and the UI."""

    content: str
    ok: bool = True
    data: dict[str, Any] = field(default_factory=dict)
    edit: dict[str, Any] | None = None  #: ``{"path", "old", "new"}`` for a proposed edit
    submitted: bool = False


class ToolContext(Protocol):
    """What a tool handler may use: the workspace, the task, the evaluator. Nothing else."""

    def read(self, path: str) -> str: ...

    def list(self, path: str) -> Iterator[str]: ...

    def evaluate(self, path: str) -> dict[str, Any]: ...
