"""Checks of exported rows against the formats' documented schemas (no network, no SDK).

OpenAI's fine-tuning endpoint rejects a whole file for one bad line, and only after upload;
these checks say which line and why before that. They follow the fine-tuning guide's chat
format (``messages`` with ``system``/``user``/``assistant``/``tool`` roles, ``tool_calls`` whose
``arguments`` is a JSON *string*, ``weight`` 0 or 1 on assistant messages only, optional
``tools`` and ``parallel_tool_calls``) and its preference (DPO) format.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["openai_chat_errors", "openai_preference_errors"]

_MESSAGE_KEYS = {
    "system": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls", "weight", "function_call"},
    "tool": {"role", "content", "tool_call_id"},
}


def _tool_errors(tools: Any, where: str) -> list[str]:
    if not isinstance(tools, list):
        return [f"{where}: tools must be a list"]
    errs = []
    for i, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(fn, dict):
            errs.append(f"{where}.tools[{i}]: must be {{'type': 'function', 'function': {{…}}}}")
            continue
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            errs.append(f"{where}.tools[{i}].function.name must be a non-empty string")
        params = fn.get("parameters")
        if params is not None and (not isinstance(params, dict) or params.get("type") != "object"):
            errs.append(f"{where}.tools[{i}].function.parameters must be a JSON schema of type object")
    return errs


def _message_errors(m: Any, where: str, seen_calls: set[str], allow_weight: bool = True) -> list[str]:
    if not isinstance(m, dict):
        return [f"{where}: a message must be an object"]
    role = m.get("role")
    if role not in _MESSAGE_KEYS:
        return [f"{where}: role must be one of system, user, assistant, tool (got {role!r})"]
    errs = [f"{where}: unexpected key {k!r} for a {role} message" for k in sorted(set(m) - _MESSAGE_KEYS[role])]
    content = m.get("content")
    calls = m.get("tool_calls")
    if role == "assistant":
        if content is None and not calls:
            errs.append(f"{where}: an assistant message needs content or tool_calls")
        if content is not None and not isinstance(content, str):
            errs.append(f"{where}: content must be a string or null")
        if "weight" in m and (not allow_weight or m["weight"] not in (0, 1) or isinstance(m["weight"], bool)):
            errs.append(f"{where}: weight must be 0 or 1" if allow_weight else f"{where}: weight is not allowed here")
        for j, tc in enumerate(calls or []):
            w = f"{where}.tool_calls[{j}]"
            fn = tc.get("function") if isinstance(tc, dict) else None
            if not isinstance(tc, dict) or tc.get("type") != "function" or not isinstance(tc.get("id"), str) or not isinstance(fn, dict):
                errs.append(f"{w}: needs id (string), type 'function' and function {{name, arguments}}")
                continue
            if not isinstance(fn.get("name"), str) or not fn["name"]:
                errs.append(f"{w}.function.name must be a non-empty string")
            args = fn.get("arguments")
            if not isinstance(args, str):
                errs.append(f"{w}.function.arguments must be a JSON string (got {type(args).__name__})")
            else:
                try:
                    json.loads(args)
                except ValueError:
                    errs.append(f"{w}.function.arguments is not valid JSON")
            seen_calls.add(tc["id"])
        if calls is not None and not isinstance(calls, list):
            errs.append(f"{where}: tool_calls must be a list")
    else:
        if not isinstance(content, str):
            errs.append(f"{where}: content must be a string")
        if role == "tool" and m.get("tool_call_id") not in seen_calls:
            errs.append(f"{where}: tool_call_id {m.get('tool_call_id')!r} answers no earlier tool call")
    return errs


def openai_chat_errors(row: Any) -> list[str]:
    """Problems of one chat fine-tuning example (empty list: valid)."""
    if not isinstance(row, dict):
        return ["a line must be a JSON object"]
    errs = [f"unexpected top-level key {k!r}" for k in sorted(set(row) - {"messages", "tools", "parallel_tool_calls"})]
    msgs = row.get("messages")
    if not isinstance(msgs, list) or not msgs:
        return errs + ["messages must be a non-empty list"]
    seen: set[str] = set()
    for i, m in enumerate(msgs):
        errs += _message_errors(m, f"messages[{i}]", seen)
    assistants = [m for m in msgs if isinstance(m, dict) and m.get("role") == "assistant"]
    if not assistants:
        errs.append("an example needs at least one assistant message")
    elif all(m.get("weight", 1) == 0 for m in assistants):
        errs.append("every assistant message has weight 0: nothing to train on")
    if "tools" in row:
        errs += _tool_errors(row["tools"], "row")
    if "parallel_tool_calls" in row and not isinstance(row["parallel_tool_calls"], bool):
        errs.append("parallel_tool_calls must be a boolean")
    return errs


def openai_preference_errors(row: Any) -> list[str]:
    """Problems of one preference (DPO) fine-tuning example."""
    if not isinstance(row, dict):
        return ["a line must be a JSON object"]
    errs = [f"unexpected top-level key {k!r}" for k in sorted(set(row) - {"input", "preferred_output", "non_preferred_output"})]
    inp = row.get("input")
    if not isinstance(inp, dict) or not isinstance(inp.get("messages"), list) or not inp["messages"]:
        return errs + ["input.messages must be a non-empty list"]
    errs += [f"unexpected input key {k!r}" for k in sorted(set(inp) - {"messages", "tools", "parallel_tool_calls"})]
    seen: set[str] = set()
    for i, m in enumerate(inp["messages"]):
        errs += _message_errors(m, f"input.messages[{i}]", seen, allow_weight=False)
    if "tools" in inp:
        errs += _tool_errors(inp["tools"], "input")
    for key in ("preferred_output", "non_preferred_output"):
        out = row.get(key)
        if not isinstance(out, list) or len(out) != 1 or not isinstance(out[0], dict) or out[0].get("role") != "assistant":
            errs.append(f"{key} must be a list of exactly one assistant message")
        else:
            errs += _message_errors(out[0], f"{key}[0]", set(seen), allow_weight=False)
    if not errs and row["preferred_output"] == row["non_preferred_output"]:
        errs.append("preferred and non-preferred outputs are identical")
    return errs
