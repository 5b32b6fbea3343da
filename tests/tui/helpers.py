"""Shared pieces of the UI tests: a workspace, the fake model's scripted replies, waiting on the app."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot

from nkiagent.tui.app import Launch, NkiAgentApp

from ..agent.fake_openai import FakeOpenAI, Reply
from ..agent.test_loop import KERNEL, _repo

__all__ = [
    "DRAFT_PATH",
    "KERNEL",
    "KERNEL_PATH",
    "NEW3",
    "SIZE",
    "idle",
    "launch",
    "request_text",
    "submit_reply",
    "wait_for",
    "workspace",
    "write_reply",
]

SIZE = (120, 40)
KERNEL_PATH = "kernels/vector_add.py"
#: a committed copy of the kernel that is not the session's kernel: edits to it are reviewed and snapshotted but not evaluated,
#: which keeps the flows that do not need a verdict fast
DRAFT_PATH = "kernels/draft.py"
#: one edit with three far-apart hunks: COLS, the op, ROWS
NEW3 = KERNEL.replace("COLS = 128", "COLS = 512").replace("op=nl.add", "op=nl.multiply").replace("ROWS = 1", "ROWS = 4")


def workspace(tmp_path: Path) -> Path:
    """A git repo with the kernel and a draft copy committed (the agent tests' layout plus :data:`DRAFT_PATH`)."""
    from git import Repo

    ws = _repo(tmp_path)
    (ws / DRAFT_PATH).write_text(KERNEL)
    repo = Repo(ws)
    repo.index.add([DRAFT_PATH])
    repo.index.commit("draft")
    return ws


def launch(ws: Path, srv: FakeOpenAI, **kw: object) -> Launch:
    """A session on vector_add through the fake OpenAI server, reviews asked, the cheap verifier (1 seed)."""
    opts: dict[str, object] = {
        "task": "vector_add",
        "model": "openai/fake-model",
        "api_base": srv.url,
        "approve": "ask",
        "verify_seeds": 1,
        "max_turns": 6,
        **kw,
    }
    return Launch(workspace=ws, **opts)  # type: ignore[arg-type]


def write_reply(content: str, text: str = "Three changes: wider tiles, multiply, more rows.", path: str = KERNEL_PATH) -> Reply:
    return Reply(content=text, tool_calls=[("write_file", json.dumps({"path": path, "content": content}))])


def submit_reply(path: str = KERNEL_PATH) -> Reply:
    return Reply(content="done", tool_calls=[("submit", json.dumps({"path": path, "summary": "ok"}))])


def request_text(srv: FakeOpenAI, index: int) -> str:
    """Everything the model was sent in its ``index``-th request, as one string."""
    return json.dumps(srv.requests[index]["body"]["messages"])


async def wait_for(pilot: Pilot[None], cond: Callable[[], bool], timeout: float = 120.0, what: str = "") -> None:
    """Let the app run until ``cond()`` holds; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or cond}")
        await pilot.pause(0.05)


def idle(app: NkiAgentApp) -> Callable[[], bool]:
    return lambda: not app.busy
