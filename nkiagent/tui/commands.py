"""Slash commands: their table (shared by the prompt, ``/help`` and the command palette) and ``/export``'s transcript."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["COMMANDS", "SlashCommand", "help_text", "parse", "transcript_markdown"]


@dataclass(frozen=True)
class SlashCommand:
    name: str
    usage: str
    help: str
    needs_argument: bool = False


COMMANDS: dict[str, SlashCommand] = {
    c.name: c
    for c in (
        SlashCommand("task", "/task NAME", "start a new session on a builtin task (or a task file)", True),
        SlashCommand("model", "/model MODEL", "switch the model (litellm string, scripted:PATH or builtin/tuner); next turn uses it", True),
        SlashCommand("target", "/target trn1|trn2|trn3", "evaluate and profile on another Trainium generation", True),
        SlashCommand("approve", "/approve ask|auto|never", "review each edit, apply all, or dry-run", True),
        SlashCommand("undo", "/undo", "restore the kernel to the session's previous snapshot"),
        SlashCommand("profile", "/profile", "profile the current kernel (engine busy, timeline, roofline, advice)"),
        SlashCommand(
            "search",
            "/search STRATEGY [N] [TASK]",
            "search for a faster kernel (best-of-n, refine, beam or evolve; N candidates) with the current model; f5 shows it",
            True,
        ),
        SlashCommand("export", "/export [PATH]", "write the conversation as Markdown (default sessions/<id>/transcript.md)"),
        SlashCommand("help", "/help", "list commands and keys"),
    )
}

KEYS = (
    ("ctrl+c", "cancel the current turn (the session is kept) or stop a running search"),
    ("ctrl+p", "command palette"),
    ("ctrl+q", "quit"),
    ("f2 / f3 / f4 / f5", "kernel / candidates / profile / search tab"),
    ("review: space a r enter e f s", "toggle hunk, accept all, reject all, apply selection, $EDITOR, feedback, split view"),
)


def parse(line: str) -> tuple[SlashCommand, str]:
    """``"/model openai/x"`` → (the ``model`` command, ``"openai/x"``); raises ``ValueError`` naming the known commands."""
    head, _, arg = line.strip()[1:].partition(" ")
    cmd = COMMANDS.get(head.lower())
    if cmd is None:
        raise ValueError(f"unknown command /{head}; commands: {', '.join('/' + c for c in COMMANDS)}")
    arg = arg.strip()
    if cmd.needs_argument and not arg:
        raise ValueError(f"usage: {cmd.usage}")
    return cmd, arg


def help_text() -> str:
    lines = ["**Commands**", ""] + [f"- `{c.usage}` — {c.help}" for c in COMMANDS.values()]
    lines += ["", "**Keys**", ""] + [f"- `{k}` — {v}" for k, v in KEYS]
    lines += ["", "Anything else you type is sent to the model as your next message."]
    return "\n".join(lines)


def transcript_markdown(events: list[dict[str, Any]]) -> str:
    """The session as a person reads it: turns, tool calls and results, review decisions, verdicts."""
    out: list[str] = []
    for e in events:
        t = e.get("type")
        if t == "session_start":
            out.append(
                f"# nkiagent session {e.get('session_id')}\n\ntask `{e.get('task')}`, model `{e.get('model')}`, "
                f"target `{e.get('target')}`, approve `{e.get('approve')}`\n"
            )
        elif t == "model_response":
            msg = e.get("message") or {}
            out.append(f"## turn {e.get('turn')}\n\n{(msg.get('content') or '').strip()}\n")
        elif t == "tool_call":
            out.append(f"**tool** `{e.get('name')}`\n\n```json\n{json.dumps(e.get('arguments'), indent=2)}\n```\n")
        elif t == "tool_result":
            out.append(f"```\n{str(e.get('content', ''))[:4000]}\n```\n")
        elif t == "edit_proposed":
            out.append(f"**proposed edit** to `{e.get('path')}`\n\n```diff\n{e.get('diff', '')}```\n")
        elif t == "review_decision":
            d = e.get("decision") or {}
            out.append(f"**review** ({e.get('mode')}): {d.get('action')}" + (f' — "{d["feedback"]}"' if d.get("feedback") else "") + "\n")
        elif t == "evaluation":
            r = e.get("result") or {}
            sp = f", speedup {r['speedup']:.3f}×" if r.get("speedup") is not None else ""
            lat = f", {r['latency_us']:.3f} µs ({r.get('timing_source')})" if r.get("latency_us") is not None else ""
            out.append(f"**verdict** {r.get('verdict')}{lat}{sp}\n" + "".join(f"- {x}\n" for x in r.get("reasons") or []))
        elif t in ("note", "error"):
            out.append(f"> {e.get('text') or e.get('message')}\n")
        elif t == "session_end":
            out.append(f"**session ended** after {e.get('turns')} turns: {e.get('stop_reason')}\n")
    return "\n".join(out)
