"""Any provider litellm speaks, behind the :class:`~nkiagent.agent.types.Model` seam.

``anthropic/…``, ``openai/…``, ``hosted_vllm/…`` and ``openai/…`` with an ``api_base``,
``ollama_chat/…``: one class, because litellm already normalizes them to OpenAI-style messages, tool
calls and usage. What this module adds is what an unattended refinement session needs:

- **Lazy import.** ``import litellm`` takes about 5 s. Nothing here imports it at module load;
  :func:`prewarm` starts the import on a daemon thread so ``nkiagent --help`` and the UI's first frame
  never wait. Requests to OpenAI-protocol servers with an ``api_base`` (``openai/…``,
  ``hosted_vllm/…``: vLLM, Ollama's ``/v1``, llama.cpp, a proxy) go out through :mod:`.wire`
  (standard library only) for the whole session, so the first request does not wait for litellm
  and every request takes the same path, with or without a key. The remote cost map is never fetched.
- **Retries we control.** litellm's and the OpenAI client's own retries are switched off; rate limits
  (429), 5xx, connection errors and timeouts are retried here with capped exponential backoff and
  jitter. Errors a retry cannot fix (bad key, no access, unknown model, bad request, context
  window, missing credentials) raise :class:`ModelError` at once, naming the provider, the problem
  and the fix; :meth:`LiteLLMModel.check` finds the ones knowable before any request.
- **Nothing silent.** While an attempt is out, ``on_status`` hears ``waiting`` every second and
  ``retry`` before each backoff; :meth:`LiteLLMModel.cancel` ends the wait or the backoff at once.
- **Tool calls that never crash the loop.** Arguments that are not a JSON object become
  ``ToolCall.error``; unknown tool names pass through (the graph answers them).
- **A text fallback** (:mod:`.textmode`) for models without tool calling: chosen with
  ``tool_mode="text"``, when litellm knows the provider has no ``tools`` parameter, or when the
  server rejects ``tools`` (then for the rest of the session).
- **Streaming** to ``on_token``, the final turn rebuilt with ``litellm.stream_chunk_builder``
  (tool calls included). A retry after a partly streamed answer streams again from the start.
- **Usage and cost** from the response; ``completion_cost`` is 0.0 for local or unpriced models. Turns
  sent through :mod:`.wire` are priced with litellm's table once it has loaded (turns before that
  are added to the first turn after).
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from ..types import Message, ModelTurn, ToolCall, TurnCancelled, Usage
from . import textmode, wire
from .base import ModelError, check_interrupted, tool_call

__all__ = ["LiteLLMModel", "prewarm"]

_prewarm_lock = threading.Lock()
_prewarm_thread: threading.Thread | None = None


def _litellm() -> Any:
    """Import litellm, offline: the cost map bundled with it, no debug banners on errors."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def prewarm() -> threading.Thread:
    """Start importing litellm on a daemon thread (once); a later import waits for it instead of starting over."""
    global _prewarm_thread
    with _prewarm_lock:
        if _prewarm_thread is None:
            _prewarm_thread = threading.Thread(target=_litellm, name="nkiagent-litellm-import", daemon=True)
            _prewarm_thread.start()
        return _prewarm_thread


