r"""The text fallback: tool calls written as fenced blocks, for models or servers without tool calling.

Used when ``tool_mode="text"`` or when the provider rejects the ``tools`` parameter (an Ollama model
without tool support, a vLLM server started without a tool parser). The tools are then described in
the system message and the model answers with blocks in its text, which :func:`parse` turns into the
same :class:`ToolCall`\ s native tool calling gives, so the graph cannot tell the difference.

The format (a fence is three or more backticks and the closing fence is the same run alone on a
line, so a file that itself contains a three-backtick fence is written inside a four-backtick one):

``edit PATH`` — one ``edit_file(path, old, new)`` per OLD/NEW section, applied in order; OLD must be
exact text of the file (whole lines, with their newlines)::

    ```edit kernels/vector_add.py
    <<<<<<< OLD
    TILE_F = 512
    =======
    TILE_F = 1024
    >>>>>>> NEW
    ```

``write PATH`` — ``write_file(path, content)`` with the whole body as the new file::

    ```write kernels/vector_add.py
    import nki
    ...
    ```

``submit PATH`` — ``submit(path, summary)``, the body is the summary::

    ```submit kernels/vector_add.py
    Wider tiles halve the DMA count.
    ```

``tool NAME`` — any other tool, the body is its JSON arguments::

    ```tool evaluate
    {"path": "kernels/vector_add.py"}
    ```

``<<<<<<< SEARCH`` / ``>>>>>>> REPLACE`` (aider's spelling) are accepted for OLD / NEW. A block the
parser cannot read becomes a call with ``error`` set, so the model is told what was wrong.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..types import Message, ToolCall
from .base import tool_call

__all__ = ["BLOCK", "TEXT_CALL_ID", "instructions", "parse", "to_text_messages"]

TEXT_CALL_ID = "text_"  #: prefix of ids of calls parsed from text: their blocks are already in the message content

#: One fenced block (```` ```edit PATH ````, ``write``, ``submit``, ``tool``): also how the exports find each block of an answer
BLOCK = re.compile(
    r"^(?P<fence>`{3,})(?P<kind>edit|write|submit|tool)\b[ \t]*(?P<arg>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL
)
_SECTION = re.compile(
    r"^<{7}[ \t]*(?:OLD|SEARCH)[ \t]*\n(?P<old>.*?)^={7}[ \t]*\n(?P<new>.*?)^>{7}[ \t]*(?:NEW|REPLACE)[ \t]*$", re.MULTILINE | re.DOTALL
)
_BACKTICKS = re.compile(r"`{3,}")
_TOOL_OF = {"edit": "edit_file", "write": "write_file", "submit": "submit", "tool": "tool"}

_EDIT = """To change part of a file, one OLD/NEW section per change (OLD is exact text of the file, whole lines):
```edit PATH
<<<<<<< OLD
lines to replace
=======
replacement lines
>>>>>>> NEW
```"""
_WRITE = """To replace a whole file:
```write PATH
the complete new content
```"""
_SUBMIT = """To finish with a kernel as your answer:
```submit PATH
a short summary
```"""
_TOOL = """To call any tool, with its arguments as a JSON object:
```tool NAME
{"argument": "value"}
```"""


def instructions(tools: list[dict[str, Any]]) -> str:
    """How to call ``tools`` (OpenAI tool schemas) in text; appended to the system message."""
    names = {t["function"]["name"] for t in tools}
    lines = [
        (
            "You cannot call tools directly in this session. To use a tool, write a fenced block in your reply; "
            "the blocks are run in order after your reply and you get their results in the next message."
        ),
        "",
    ]
    for name, how in (("edit_file", _EDIT), ("write_file", _WRITE), ("submit", _SUBMIT)):
        if name in names:
            lines += [how, ""]
    lines += [_TOOL, "", "If a file contains ``` itself, open and close its block with ```` instead.", "", "Tools:"]
    for t in tools:
        fn = t["function"]
        params = ", ".join(fn.get("parameters", {}).get("properties", {}))
        lines.append(f"- {fn['name']}({params}): {fn.get('description', '')}")
    return "\n".join(lines)


def parse(content: str, id_prefix: str = TEXT_CALL_ID) -> list[ToolCall]:
    """The tool calls written as blocks in ``content``, in order; ids are ``id_prefix`` + a counter."""
    calls: list[ToolCall] = []

    def add(name: str, raw: str | dict[str, Any], error: str = "") -> None:
        call = tool_call(f"{id_prefix}{len(calls)}", name, raw)
        if error:
            call.error = error
        calls.append(call)

    for block in BLOCK.finditer(content):
        kind, arg, body = block["kind"], block["arg"].strip().strip("`'\""), block["body"]
        if not arg:
            add(_TOOL_OF[kind], body, f"a ```{kind} block needs the {'tool name' if kind == 'tool' else 'file path'} after `{kind}`")
        elif kind == "tool":
            add(arg, body)
        elif kind == "write":
            add("write_file", {"path": arg, "content": body})
        elif kind == "submit":
            add("submit", {"path": arg, "summary": body.strip()})
        else:
            sections = list(_SECTION.finditer(body))
            if not sections:
                add("edit_file", body, f"the edit block for {arg} has no <<<<<<< OLD / ======= / >>>>>>> NEW section")
            for s in sections:
                add("edit_file", {"path": arg, "old": s["old"], "new": s["new"]})
    return calls


def to_text_messages(messages: list[Message], tools: list[dict[str, Any]]) -> list[Message]:
    """``messages`` as a model without tool calling can read them.

    The tool descriptions go into the system message; native tool calls in the history (made before
    the switch to text) are rendered as blocks; tool results become user messages, since such servers
    often reject the ``tool`` role.
    """
    names: dict[str, str] = {}
    out: list[Message] = []
    for m in messages:
        if m.get("role") == "assistant" and m.get("tool_calls"):
            calls = m["tool_calls"]
            names.update({c.get("id", ""): c["function"]["name"] for c in calls})
            blocks = [_render(c["function"]) for c in calls if not c.get("id", "").startswith(TEXT_CALL_ID)]
            out.append({"role": "assistant", "content": "\n\n".join(p for p in [m.get("content") or "", *blocks] if p)})
        elif m.get("role") == "tool":
            out.append(
                {"role": "user", "content": f"Result of {names.get(m.get('tool_call_id', ''), 'the tool')}:\n{m.get('content', '')}"}
            )
        else:
            out.append(dict(m))
    if tools:
        how = instructions(tools)
        if out and out[0].get("role") == "system":
            out[0]["content"] = f"{out[0].get('content') or ''}\n\n{how}"
        else:
            out.insert(0, {"role": "system", "content": how})
    return out


def _render(fn: dict[str, Any]) -> str:
    """One native call as the block that means the same."""
    name, raw = fn["name"], fn.get("arguments") or "{}"
    try:
        args = json.loads(raw) if isinstance(raw, str) else dict(raw)
    except ValueError:
        args = None
    if isinstance(args, dict) and {"path", "old", "new"} <= args.keys() and name == "edit_file":
        return _fence(f"edit {args['path']}", f"<<<<<<< OLD\n{_nl(args['old'])}=======\n{_nl(args['new'])}>>>>>>> NEW\n")
    if isinstance(args, dict) and {"path", "content"} <= args.keys() and name == "write_file":
        return _fence(f"write {args['path']}", _nl(args["content"]))
    if isinstance(args, dict) and {"path", "summary"} <= args.keys() and name == "submit":
        return _fence(f"submit {args['path']}", _nl(args["summary"]))
    return _fence(f"tool {name}", _nl(raw if isinstance(raw, str) else json.dumps(raw)))


def _nl(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


def _fence(header: str, body: str) -> str:
    """A block whose fence is longer than any backtick run inside ``body``."""
    fence = "`" * max([3, *(len(r) + 1 for r in _BACKTICKS.findall(body))])
    return f"{fence}{header}\n{body}{fence}"
