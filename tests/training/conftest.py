"""Real sessions to export, recorded once per test run.

* ``tuner``: the offline ``builtin/tuner`` model on ``vector_add`` (auto approval, 3 turns: read, evaluate, one edit);
* ``fake``: an OpenAI-compatible fake server scripted to (1) write a cheating kernel (it shells
  out: the static gate rejects it) while pasting an API key and a home path into its text,
  (2) write a wrong kernel that the reviewer rejects, (3) write an honest kernel (passes),
  (4) submit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nkiagent.agent.runner import SessionConfig, copy_demo_workspace, drive, start_session
from nkiagent.tasks import get_task

from ..agent.fake_openai import FakeOpenAI, Reply

CHEATS = Path(__file__).resolve().parents[1] / "verify" / "cheats"
KERNEL = "kernels/vector_add.py"
PASTED_KEY = "sk-proj-ABCDEFGHIJKLMNOPQRSTUV123456"
PASTED_PATH = "/home/alice/private/notes.txt"


def honest_kernel() -> str:
    """The demo kernel with whole-row tiles: passes, about 1.4x faster than the task's baseline."""
    demo = Path(__file__).resolve().parents[2] / "nkiagent" / "agent" / "demo_kernels" / "vector_add.py"
    return demo.read_text().replace("TILE_COLS = 128", "TILE_COLS = 1024")


def baseline_kernel() -> str:
    base = get_task("vector_add").baseline_path()
    assert base is not None
    return base.read_text()


def wrong_kernel() -> str:
    return baseline_kernel().replace("op=nl.add", "op=nl.subtract")


def cheat_kernel() -> str:
    return (CHEATS / "escape_os_system.py").read_text()


@dataclass
class Recorded:
    root: Path  #: the sessions folder holding both sessions
    tuner: Path
    fake: Path
    workspaces: tuple[Path, Path]


def _write(path: str, content: str) -> tuple[str, str]:
    return "write_file", json.dumps({"path": path, "content": content})


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    base = tmp_path_factory.mktemp("trace-sessions")
    root = base / "sessions"
    ws1 = copy_demo_workspace("vector_add", base / "ws-tuner")
    cfg = SessionConfig(
        task="vector_add", model="builtin/tuner", workspace=ws1, approve="auto", max_turns=3, verify_seeds=1, sessions_dir=root
    )
    tuner = drive(*start_session(cfg)).session.dir

    ws2 = copy_demo_workspace("vector_add", base / "ws-fake")
    old_key = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = "sk-test"
    decisions = iter([{"action": "accept"}, {"action": "reject", "feedback": "that subtracts"}, {"action": "accept"}])

    def review(payload: dict[str, Any]) -> dict[str, Any]:
        return next(decisions)

    try:
        with FakeOpenAI(lifetime_s=120) as srv:
            srv.push(
                Reply(f"A faster kernel. My key is {PASTED_KEY}; notes in {PASTED_PATH}.", [_write(KERNEL, cheat_kernel())]),
                Reply("Trying another kernel.", [_write(KERNEL, wrong_kernel())]),
                Reply("Wider honest tiles.", [_write(KERNEL, honest_kernel())]),
                Reply("Done.", [("submit", json.dumps({"path": KERNEL, "summary": "wider tiles"}))]),
            )
            cfg2 = SessionConfig(
                task="vector_add",
                model="openai/test-model",
                workspace=ws2,
                approve="ask",
                max_turns=6,
                verify_seeds=1,
                sessions_dir=root,
                api_base=srv.url,
            )
            fake = drive(*start_session(cfg2), review=review).session.dir
    finally:
        if old_key is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = old_key
    yield Recorded(root, tuner, fake, (ws1, ws2))


#: A scripted session covering every kind of turn an RL export must credit: (answer, what it is)
SCRIPT: list[tuple[dict[str, Any], str]] = [
    ({"content": "Read it first.", "tool_calls": [{"name": "read_file", "arguments": {"path": KERNEL}}]}, "read"),
    (
        {
            "content": "Wider tiles.",
            "tool_calls": [{"name": "edit_file", "arguments": {"path": KERNEL, "old": "TILE_COLS = 128", "new": "TILE_COLS = 512"}}],
        },
        "edit",
    ),
    ({"content": "Check again.", "tool_calls": [{"name": "evaluate", "arguments": {"path": KERNEL}}]}, "redundant evaluation"),
    (
        {"content": "Rewrite.", "tool_calls": [{"name": "write_file", "arguments": {"path": KERNEL, "content": "def kernel(:\n"}}]},
        "compile failure",
    ),
    ({"content": "Whole rows.", "tool_calls": [{"name": "write_file", "arguments": {"path": KERNEL, "content": "HONEST"}}]}, "rewrite"),
    ({"content": "Faster still.", "tool_calls": [{"name": "write_file", "arguments": {"path": KERNEL, "content": "CHEAT"}}]}, "cheat"),
    (
        {"content": "Tweak.", "tool_calls": [{"name": "edit_file", "arguments": {"path": KERNEL, "old": "NOT IN THE FILE", "new": "x"}}]},
        "failed edit",
    ),
    ({"content": "Shell.", "tool_calls": [{"name": "run_shell", "arguments": {"cmd": "ls"}}]}, "unknown tool"),
    ({"content": "Done.", "tool_calls": [{"name": "submit", "arguments": {"path": KERNEL, "summary": "whole rows"}}]}, "submit"),
]


@pytest.fixture(scope="session")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sessions folder of one scripted agent session (auto approval) that plays :data:`SCRIPT`."""
    base = tmp_path_factory.mktemp("scripted-sessions")
    script = base / "script.jsonl"
    fill = {"HONEST": honest_kernel(), "CHEAT": cheat_kernel()}
    lines = []
    for turn, _ in SCRIPT:
        for call in turn["tool_calls"]:
            content = call["arguments"].get("content")
            if content in fill:
                call = call | {"arguments": {**call["arguments"], "content": fill[content]}}
            turn = turn | {"tool_calls": [call]}
        lines.append(json.dumps(turn))
    script.write_text("\n".join(lines) + "\n")
    ws = copy_demo_workspace("vector_add", base / "ws")
    cfg = SessionConfig(
        task="vector_add",
        model=f"scripted:{script}",
        workspace=ws,
        approve="auto",
        max_turns=len(SCRIPT),
        verify_seeds=1,
        sessions_dir=base / "sessions",
    )
    drive(*start_session(cfg))
    return base / "sessions"