class LiteLLMModel:
    """A chat model reached through litellm; see the module docstring for what it adds."""

    def __init__(
        self,
        model: str,
        api_base: str | None = None,
        api_key: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout_s: float = 60.0,
        num_retries: int = 3,
        stream: bool = True,
        tool_mode: Literal["auto", "text"] = "auto",
        backoff_s: float = 1.0,
        backoff_max_s: float = 30.0,
        api_key_env: str | None = None,
        transport: Literal["auto", "wire", "litellm"] = "auto",
    ) -> None:
        """``num_retries`` counts retries after the first attempt; backoff doubles from ``backoff_s`` up to ``backoff_max_s``.

        ``api_key_env`` names the environment variable that holds the key (else the provider's own variable
        is used). ``transport`` ``auto`` sends OpenAI-protocol servers at an ``api_base`` through :mod:`.wire`
        for the whole session and everything else through litellm: one client path from first turn to last.
        """
        if tool_mode not in ("auto", "text"):
            raise ValueError(f"tool_mode must be 'auto' or 'text', not {tool_mode!r}")
        if transport not in ("auto", "wire", "litellm"):
            raise ValueError(f"transport must be 'auto', 'wire' or 'litellm', not {transport!r}")
        self.name = model
        self.model = model
        self.api_base = api_base
        self.api_key_env = api_key_env
        self.api_key = api_key or (os.environ.get(api_key_env) or None if api_key_env else None)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.num_retries = num_retries
        self.stream = stream
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.text_mode = tool_mode == "text"  #: tools are written as fenced blocks (set for good once a server rejects ``tools``)
        self.provider = model.split("/", 1)[0]  #: refined by litellm on the first call
        wire_ok = bool(api_base) and self.provider in wire.WIRE_PROVIDERS
        if transport == "wire" and not wire_ok:
            raise ValueError(f"{model}: the wire transport needs an api_base and a provider among {', '.join(wire.WIRE_PROVIDERS)}")
        self.wire = transport == "wire" or (transport == "auto" and wire_ok)  #: requests go through :mod:`.wire`, never litellm
        self.on_status: Callable[[str, dict[str, Any]], None] | None = None  #: ``("waiting"|"retry", fields)`` while a request is out
        self.status_every_s = 1.0  #: how often ``on_status`` hears ``waiting``
        self._cancel = threading.Event()
        self._params: set[str] | None = None  #: the OpenAI parameters litellm supports for this provider
        self._turns = 0
        self._unpriced: list[tuple[int, int]] = []  #: token counts of wire turns sent before litellm (and its prices) loaded

    def cancel(self) -> None:
        """Stop the request in flight or the wait before its retry (thread-safe): :meth:`complete` raises :class:`TurnCancelled`."""
        self._cancel.set()

    def check(self) -> None:
        """Configuration problems now, before a session starts: a key variable that is not set, an unknown provider, no key.

        Raises :class:`ModelError`; sends nothing. For litellm providers this waits for litellm's import.
        """
        if self.api_key_env and not self.api_key:
            raise ModelError(
                self.model,
                self.provider,
                f"the key variable {self.api_key_env} (api_key_env) is not set: "
                f"export {self.api_key_env}=… or change api_key_env in the config",
                config=True,
            )
        if self.wire:
            return  # an OpenAI-compatible server: a key is optional (local servers need none)
        lm = _litellm()
        self._resolve(lm)
        if self.api_key or self.api_base:
            return
        missing = [k for k in (lm.validate_environment(model=self.model) or {}).get("missing_keys", []) if k.endswith(("_KEY", "_TOKEN"))]
        if missing:
            raise ModelError(
                self.model,
                self.provider,
                f"no API key: set {' or '.join(missing)}, or name the variable that holds it "
                "with --api-key-env (api_key_env in the config)",
                config=True,
            )

    def complete(self, messages: list[Message], tools: list[dict[str, Any]], on_token: Callable[[str], None] | None = None) -> ModelTurn:
        """One assistant turn for ``messages``; raises :class:`ModelError` when retrying cannot help, :class:`TurnCancelled` on :meth:`cancel`."""
        self._cancel.clear()
        lm = None if self.wire else _litellm()
        if lm is not None:
            self._resolve(lm)
        self._turns += 1
        if tools and not self.text_mode:
            try:
                return self._request(lm, messages, tools, on_token)
            except ModelError as exc:
                if not exc.tools_rejected:
                    raise
                self.text_mode = True
        turn = self._request(lm, textmode.to_text_messages(messages, tools), [], on_token)
        turn.tool_calls = textmode.parse(turn.content, f"{textmode.TEXT_CALL_ID}{self._turns}_") if tools else []
        return turn

    def _resolve(self, lm: Any) -> None:
        """Learn the provider and its parameters once: an unknown provider is a configuration error, not a retry."""
        if self._params is not None:
            return
        try:
            _, self.provider, _, _ = lm.get_llm_provider(self.model, api_base=self.api_base)
        except lm.BadRequestError as exc:
            raise ModelError(
                self.model,
                self.provider,
                (
                    "litellm does not know this provider; write the model as provider/name "
                    f"(anthropic/…, openai/…, hosted_vllm/…, ollama_chat/…): {_detail(exc)}"
                ),
                config=True,
            ) from exc
        self._params = set(lm.get_supported_openai_params(model=self.model, custom_llm_provider=self.provider) or [])
        if "tools" not in self._params:
            self.text_mode = True

    def _kwargs(self, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "model": self.model,
            "messages": _sendable(messages),
            "timeout": self.timeout_s,
            "stream": self.stream,
            "num_retries": 0,
        }  # retries are ours (below); 0 also turns off the OpenAI client's
        optional = {"api_base": self.api_base, "api_key": self.api_key, "temperature": self.temperature, "max_tokens": self.max_tokens}
        kw.update({k: v for k, v in optional.items() if v is not None})
        if tools:
            kw["tools"] = tools
        if self.stream and "stream_options" in (self._params or ()):
            kw["stream_options"] = {"include_usage": True}  # real token counts instead of an estimate
        return kw

    def _request(self, lm: Any, messages: list[Message], tools: list[dict[str, Any]], on_token: Callable[[str], None] | None) -> ModelTurn:
        """Send with retries; the answer as a :class:`ModelTurn` (tool calls parsed, usage and cost filled in).

        ``lm`` is None while litellm loads: then :mod:`.wire` sends, and its errors are judged the same way.
        """
        if lm is None:
            failure: tuple[type[Exception], ...] = (wire.WireError,)
        else:
            import openai  # loaded by litellm already; every litellm API error derives from openai.OpenAIError

            failure = (openai.OpenAIError,)
        kwargs = self._kwargs(messages, tools)
        attempts = self.num_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                if lm is None:
                    return self._priced(self._waiting(lambda: self._wire(kwargs, on_token)))
                response = self._waiting(lambda: self._stream(lm, kwargs, on_token) if self.stream else lm.completion(**kwargs))
                break
            except failure as exc:
                retry, problem = _classify(lm, exc, self.timeout_s, self._key_hint())
                status = getattr(exc, "status_code", None)
                if tools and _rejects_tools(lm, exc):
                    raise ModelError(
                        self.model,
                        self.provider,
                        f"the server does not accept tools: {_detail(exc)}",
                        status_code=status,
                        tools_rejected=True,
                    ) from exc
                if not retry or attempt == attempts:
                    gave_up = f" (gave up after {attempt} attempts)" if retry and attempt > 1 else ""
                    detail = (
                        "" if getattr(exc, "timeout", False) or (lm is not None and isinstance(exc, lm.Timeout)) else f": {_detail(exc)}"
                    )
                    raise ModelError(
                        self.model, self.provider, f"{problem}{gave_up}{detail}", status_code=status, attempts=attempt, config=not retry
                    ) from exc
                delay = self._delay(attempt, exc)
                self._status("retry", problem=problem, attempt=attempt + 1, attempts=attempts, delay_s=round(delay, 2))
                until = time.monotonic() + delay
                while not self._cancel.wait(max(0.0, min(0.05, until - time.monotonic()))):
                    check_interrupted()
                    if time.monotonic() >= until:
                        break
                else:
                    raise TurnCancelled("cancelled while waiting to retry the model request") from exc
        return self._turn(lm, response)

    def _key_hint(self) -> str:
        """Where the key came from, for an authentication error's fix."""
        if self.api_key_env:
            return f"the key in {self.api_key_env} (api_key_env)"
        return "the API key (the provider's environment variable, or the one --api-key-env names)"

    def _status(self, kind: str, **fields: Any) -> None:
        if self.on_status is not None:
            self.on_status(kind, {"model": self.model, **fields})

    def _waiting(self, send: Callable[[], Any]) -> Any:
        """Run one attempt on a helper thread; meanwhile report how long it has waited and honour :meth:`cancel` at once.

        An abandoned attempt ends by itself at its timeout (its thread is a daemon and its answer is dropped).
        """
        done = threading.Event()
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = send()
            except BaseException as exc:  # noqa: BLE001 — re-raised on the caller's thread below
                box["error"] = exc
            done.set()

        threading.Thread(target=run, name="nkiagent-model-request", daemon=True).start()
        t0 = time.monotonic()
        next_tick = self.status_every_s
        while not done.wait(0.05):
            check_interrupted()
            if self._cancel.is_set():
                raise TurnCancelled("cancelled while waiting for the model")
            waited = time.monotonic() - t0
            if waited >= next_tick:
                next_tick += self.status_every_s
                self._status("waiting", waited_s=round(waited, 1), timeout_s=self.timeout_s)
        if "error" in box:
            raise box["error"]
        return box["value"]

    def _priced(self, turn: ModelTurn) -> ModelTurn:
        """A wire turn's cost, once litellm (and its price table) has loaded; until then its tokens wait to be priced."""
        self._unpriced.append((turn.usage.prompt_tokens, turn.usage.completion_tokens))
        if wire.litellm_loaded():
            lm = _litellm()
            turn.usage.cost_usd = sum(_token_cost(lm, self.model, p, c) for p, c in self._unpriced)
            self._unpriced.clear()
        return turn

    def _wire(self, kwargs: dict[str, Any], on_token: Callable[[str], None] | None) -> ModelTurn:
        extra: dict[str, Any] = {k: kwargs[k] for k in ("temperature", "max_tokens") if k in kwargs}
        assert self.api_base is not None  # self.wire needs one
        return wire.complete(
            self.api_base,
            self.model,
            kwargs["messages"],
            kwargs.get("tools", []),
            api_key=self.api_key,
            timeout_s=self.timeout_s,
            stream=self.stream,
            extra=extra,
            on_token=on_token,
        )

    def _stream(self, lm: Any, kwargs: dict[str, Any], on_token: Callable[[str], None] | None) -> Any:
        """Stream the answer to ``on_token`` and rebuild the whole response; the timeout bounds the whole answer."""
        deadline = time.monotonic() + self.timeout_s
        chunks = []
        for chunk in lm.completion(**kwargs):
            chunks.append(chunk)
            delta = chunk.choices[0].delta.content if chunk.choices else None
            if delta and on_token is not None:
                on_token(delta)
            if time.monotonic() > deadline:
                raise lm.Timeout(message=f"stream still running after {self.timeout_s:g} s", model=self.model, llm_provider=self.provider)
        response = lm.stream_chunk_builder(chunks, messages=kwargs["messages"])
        if response is None:
            raise lm.APIConnectionError(
                message="the server closed the stream without an answer", model=self.model, llm_provider=self.provider
            )
        return response

    def _delay(self, attempt: int, exc: Exception) -> float:
        """Exponential backoff with jitter, capped; a longer Retry-After from the server wins (up to the cap)."""
        delay = min(self.backoff_max_s, self.backoff_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
        return max(delay, min(_retry_after(exc), self.backoff_max_s))

    def _turn(self, lm: Any, response: Any) -> ModelTurn:
        choice = response.choices[0]
        msg = choice.message
        calls: list[ToolCall] = [
            tool_call(tc.id or f"call_{self._turns}_{i}", tc.function.name or "", tc.function.arguments)
            for i, tc in enumerate(msg.tool_calls or [])
        ]
        usage = getattr(response, "usage", None)
        cost = _cost(lm, response)
        return ModelTurn(
            content=msg.content or "",
            tool_calls=calls,
            usage=Usage(getattr(usage, "prompt_tokens", 0) or 0, getattr(usage, "completion_tokens", 0) or 0, cost),
            model=getattr(response, "model", None) or self.model,
            finish_reason=choice.finish_reason or "",
        )


def _sendable(messages: list[Message]) -> list[Message]:
    """``messages`` with the arguments of every earlier tool call valid JSON (``{}`` where they were not).

    A malformed call is answered with an error and stays in the history; providers that parse the
    history (Anthropic, Bedrock) would then reject every later request of the session.
    """

    def fixed(call: dict[str, Any]) -> dict[str, Any]:
        fn = call.get("function") or {}
        if isinstance(fn.get("arguments"), str) and tool_call("", "", fn["arguments"]).error:
            return {**call, "function": {**fn, "arguments": "{}"}}
        return call

    return [{**m, "tool_calls": [fixed(c) for c in m["tool_calls"]]} if m.get("tool_calls") else m for m in messages]


def _classify(lm: Any, exc: Exception, timeout_s: float, key_hint: str) -> tuple[bool, str]:
    """(worth retrying, the problem in words) for an error litellm or :mod:`.wire` raised.

    By class and by HTTP status both: litellm maps some statuses (a 403 from an OpenAI-compatible
    server, for one) to its generic ``APIError``, and a client that has no key at all to a 500.
    """
    status = getattr(exc, "status_code", None)
    detail = _detail(exc).lower()

    def kind(name: str) -> bool:  # litellm's class, or the same failure from the wire path (lm is None)
        return lm is not None and isinstance(exc, getattr(lm, name))

    if kind("ContextWindowExceededError") or (lm is None and status == 400 and "context" in detail):
        return False, "the conversation no longer fits the model's context window"
    if kind("Timeout") or getattr(exc, "timeout", False):  # before APIConnectionError, which it derives from
        return True, f"no answer within the {timeout_s:g} s timeout (timeout_s in the config, --timeout-s)"
    if kind("AuthenticationError") or status == 401 or "missing credentials" in detail or "api_key client option" in detail:
        return False, f"authentication failed{' (HTTP 401)' if status == 401 else ''}: check {key_hint}"
    if kind("PermissionDeniedError") or status == 403:
        return False, f"permission denied (HTTP 403): {key_hint} may not use this model"
    if kind("NotFoundError") or status == 404:
        return False, "not found (HTTP 404): check the model name and the api_base (--api-base)"
    if kind("RateLimitError") or status == 429:
        return True, "rate limited (HTTP 429)"
    if kind("APIConnectionError") or (lm is None and status is None):
        return True, "could not reach the server"
    if isinstance(status, int) and (status >= 500 or status in (408, 409)):
        return True, f"server error (HTTP {status})"
    if kind("BadRequestError") or status in (400, 422):
        return False, f"the provider rejected the request (HTTP {status})"
    return False, f"request failed ({type(exc).__name__}{f', HTTP {status}' if status else ''})"


def _rejects_tools(lm: Any, exc: Exception) -> bool:
    """A 400 about tools: vLLM without a tool parser, an Ollama model without tool support, litellm's own check."""
    if lm is None:
        return getattr(exc, "status_code", None) == 400 and "tool" in str(exc).lower() and "context" not in str(exc).lower()
    return isinstance(exc, lm.BadRequestError) and not isinstance(exc, lm.ContextWindowExceededError) and "tool" in str(exc).lower()


def _detail(exc: Exception) -> str:
    """The provider's own words: the first line, without litellm's stacked class-name prefixes."""
    lines = str(getattr(exc, "message", "") or exc).strip().splitlines()
    return _PREFIXES.sub("", lines[0])[:300] if lines else type(exc).__name__


_PREFIXES = re.compile(r"^(?:(?:litellm\.)?\w*(?:Error|Exception|Timeout)\s*[:-]\s*)+")


def _retry_after(exc: Exception) -> float:
    if isinstance(exc, wire.WireError):
        return exc.retry_after
    response = getattr(exc, "response", None)
    try:
        return float(response.headers.get("retry-after", 0)) if response is not None else 0.0
    except (AttributeError, TypeError, ValueError):
        return 0.0


def _token_cost(lm: Any, model: str, prompt_tokens: int, completion_tokens: int) -> float:
    try:
        return float(sum(lm.cost_per_token(model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)))
    except Exception:  # noqa: BLE001 — as in _cost: unpriced models cost 0.0
        return 0.0


def _cost(lm: Any, response: Any) -> float:
    try:
        return float(lm.completion_cost(completion_response=response) or 0.0)
    except Exception:  # noqa: BLE001 — local and unpriced models have no cost entry; cost is bookkeeping and must not fail a turn
        return 0.0
