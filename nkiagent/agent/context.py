"""Keeping long refinement sessions inside the model's context window.

The newest messages go as they are; older ones are condensed: tool outputs truncated, and
a superseded kernel (a ``write_file`` proposal or a ``read_file`` of it) replaced by its
hash and size. The messages actually sent are what the session records.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

__all__ = ["condense"]

KEEP_RECENT = 8
TOOL_CHARS = 1200


def _size(messages: list[dict[str, Any]]) -> int:
    return sum(len(json.dumps(m, default=str)) for m in messages)


def condense(messages: list[dict[str, Any]], max_chars: int) -> list[dict[str, Any]]:
    """A copy of ``messages`` that fits ``max_chars`` (roughly): old tool outputs and kernels shortened.

    The system prompt, the task prompt and the last ``KEEP_RECENT`` messages are never touched.
    """
    if _size(messages) <= max_chars:
        return list(messages)
    out = copy.deepcopy(messages)
    head = 2
    for m in out[head : max(head, len(out) - KEEP_RECENT)]:
        if m.get("role") == "tool" and len(m.get("content") or "") > TOOL_CHARS:
            text = m["content"]
            m["content"] = text[:TOOL_CHARS] + f"\n… [{len(text) - TOOL_CHARS} more characters condensed]"
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function", {})
            args = fn.get("arguments") or ""
            if len(args) > TOOL_CHARS:
                digest = hashlib.sha256(args.encode()).hexdigest()[:12]
                fn["arguments"] = json.dumps({"condensed": f"superseded proposal sha {digest}, {len(args)} chars"})
        if _size(out) <= max_chars:
            break
    return out
