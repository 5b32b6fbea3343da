"""The agent loop as a LangGraph ``StateGraph``: model → tools → review → apply → model …

Edits never land from inside a tool: the edit tools *propose*, the ``review`` node asks
(``interrupt()`` for a person, or an auto/never policy), and ``apply`` writes the accepted
hunks through the workspace (git snapshot), evaluates the kernel and tells the model what
happened. State holds only JSON-able data (messages are OpenAI-style dicts), so a SQLite
checkpointer makes every session resumable; the model, tools, workspace and session store
are runtime objects passed to the graph factory, never serialized.
"""

from __future__ import annotations

import json
import operator
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from .context import condense
from .models.base import ModelError
from .prompts import render
from .tools import AgentContext, ToolRegistry, compact_evaluation
from .types import Model, ModelTurn, ToolCall, TurnCancelled, Usage

__all__ = ["AgentState", "Budget", "Runtime", "build_graph"]

MAX_NUDGES = 3


class AgentState(TypedDict, total=False):
    messages: Annotated[list[dict[str, Any]], operator.add]
    turn: int
    pending: dict[str, Any] | None
    decision: dict[str, Any] | None
    done: bool
    stop_reason: str
    usage: dict[str, float]
    best: dict[str, Any] | None
    result: dict[str, Any] | None  #: the submitted kernel's full verification: the session's result
    nudges: int


@dataclass
class Budget:
    max_turns: int = 30
    max_cost_usd: float | None = None
    max_seconds: float | None = None


@dataclass
class Runtime:
    """Everything the nodes use that is not state."""

    model: Model
    tools: ToolRegistry
    ctx: AgentContext
    session: Any  #: nkiagent.sessions.store.Session
    approve: str = "auto"  #: ask | auto | never
    budget: Budget = field(default_factory=Budget)
    kernel_path: str = ""
    on_event: Callable[[str, dict[str, Any]], None] | None = None
    on_token: Callable[[str], None] | None = None
    context_chars: int = 60000
    started: float = field(default_factory=time.time)
    prefetched: tuple[str, Future[ModelTurn]] | None = None  #: the first request, sent before the graph existed
    candidates: set[str] = field(default_factory=set)  #: code hashes already recorded as candidates (one per distinct kernel)

    def prefetch(self, messages: list[dict[str, Any]]) -> None:
        """Send the first request now, on a thread, while LangGraph is still importing (seconds).

        The first model node takes this answer if it would send exactly these messages; the
        request is the same one it would have made, only earlier.
        """
        sent = condense(messages, self.context_chars)
        fut: Future[ModelTurn] = Future()

        def run() -> None:
            try:
                fut.set_result(self.model.complete(sent, self.tools.schemas(), self.on_token))
            except BaseException as exc:  # noqa: BLE001 — handed to the model node, which reports it like any model failure
                fut.set_exception(exc)

        self.prefetched = (json.dumps(sent, sort_keys=True), fut)
        threading.Thread(target=run, name="nkiagent-first-request", daemon=True).start()

    def complete(self, sent: list[dict[str, Any]]) -> ModelTurn:
        """The model's answer to ``sent``: the prefetched one when it was for these messages."""
        pending, self.prefetched = self.prefetched, None
        if pending is not None and pending[0] == json.dumps(sent, sort_keys=True):
            return pending[1].result()
        return self.model.complete(sent, self.tools.schemas(), self.on_token)

    def watch_model(self) -> None:
        """Pass a model's waits and retries on: a retry is an event of the session, a wait only reaches ``on_event`` (not stored)."""
        if hasattr(self.model, "on_status"):
            self.model.on_status = self._model_status

    def _model_status(self, kind: str, fields: dict[str, Any]) -> None:
        if kind == "retry":
            self.emit("model_retry", **fields)
        elif self.on_event is not None:
            self.on_event("model_wait", {"type": "model_wait", **fields})

    def cancel(self) -> None:
        """Stop the model request in flight or its retry wait, if the model can (thread-safe)."""
        cancel = getattr(self.model, "cancel", None)
        if cancel is not None:
            cancel()

    def emit(self, type_: str, **fields: Any) -> dict[str, Any]:
        event = self.session.append(type_, **fields)
        if self.on_event is not None:
            self.on_event(type_, event)
        return event


