"""What every model shares: the error the agent loop can show as is, and how tool-call arguments are read."""

from __future__ import annotations

import json
import threading
from typing import Any

from ..types import ToolCall

__all__ = ["INTERRUPTED", "ModelError", "check_interrupted", "retry_text", "tool_call", "wait_text"]

#: set by the command line's SIGINT handler before it raises KeyboardInterrupt. Python drops an exception raised
#: inside a weakref or import-lock callback ("Exception ignored in ..."), so a ctrl+c landing there was lost and a
#: 30 s retry wait ran on; every wait on a model polls this too.
INTERRUPTED = threading.Event()


def check_interrupted() -> None:
    """Raise the KeyboardInterrupt a ctrl+c asked for, if Python swallowed the one its handler raised."""
    if INTERRUPTED.is_set():
        INTERRUPTED.clear()
        raise KeyboardInterrupt


class ModelError(RuntimeError):
    """A model call failed in a way the user must act on (bad key, wrong model, server down after retries).

    The message names the model, the provider and the problem, so the UI and the session log can
    show it without the traceback.
    """

    def __init__(
        self,
        model: str,
        provider: str,
        problem: str,
        *,
        status_code: int | None = None,
        attempts: int = 1,
        tools_rejected: bool = False,
        config: bool = False,
    ) -> None:
        super().__init__(f"{model} ({provider}): {problem}")
        self.model = model
        self.provider = provider
        self.problem = problem
        self.status_code = status_code
        self.attempts = attempts
        self.tools_rejected = tools_rejected  #: the provider refused the ``tools`` parameter (switch to the text fallback)
        self.config = config  #: a retry cannot help: the key, the model name or the request must change


def tool_call(call_id: str, name: str, raw: str | dict[str, Any] | None) -> ToolCall:
    """Build a :class:`ToolCall` from what a model sent; malformed arguments set ``error`` instead of raising.

    Models do send truncated or invalid JSON; the loop answers with the error so the model can retry,
    which is better than ending the session.
    """
    if isinstance(raw, dict):
        return ToolCall(call_id, name, raw, json.dumps(raw))
    text = raw or ""
    if not text.strip():
        return ToolCall(call_id, name, {}, text)
    try:
        args = json.loads(text)
    except ValueError as exc:
        return ToolCall(call_id, name, {}, text, f"arguments of {name} are not valid JSON ({exc}): {text[:200]!r}")
    if not isinstance(args, dict):
        return ToolCall(call_id, name, {}, text, f"arguments of {name} must be a JSON object, got {type(args).__name__}")
    return ToolCall(call_id, name, args, text)


def retry_text(event: dict[str, Any]) -> str:
    """The line a person sees before a retry (headless and UI alike), from a ``model_retry`` event."""
    return (
        f"{event.get('model')}: {event.get('problem')}; retrying in {event.get('delay_s', 0):.1f} s "
        f"(attempt {event.get('attempt')} of {event.get('attempts')}; ctrl+c cancels)"
    )


def wait_text(event: dict[str, Any]) -> str:
    """The line that says a request is still out, from a ``model_wait`` event."""
    return f"waiting for {event.get('model')}: {event.get('waited_s', 0):.0f} s (timeout {event.get('timeout_s', 0):g} s; ctrl+c cancels)"
