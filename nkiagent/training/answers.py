"""One reading of a model's answer, in every format the exports and prompts use, applied to the kernel in force.

A trained policy may answer with OpenAI tool calls (``tool_calls`` on a message), Hermes-style
``<tool_call>{"name", "arguments"}</tool_call>`` text (verl's and the exports' plain format),
nkiagent's text-mode blocks (```` ```edit PATH ````, ```` ```write PATH ````, …, see
:mod:`nkiagent.agent.models.textmode`) or plain fenced code. Exports, :func:`~.env.reward_fn`,
:func:`~.env.compute_score` and :class:`~.env.KernelEnv` all score an answer through
:func:`score_answer`, so a row's exported reward is what a trainer's reward function gives
its recorded completion. The rules (every reward spec):

* an answer that changes the kernel is verified and scored by the spec;
* one that leaves it unchanged (reads, re-evaluations, submit) earns exactly 0 — re-evaluating
  an unchanged kernel must not collect its reward again;
* a tool error (unknown tool, bad arguments, an edit whose ``old`` text is not in the kernel, a
  path outside the kernel file) scores as a compile failure, or as a cheat if the kernel it
  produced was rejected — a broken call must never hide a cheat;
* an answer with neither a tool call nor code scores as a compile failure.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .rewards import Reward, RewardSpec

__all__ = [
    "TOOL_ERROR",
    "UNCHANGED",
    "Action",
    "Applied",
    "apply_answer",
    "fenced_kernel",
    "needs_evaluation",
    "parse_answer",
    "score_answer",
]

UNCHANGED = "unchanged"  #: turn outcome: the answer left the kernel as it was
TOOL_ERROR = "tool_error"  #: turn outcome: a tool call of the answer could not be carried out

_FENCE = re.compile(r"^(`{3,})[ \t]*([\w.+-]*)[^\n]*\n(.*?)^\1[ \t]*$", re.DOTALL | re.MULTILINE)
_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
#: Tools that only look (their call is valid, the kernel stays as it was) and the arguments each requires.
READ_ONLY = {
    "read_file": ("path",),
    "list_files": (),
    "evaluate": ("path",),
    "profile": ("path",),
    "submit": ("path",),
    "nki_docs": ("query",),
}
EDITS = {"write_file": ("path", "content"), "edit_file": ("path", "old", "new")}
KNOWN_ARGS = {
    "read_file": {"path"},
    "list_files": {"path"},
    "evaluate": {"path"},
    "profile": {"path"},
    "submit": {"path", "summary"},
    "nki_docs": {"query"},
    "write_file": {"path", "content"},
    "edit_file": {"path", "old", "new"},
}


@dataclass
class Action:
    """One tool call read from an answer; ``error`` is set when it could not be read."""

    name: str
    args: dict[str, Any]
    id: str = ""
    error: str = ""


def _args(name: str, raw: Any) -> tuple[dict[str, Any], str]:
    if isinstance(raw, dict):
        return raw, ""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, ""
    if not isinstance(raw, str):
        return {}, f"arguments of {name} must be a JSON object, got {type(raw).__name__}"
    try:
        args = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        return {}, f"arguments of {name} are not valid JSON ({exc})"
    if not isinstance(args, dict):
        return {}, f"arguments of {name} must be a JSON object, got {type(args).__name__}"
    return args, ""


def _hermes(text: str) -> list[tuple[int, Action]]:
    out = []
    for m in _HERMES.finditer(text):
        try:
            obj = json.loads(m.group(1))
        except (ValueError, RecursionError) as exc:
            out.append((m.start(), Action("", {}, error=f"a <tool_call> block is not valid JSON ({exc})")))
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            out.append((m.start(), Action("", {}, error='a <tool_call> block must be {"name": TOOL, "arguments": {...}}')))
            continue
        args, err = _args(obj["name"], obj.get("arguments"))
        out.append((m.start(), Action(obj["name"], args, error=err)))
    return out


def _text_blocks(text: str) -> list[tuple[int, Action]]:
    from ..agent.models.textmode import BLOCK, parse

    return [(m.start(), Action(c.name, dict(c.arguments), c.id, c.error)) for m in BLOCK.finditer(text) for c in parse(m.group(0))]


def fenced_kernel(text: str) -> str | None:
    """The kernel in plain text: the last fenced block that holds ``@nki.jit``, else the last python block,
    else the whole text when it holds ``@nki.jit`` and no fence (a usage example after the kernel is not the kernel)."""
    blocks = [(lang.lower(), body) for _, lang, body in _FENCE.findall(text)]
    jit = [b for _, b in blocks if "nki.jit" in b]
    code = jit or [b for lang, b in blocks if lang in ("python", "py", "")]
    if code:
        return code[-1] if code[-1].endswith("\n") else code[-1] + "\n"
    return text if "@nki.jit" in text and not blocks else None


def parse_answer(answer: Any) -> tuple[list[Action], str | None]:
    """(tool calls, code) of an answer: text, an assistant message, or a list of messages (the last assistant one).

    Tool calls come from the message's ``tool_calls``, else from the text's Hermes ``<tool_call>``
    and text-mode blocks in order of appearance; ``code`` (a fenced kernel) is read only when
    there is no tool call. Never raises: what cannot be read becomes an :class:`Action` with an error.
    """
    if isinstance(answer, list):
        msgs = [m for m in answer if isinstance(m, Mapping) and m.get("role", "assistant") == "assistant"]
        return parse_answer(msgs[-1]) if msgs else ([], None)
    text = ""
    if isinstance(answer, Mapping):
        calls = answer.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            return [Action("", {}, error="tool_calls must be a list")], None
        acts = []
        for i, tc in enumerate(calls or []):
            fn = tc.get("function") if isinstance(tc, Mapping) else None
            fn = fn if isinstance(fn, Mapping) else (tc if isinstance(tc, Mapping) else {})
            name = fn.get("name")
            if not isinstance(name, str):
                acts.append(Action("", {}, error=f"tool_calls[{i}] has no function name"))
                continue
            args, err = _args(name, fn.get("arguments"))
            acts.append(Action(name, args, str(tc.get("id") or f"call_{i}") if isinstance(tc, Mapping) else f"call_{i}", err))
        if acts:
            return acts, None
        content = answer.get("content")
        text = content if isinstance(content, str) else ""
    elif isinstance(answer, str):
        text = answer
    if not text.strip():
        return [], None
    found = sorted(_hermes(text) + _text_blocks(text), key=lambda p: p[0])
    if found:
        return [a for _, a in found], None
    return [], fenced_kernel(text)


def _norm(path: str) -> str:
    return posixpath.normpath(path.strip())


@dataclass
class Applied:
    """What an answer does to the kernel: the code after it and what went wrong on the way."""

    code: str | None  #: the kernel after the answer (``None``: no kernel known and none written)
    changed: bool
    acted: bool  #: the answer held a tool call or code at all
    errors: list[str] = field(default_factory=list)
    results: list[tuple[Action, str]] = field(default_factory=list)  #: each call with the result text a model would read
    submitted: bool = False


def apply_answer(answer: Any, kernel: str | None, kernel_path: str | None = None) -> Applied:
    """Apply an answer's edits to ``kernel`` (the file at ``kernel_path``; any ``.py`` path when it is ``None``).

    Only the kernel file can change: an edit of another file, an absolute path or one that leaves
    the workspace is a tool error, as is an unknown tool or a missing argument.
    """
    actions, code = parse_answer(answer)
    if not actions:
        if code is None:
            return Applied(kernel, False, False)
        return Applied(code, code != kernel, True)
    out = Applied(kernel, False, True)
    want = _norm(kernel_path) if kernel_path else None
    for act in actions:
        err, text = _apply_one(act, out, want)
        if err:
            out.errors.append(err)
            text = f"error: {err}"
        out.results.append((act, text))
    out.changed = out.code != kernel
    return out


def _apply_one(act: Action, out: Applied, want: str | None) -> tuple[str, str]:
    """(error, result text) of one call; edits change ``out.code``."""
    if act.error:
        return act.error, ""
    if act.name not in KNOWN_ARGS:
        return f"unknown tool {act.name!r}; available tools: {', '.join(KNOWN_ARGS)}", ""
    required = {**READ_ONLY, **EDITS}[act.name]
    missing = [a for a in required if not isinstance(act.args.get(a), str)]
    unknown = sorted(set(act.args) - KNOWN_ARGS[act.name])
    if missing or unknown:
        parts = ([f"missing or not text: {', '.join(missing)}"] if missing else []) + (
            [f"unexpected {', '.join(unknown)}"] if unknown else []
        )
        return f"bad arguments for {act.name}: {'; '.join(parts)}", ""
    path = act.args.get("path")
    if isinstance(path, str) and (path.startswith("/") or _norm(path).startswith("..")):
        return f"{path} is outside the workspace; use the kernel's relative path{f' {want}' if want else ''}", ""
    if act.name in READ_ONLY:
        out.submitted = out.submitted or act.name == "submit"
        return "", f"{act.name} ok"
    assert isinstance(path, str)
    if want is not None and _norm(path) != want:
        return f"only the kernel file {want} can be changed here, not {path}", ""
    if act.name == "write_file":
        out.code = act.args["content"]
        return "", f"wrote {path}"
    if out.code is None:
        return f"{path} does not exist yet: write it whole with write_file", ""
    old, new = act.args["old"], act.args["new"]
    count = out.code.count(old) if old else 0
    if count != 1:
        return f"`old` {'does not occur' if count == 0 else f'occurs {count} times'} in {path}; give an exact, unique snippet", ""
    out.code = out.code.replace(old, new, 1)
    return "", f"edited {path}"


def score_answer(applied: Applied, spec: RewardSpec, evaluation: Mapping[str, Any] | None) -> Reward:
    """The reward of an applied answer (see the module docstring); ``evaluation`` is the changed kernel's, if it changed."""
    if not applied.acted:
        return spec.score(None)
    scored = spec.score(evaluation) if applied.changed and applied.code is not None else None
    if applied.errors:
        if scored is not None and scored.outcome == "rejected":
            return scored
        floor = spec.score(None).reward
        return Reward(TOOL_ERROR, {"penalty": floor}, floor, spec.id)
    if scored is None:
        return Reward(UNCHANGED, {}, 0.0, spec.id)
    return scored


def needs_evaluation(applied: Applied) -> bool:
    """Whether the answer produced a new kernel that must be verified before it can be scored."""
    return applied.acted and applied.changed and applied.code is not None