def _calls(msg: dict[str, Any]) -> list[ToolCall]:
    out = []
    for tc in msg.get("tool_calls") or []:
        fn = tc.get("function", {})
        raw = fn.get("arguments") or "{}"
        try:
            args = json.loads(raw) if isinstance(raw, str) else dict(raw)
            err = "" if isinstance(args, dict) else "arguments must be a JSON object"
        except ValueError as exc:
            args, err = {}, f"arguments are not valid JSON: {exc}"
        out.append(
            ToolCall(tc.get("id", ""), fn.get("name", ""), args if isinstance(args, dict) else {}, raw if isinstance(raw, str) else "", err)
        )
    return out


def _tool_message(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def build_graph(rt: Runtime, checkpointer: Any = None) -> Any:
    """Compile the agent graph for ``rt`` (import of LangGraph happens here, not at startup)."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def over_budget(state: AgentState) -> str:
        b = rt.budget
        if state.get("turn", 0) >= b.max_turns:
            return f"max-turns ({b.max_turns})"
        if b.max_cost_usd is not None and state.get("usage", {}).get("cost_usd", 0.0) >= b.max_cost_usd:
            return f"budget (${b.max_cost_usd})"
        if b.max_seconds is not None and time.time() - rt.started >= b.max_seconds:
            return f"time ({b.max_seconds} s)"
        return ""

    def model_node(state: AgentState) -> dict[str, Any]:
        stop = over_budget(state)
        if stop:
            rt.emit("note", text=f"stopping: {stop}")
            return {"done": True, "stop_reason": stop}
        sent = condense(state["messages"], rt.context_chars)
        turn = state.get("turn", 0) + 1
        rt.emit("model_request", turn=turn, model=rt.model.name, messages=sent, tools=list(rt.tools.specs))
        try:
            answer: ModelTurn = rt.complete(sent)
        except TurnCancelled:
            raise  # the person stopped the turn: not the model's failure, and the step is asked again later
        except Exception as exc:  # noqa: BLE001 — a model failure ends the session cleanly; nothing is lost
            # a ModelError's message names the model, the problem and the fix already
            rt.emit("error", turn=turn, where="model", message=str(exc) if isinstance(exc, ModelError) else f"{type(exc).__name__}: {exc}")
            return {"done": True, "stop_reason": f"model error: {exc}", "turn": turn}
        usage = dict(state.get("usage") or {"prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0})
        u: Usage = answer.usage
        usage["prompt_tokens"] += u.prompt_tokens
        usage["completion_tokens"] += u.completion_tokens
        usage["cost_usd"] += u.cost_usd
        msg = answer.to_message()
        rt.emit(
            "model_response",
            turn=turn,
            message=msg,
            usage={"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "cost_usd": u.cost_usd},
            finish_reason=answer.finish_reason,
        )
        update: dict[str, Any] = {"messages": [msg], "turn": turn, "usage": usage}
        if not answer.tool_calls:
            nudges = state.get("nudges", 0) + 1
            if nudges >= MAX_NUDGES:
                return {**update, "done": True, "stop_reason": "the model stopped calling tools", "nudges": nudges}
            nudge = {"role": "user", "content": "Please continue by calling a tool (read_file, edit_file, evaluate, submit …)."}
            return {**update, "messages": [msg, nudge], "nudges": nudges}
        return {**update, "nudges": 0}

    def tools_node(state: AgentState) -> dict[str, Any]:
        """Run the turn's tool calls in order. Edit calls build one proposal (one file): each applies to
        the text the previous ones proposed; the calls after the first edit wait until it is decided
        (``apply`` runs them, so they see the kernel the edits made) and every result keeps its place."""
        last = state["messages"][-1]
        out: list[dict[str, Any]] = []
        pending: dict[str, Any] | None = None
        done, stop, result = False, "", None
        best = state.get("best")
        rt.ctx.proposed.clear()
        for call in _calls(last):
            spec = rt.tools.specs.get(call.name)
            if pending is not None and not (spec is not None and spec.proposes_edit and not call.error):
                pending["later"].append({"id": call.id, "name": call.name, "arguments": call.arguments, "error": call.error})
                continue
            rt.emit("tool_call", turn=state.get("turn", 0), id=call.id, name=call.name, arguments=call.arguments)
            if call.error:
                result_text = f"error: {call.error}"
                rt.emit("tool_result", id=call.id, name=call.name, ok=False, content=result_text)
                out.append(_tool_message(call.id, result_text))
                continue
            if pending is not None and call.arguments.get("path") not in (None, pending["path"]):
                result_text = (
                    f"error: not proposed: this turn's proposal already edits {pending['path']}; a proposal holds one file — "
                    f"edit {call.arguments.get('path')} in the next turn"
                )
                rt.emit("tool_result", id=call.id, name=call.name, ok=False, content=result_text)
                pending["later"].append({"id": call.id, "name": call.name, "arguments": call.arguments, "error": result_text})
                continue
            res = rt.tools.call(rt.ctx, call.name, call.arguments)
            rt.emit(
                "tool_result",
                id=call.id,
                name=call.name,
                ok=res.ok,
                content=res.content[:20000],
                data={k: v for k, v in res.data.items() if k != "evaluation"},
            )
            if "evaluation" in res.data:
                best = _record_evaluation(rt, {**state, "best": best}, res.data["evaluation"], call.arguments.get("path", ""))
            if res.edit is not None:
                edit = res.edit
                rt.ctx.proposed[edit["path"]] = edit["new"]
                if pending is None:
                    pending = {"path": edit["path"], "old": edit["old"], "new": edit["new"], "calls": [call.id], "later": []}
                else:
                    pending["new"] = edit["new"]
                    pending["calls"].append(call.id)
                    pending["later"].append({"id": call.id, "part": len(pending["calls"])})
                continue
            if not res.ok and pending is not None:
                pending["later"].append({"id": call.id, "error": res.content})
                continue
            out.append(_tool_message(call.id, res.content))
            if res.submitted:
                done, stop = True, f"submitted: {res.data.get('summary', '')}"
                result = _result(res.data)
        if pending is not None:
            from .hunks import diff_hunks, unified_diff

            hunks = diff_hunks(pending["old"], pending["new"], pending["path"])
            pending.update(
                tool_call_id=pending["calls"][0], diff=unified_diff(pending["old"], pending["new"], pending["path"]), hunks=len(hunks)
            )
            rt.emit(
                "edit_proposed",
                turn=state.get("turn", 0),
                path=pending["path"],
                diff=pending["diff"],
                hunks=len(hunks),
                tool_call_id=pending["tool_call_id"],
                edit_calls=len(pending["calls"]),
            )
        update: dict[str, Any] = {"messages": out, "pending": pending, "best": best}
        if done:
            update.update(done=True, stop_reason=stop, result=result)
        return update

    def review_node(state: AgentState) -> dict[str, Any]:
        p = state["pending"]
        assert p is not None
        if rt.approve == "auto":
            decision = {"action": "accept"}
        elif rt.approve == "never":
            decision = {"action": "dry-run"}
        else:
            from .hunks import diff_hunks

            hunks = [{"index": h.index, "header": h.header, "lines": h.lines} for h in diff_hunks(p["old"], p["new"], p["path"])]
            decision = interrupt({"kind": "review", "path": p["path"], "diff": p["diff"], "hunks": hunks, "proposed": p["new"]})
            decision = _normalize_decision(decision, len(hunks))
        rt.emit(
            "review_decision", turn=state.get("turn", 0), path=p["path"], decision=decision, mode=rt.approve, tool_call_id=p["tool_call_id"]
        )
        return {"decision": decision}

    def apply_node(state: AgentState) -> dict[str, Any]:
        p = state["pending"]
        d = state["decision"] or {"action": "reject"}
        assert p is not None
        rt.ctx.proposed.clear()
        new_text = None
        if d["action"] == "accept":
            new_text = p["new"]
        elif d["action"] == "partial":
            from .hunks import apply_hunks

            new_text = apply_hunks(p["old"], p["new"], [i - 1 for i in d["accepted"]])
        elif d["action"] == "edit":
            new_text = d["content"]
        commit, evaluation_text, refused = None, "", ""
        best = state.get("best")
        evaluated = False
        if new_text is not None:
            try:
                commit = rt.ctx.workspace.write(p["path"], new_text, rt.session.id, f"nkiagent: {d['action']} edit to {p['path']}")
            except Exception as exc:  # noqa: BLE001 — a refused write (user changes) is reported to the model, not raised
                refused = str(exc)
            if not refused:
                sha = rt.session.save_kernel(new_text)
                rt.emit("edit_applied", turn=state.get("turn", 0), path=p["path"], commit=commit, code_sha256=sha, action=d["action"])
                if p["path"] == rt.kernel_path:
                    ev = rt.ctx.evaluate(p["path"])
                    best = _record_evaluation(rt, state, ev, p["path"])
                    evaluation_text = compact_evaluation(ev)
                    evaluated = True
        n = len(p.get("calls", [p["tool_call_id"]]))
        if refused:  # the person sees it as refused, not as the accepted review before it
            rt.emit("edit_refused", turn=state.get("turn", 0), path=p["path"], reason=refused, action=d["action"])
            content = f"The edit to {p['path']} was not applied: {refused}"
        else:
            content = render(
                "feedback.md.j2", None, decision=d, path=p["path"], total=p["hunks"], commit=commit or "", evaluation=evaluation_text
            )
        if n > 1:
            content = f"Your {n} edit calls to {p['path']} in this turn were reviewed as one proposal. " + content
        messages = [_tool_message(p["tool_call_id"], content)]
        done, stop, update_result = False, "", None
        for later in p.get("later", []):
            if "part" in later:
                messages.append(
                    _tool_message(
                        later["id"], f"edit call {later['part']} of {n}: part of the proposal above (the result of the first edit call)"
                    )
                )
            elif "name" not in later or later.get("error"):
                messages.append(_tool_message(later["id"], later.get("error") or "error"))
            elif evaluated and later["name"] == "evaluate" and later["arguments"].get("path") == p["path"]:
                messages.append(
                    _tool_message(
                        later["id"],
                        f"{p['path']} was evaluated once, after this turn's edits were applied: see the result of the first edit call",
                    )
                )
            else:
                rt.emit("tool_call", turn=state.get("turn", 0), id=later["id"], name=later["name"], arguments=later["arguments"])
                res = rt.tools.call(rt.ctx, later["name"], later["arguments"])
                rt.emit(
                    "tool_result",
                    id=later["id"],
                    name=later["name"],
                    ok=res.ok,
                    content=res.content[:20000],
                    data={k: v for k, v in res.data.items() if k != "evaluation"},
                )
                if "evaluation" in res.data:
                    best = _record_evaluation(rt, {**state, "best": best}, res.data["evaluation"], later["arguments"].get("path", ""))
                messages.append(_tool_message(later["id"], res.content))
                if res.submitted:
                    done, stop = True, f"submitted: {res.data.get('summary', '')}"
                    update_result = _result(res.data)
        update: dict[str, Any] = {"messages": messages, "pending": None, "decision": None, "best": best}
        if done:
            update.update(done=True, stop_reason=stop, result=update_result)
        return update

    def after_model(state: AgentState) -> str:
        if state.get("done"):
            return END
        last = state["messages"][-1]
        return "tools" if last.get("role") == "assistant" and last.get("tool_calls") else "model"

    def after_tools(state: AgentState) -> str:
        if state.get("pending"):
            return "review"
        return END if state.get("done") else "model"

    g = StateGraph(AgentState)
    g.add_node("model", model_node)
    g.add_node("tools", tools_node)
    g.add_node("review", review_node)
    g.add_node("apply", apply_node)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", after_model, ["tools", "model", END])
    g.add_conditional_edges("tools", after_tools, ["review", "model", END])
    g.add_edge("review", "apply")
    g.add_conditional_edges("apply", lambda s: END if s.get("done") else "model", ["model", END])
    return g.compile(checkpointer=checkpointer)


def _normalize_decision(raw: Any, n_hunks: int) -> dict[str, Any]:
    """Accept ``{"action": accept|reject|partial|edit, "hunks": [1-based…], "content", "feedback"}`` from a UI or terminal."""
    d = dict(raw) if isinstance(raw, dict) else {"action": str(raw)}
    d.setdefault("feedback", "")  # the feedback template reads it for every rejection (StrictUndefined)
    action = d.get("action", "reject")
    if action == "partial":
        accepted = sorted({int(i) for i in d.get("hunks", d.get("accepted", [])) if 1 <= int(i) <= n_hunks})
        if len(accepted) == n_hunks:
            action = "accept"
        elif not accepted:
            action = "reject"
        d["accepted"] = accepted
        d["rejected"] = [i for i in range(1, n_hunks + 1) if i not in accepted]
    if action == "edit" and not isinstance(d.get("content"), str):
        action = "reject"
    d["action"] = action if action in ("accept", "reject", "partial", "edit", "dry-run") else "reject"
    return d


def _result(data: dict[str, Any]) -> dict[str, Any]:
    """The session's result from a submit's data: the file and its full verification."""
    ev = data.get("evaluation") or {}
    return {
        "path": data.get("path", ""),
        "verdict": ev.get("verdict"),
        "latency_us": ev.get("latency_us"),
        "speedup": ev.get("speedup"),
        "code_sha256": ev.get("code_sha256"),
        "timing_source": ev.get("timing_source"),
        "reasons": ev.get("reasons", [])[:3],
        "speedup_vs": ev.get("speedup_vs"),
        "sol_latency_us": ev.get("sol_latency_us"),
        "fraction_of_peak": ev.get("fraction_of_peak"),
    }


def _record_evaluation(rt: Runtime, state: AgentState, ev: dict[str, Any], path: str) -> dict[str, Any] | None:
    """Store an evaluation and its candidate; return the new best (pass and fastest) if it improved."""
    rt.emit("evaluation", turn=state.get("turn", 0), path=path, result=ev)
    sha = str(ev.get("code_sha256") or "")
    if not sha or sha not in rt.candidates:  # the same kernel evaluated again (a submit's full verification) is not a new candidate
        rt.candidates.add(sha)
        rt.emit(
            "candidate",
            turn=state.get("turn", 0),
            path=path,
            code_sha256=ev.get("code_sha256"),
            verdict=ev.get("verdict"),
            latency_us=ev.get("latency_us"),
            speedup=ev.get("speedup"),
            timing_source=ev.get("timing_source"),
        )
    best = state.get("best")
    if ev.get("verdict") == "pass" and ev.get("latency_us") is not None and (best is None or ev["latency_us"] < best["latency_us"]):
        return {
            "code_sha256": ev.get("code_sha256"),
            "latency_us": ev["latency_us"],
            "speedup": ev.get("speedup"),
            "path": path,
            "timing_source": ev.get("timing_source"),
            "speedup_vs": ev.get("speedup_vs"),
        }
    return best
