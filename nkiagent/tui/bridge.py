"""The seam between the synchronous agent loop and the UI: run the graph on a thread, ask reviews through futures.

The LangGraph loop (:mod:`nkiagent.agent.graph`) is synchronous and blocks on the model, the
verifier and — for ``approve=ask`` — the person's review. The UI runs it on a thread worker
through an :class:`AgentBridge`, which knows nothing about Textual: events and streamed tokens
go out through callbacks (the app turns them into thread-safe messages), and a review
interrupt becomes a :class:`concurrent.futures.Future` the UI resolves with a decision in the
graph's own format (``{"action": accept|reject|partial|edit, "hunks": [1-based …],
"feedback", "content"}``, normalised by the graph exactly as for the terminal review).

Cancelling (``ctrl+c`` once) must stop the current turn without losing the session. The loop
checks a flag after every graph step (each step is checkpointed with ``durability="sync"``, so
stopping between steps loses nothing), a waiting review future is failed with
:class:`TurnCancelled`, and a model that is streaming is interrupted from its token callback:
the model step then fails with :class:`TurnCancelled`, is not checkpointed and is recorded as
nothing but the cancel (not as a model error). A cancel that comes while a session is still
starting (its first request streams before the graph exists) stops it as soon as it runs.
Afterwards :meth:`AgentBridge.say` continues the same session, from its checkpoint, with a new
message (a cancelled model step is asked again with it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from ..agent.types import TurnCancelled

__all__ = ["AgentBridge", "ReviewRequest", "TurnCancelled"]

ReviewRequest = Callable[[dict[str, Any]], "Future[dict[str, Any]]"]
"""Called on the agent thread with a review payload; returns a future the UI resolves with the decision."""


class AgentBridge:
    """Drive one session's graph on the calling (worker) thread; see the module docstring."""

    def __init__(
        self, on_event: Callable[[str, dict[str, Any]], None], on_token: Callable[[str], None], request_review: ReviewRequest
    ) -> None:
        self.on_event = on_event
        self.on_token = on_token
        self.request_review = request_review
        self.rt: Any = None  #: nkiagent.agent.graph.Runtime once a session is open
        self.graph: Any = None
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._review: Future[dict[str, Any]] | None = None
        self.running = False

    # -- opening a session (call these on the worker thread) -------------------------------------
    def start(self, cfg: Any) -> dict[str, Any] | None:
        """Create a session from a :class:`~nkiagent.agent.runner.SessionConfig` and run it until it ends or is cancelled."""
        from ..agent.runner import start_session

        self._cancel.clear()
        self.rt, self.graph, first = start_session(cfg, self.on_event, self._token)
        return self.run(first)  # (a cancel while the first request streams, before this, stops it)

    def open(self, session_dir: Path, approve: str | None = None) -> None:
        """Reopen a stored session (history stays on disk; nothing runs until :meth:`run` or :meth:`say`)."""
        from ..agent.runner import resume_session

        self.rt, self.graph = resume_session(session_dir, self.on_event, self._token, approve=approve)

    def resume(self, session_dir: Path, approve: str | None = None) -> dict[str, Any] | None:
        """Reopen a stored session and continue a run it left unfinished (a pending review asks again)."""
        self._cancel.clear()
        self.open(session_dir, approve)
        return self.run(None) if self.pending() else None

    # -- running ---------------------------------------------------------------------------------
    @property
    def config(self) -> dict[str, Any]:
        return {"configurable": {"thread_id": self.rt.session.id}, "recursion_limit": 10_000}

    def pending(self) -> tuple[str, ...]:
        """The graph nodes a stopped run would continue with (empty when the run ended)."""
        return tuple(self.graph.get_state(self.config).next) if self.graph is not None else ()

    def say(self, text: str) -> dict[str, Any] | None:
        """Continue the session with a message from the person (after it ended or was cancelled)."""
        self._cancel.clear()
        if self.pending() and self.pending() != ("model",):
            return self.run(None)  # finish the interrupted step first; the message would split a tool-call exchange
        message = {"role": "user", "content": text}
        if self.pending():
            self.graph.update_state(self.config, {"messages": [message]})
            return self.run(None)
        return self.run({"messages": [message], "done": False, "stop_reason": "", "nudges": 0})

    def run(self, payload: Any) -> dict[str, Any] | None:
        """Run the graph from ``payload`` (None continues from the checkpoint) until it ends (state) or is cancelled (None)."""
        from langgraph.types import Command

        self.running = True
        try:
            while True:
                try:
                    for _ in self.graph.stream(payload, self.config, durability="sync", stream_mode="updates"):
                        if self._cancel.is_set():
                            break
                except TurnCancelled:  # from the token callback: the model step stops, unrecorded
                    self._cancelled()
                    return None
                if self._cancel.is_set():
                    self._cancelled()
                    return None
                snap = self.graph.get_state(self.config)
                if snap.interrupts:
                    with self._lock:
                        self._review = self.request_review(snap.interrupts[0].value)
                    try:
                        decision = self._review.result()
                    except TurnCancelled:
                        self._cancelled()
                        return None
                    finally:
                        with self._lock:
                            self._review = None
                    payload = Command(resume=decision)
                    continue
                if snap.next:
                    payload = None
                    continue
                state = dict(snap.values)
                self.rt.emit(
                    "session_end",
                    stop_reason=state.get("stop_reason", ""),
                    best=state.get("best"),
                    usage=state.get("usage"),
                    turns=state.get("turn", 0),
                )
                return state
        finally:
            self.running = False

    def cancel(self) -> None:
        """Stop the current turn (thread-safe): between steps, in a waiting review, in the model's stream, or while a request waits or retries."""
        self._cancel.set()
        if self.rt is not None:
            self.rt.cancel()
        with self._lock:
            if self._review is not None and not self._review.done():
                self._review.set_exception(TurnCancelled("cancelled by the user"))

    def _cancelled(self) -> None:
        self.rt.emit("note", text="turn cancelled by the user; the session is kept (type a message to continue)")

    def _token(self, text: str) -> None:
        if self._cancel.is_set():
            raise TurnCancelled("cancelled by the user while the model was answering")
        self.on_token(text)
