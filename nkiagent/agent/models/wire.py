"""The OpenAI chat-completions protocol over the standard library: every turn to an OpenAI-compatible server.

``import litellm`` takes seconds, and a session must not wait for it to send its first request
(issue 5: first request ≤ 2 s after start). For servers that speak OpenAI's protocol at a known
address — ``openai/…`` or ``hosted_vllm/…`` with ``api_base``: vLLM, SGLang, llama.cpp, Ollama's
``/v1``, a proxy — :class:`~.litellm_model.LiteLLMModel` sends every request of the session through
this module (issue 23: switching clients half-way made a key-less local server fail once litellm
had loaded). A key is sent when there is one; a local server needs none.

Only the request and the answer live here (JSON or server-sent events, tool-call deltas, usage).
A failure is raised as :class:`WireError` carrying the HTTP status and the server's words, and the
caller's retry loop judges it exactly as it judges litellm's errors, so retries, backoff and error
messages are the same whichever path sent the request.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from ..types import Message, ModelTurn, ToolCall, Usage
from .base import tool_call

__all__ = ["WIRE_PROVIDERS", "WireError", "complete", "litellm_loaded"]

#: Providers whose requests are plain OpenAI chat completions at ``api_base`` (litellm strips the prefix).
WIRE_PROVIDERS = ("openai", "hosted_vllm")


class WireError(Exception):
    """A request that failed: ``status`` is the HTTP status, or None when no answer came (connection, timeout)."""

    def __init__(self, message: str, status: int | None = None, timeout: bool = False, retry_after: float = 0.0) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status
        self.timeout = timeout
        self.retry_after = retry_after


def litellm_loaded() -> bool:
    """True once litellm is fully imported (a module half-way through its import is not)."""
    mod = sys.modules.get("litellm")
    spec = getattr(mod, "__spec__", None)
    return mod is not None and not getattr(spec, "_initializing", False)


def complete(
    api_base: str,
    model: str,
    messages: list[Message],
    tools: list[dict[str, Any]],
    *,
    api_key: str | None,
    timeout_s: float,
    stream: bool,
    extra: dict[str, Any],
    on_token: Callable[[str], None] | None,
) -> ModelTurn:
    """One chat completion; raises :class:`WireError` on any failure."""
    body: dict[str, Any] = {
        "model": model.split("/", 1)[1] if model.split("/", 1)[0] in WIRE_PROVIDERS else model,
        "messages": messages,
        "stream": stream,
        **extra,
    }
    if tools:
        body["tools"] = tools
    if stream:
        body["stream_options"] = {"include_usage": True}
    url = urlsplit(api_base.rstrip("/") + "/chat/completions")
    conn_cls = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(url.hostname or "localhost", url.port, timeout=timeout_s)
    key = api_key or os.environ.get("OPENAI_API_KEY")
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream" if stream else "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        conn.request("POST", url.path + (f"?{url.query}" if url.query else ""), json.dumps(body).encode(), headers)
        resp = conn.getresponse()
        if resp.status != 200:
            raise WireError(_error_text(resp.read()), resp.status, retry_after=_float(resp.getheader("retry-after")))
        if stream and "text/event-stream" in (resp.getheader("content-type") or ""):
            return _from_stream(_events(resp), model, on_token)
        return _from_message(json.loads(resp.read() or b"{}"), model)
    except TimeoutError as exc:
        raise WireError(f"no answer within {timeout_s:g} s", timeout=True) from exc
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise WireError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        conn.close()


def _events(resp: http.client.HTTPResponse) -> Iterator[dict[str, Any]]:
    for raw in resp:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        yield json.loads(data)


def _from_stream(events: Iterator[dict[str, Any]], model: str, on_token: Callable[[str], None] | None) -> ModelTurn:
    """Assemble streamed deltas: content in order, tool calls by index with their arguments in pieces."""
    content: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    usage: dict[str, Any] = {}
    finish = ""
    served = model
    for ev in events:
        served = ev.get("model") or served
        usage = ev.get("usage") or usage
        for choice in ev.get("choices") or []:
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if text:
                content.append(text)
                if on_token is not None:
                    on_token(text)
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(int(tc.get("index", len(calls))), {"id": "", "name": "", "arguments": ""})
                fn = tc.get("function") or {}
                slot["id"] = tc.get("id") or slot["id"]
                slot["name"] += fn.get("name") or ""
                slot["arguments"] += fn.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    out = [tool_call(c["id"] or f"call_wire_{i}", c["name"], c["arguments"]) for i, c in sorted(calls.items())]
    return ModelTurn("".join(content), out, _usage(usage), served, finish)


def _from_message(doc: dict[str, Any], model: str) -> ModelTurn:
    choice = (doc.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    calls: list[ToolCall] = [
        tool_call(
            tc.get("id") or f"call_wire_{i}", (tc.get("function") or {}).get("name") or "", (tc.get("function") or {}).get("arguments")
        )
        for i, tc in enumerate(msg.get("tool_calls") or [])
    ]
    return ModelTurn(
        msg.get("content") or "", calls, _usage(doc.get("usage") or {}), doc.get("model") or model, choice.get("finish_reason") or ""
    )


def _usage(u: dict[str, Any]) -> Usage:
    # priced later by LiteLLMModel, once litellm (and its price table) has loaded
    return Usage(int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0), 0.0)


def _error_text(body: bytes) -> str:
    try:
        err = json.loads(body).get("error")
        return str(err.get("message") if isinstance(err, dict) else err or body[:300].decode("utf-8", "replace"))
    except (ValueError, AttributeError):
        return body[:300].decode("utf-8", "replace")


def _float(value: str | None) -> float:
    try:
        return float(value) if value else 0.0
    except ValueError:
        return 0.0
