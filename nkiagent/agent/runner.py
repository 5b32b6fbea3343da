"""Running a session headless: set up the workspace, store and graph, drive it, answer reviews.

The same pieces serve the UI: it builds a :class:`Runtime` the same way and drives the graph
from a worker, answering ``review`` interrupts with its own screen instead of the terminal.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..traces.store import Session, SessionStore
from .graph import Budget, Runtime, build_graph
from .prompts import system_prompt, task_prompt
from .tools import AgentContext, ToolRegistry, load_tools

__all__ = ["SessionConfig", "SessionOutcome", "start_session", "resume_session", "drive", "terminal_review", "edit_in_editor", "starting_kernel"]


@dataclass
class SessionConfig:
    task: str
    model: str
    workspace: Path
    target: str = "trn2"
    approve: str = "auto"
    max_turns: int = 30
    budget_usd: float | None = None
    max_seconds: float | None = None
    api_base: str | None = None
    kernel_path: str | None = None
    sessions_dir: Path | None = None
    verify_seeds: int = 5
    tools: list[str] | None = None


@dataclass
class SessionOutcome:
    session: Session
    state: dict[str, Any]

    @property
    def best(self) -> dict[str, Any] | None:
        return self.state.get("best")

    @property
    def stop_reason(self) -> str:
        return self.state.get("stop_reason", "")


def _model(spec: str, api_base: str | None) -> Any:
    from .models import get_model

    return get_model(spec, api_base=api_base) if api_base else get_model(spec)


def _runtime(cfg: SessionConfig, session: Session, on_event: Callable[[str, dict[str, Any]], None] | None,
             on_token: Callable[[str], None] | None) -> Runtime:
    from ..tasks import get_task
    from .workspace import Workspace, kernel_path

    task = get_task(cfg.task)
    ws = Workspace(cfg.workspace)
    kernel = cfg.kernel_path or kernel_path(task.name)
    ctx = AgentContext(ws, task, cfg.target, cfg.verify_seeds)
    registry = ToolRegistry(load_tools(cfg.workspace, cfg.tools))
    budget = Budget(cfg.max_turns, cfg.budget_usd, cfg.max_seconds)
    return Runtime(_model(cfg.model, cfg.api_base), registry, ctx, session, cfg.approve, budget, kernel, on_event, on_token)


def _checkpointer(session: Session) -> Any:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(session.dir / "checkpoint.sqlite", check_same_thread=False)
    return SqliteSaver(conn)


def start_session(cfg: SessionConfig, on_event: Callable[[str, dict[str, Any]], None] | None = None,
                  on_token: Callable[[str], None] | None = None) -> tuple[Runtime, Any, dict[str, Any]]:
    """Create the session (store, kernel file if missing) and return (runtime, graph, first input)."""
    from .. import __version__
    from ..tasks import get_task
    from .workspace import Workspace, kernel_path

    task = get_task(cfg.task)
    ws = Workspace(cfg.workspace)
    kernel = cfg.kernel_path or kernel_path(task.name)
    store = SessionStore(cfg.sessions_dir or cfg.workspace / "sessions")
    session = store.create({"task": task.name, "model": cfg.model, "strategy": "refine", "target": cfg.target, "approve": cfg.approve,
                            "kernel_path": kernel, "workspace": str(cfg.workspace), "config": {k: str(v) for k, v in vars(cfg).items()},
                            "versions": {"nkiagent": __version__, "python": sys.version.split()[0]}})
    cfg.kernel_path = kernel
    if not ws.exists(kernel):  # the session owns the starting kernel it writes, so it may keep editing it
        ws.write(kernel, starting_kernel(task).read_text(), session.id, f"nkiagent: starting kernel for {task.name}")
    rt = _runtime(cfg, session, on_event, on_token)
    session.update_meta(tools=rt.tools.schemas())  # exports read the tools the session offered from the session itself
    if ws.warning:
        rt.emit("note", text=ws.warning)
    # the kernel in force at the first prompt: exports replay edits from it, so an edit-style answer can be re-scored
    start_sha = session.save_kernel(ws.read(kernel))
    rt.emit("session_start", task=task.name, model=cfg.model, target=cfg.target, approve=cfg.approve, kernel_path=kernel,
            kernel_sha256=start_sha)
    first = {"messages": [{"role": "system", "content": system_prompt(cfg.target, cfg.workspace)},
                          {"role": "user", "content": task_prompt(task, kernel, cfg.target, workspace=cfg.workspace)}],
             "turn": 0, "pending": None, "decision": None, "done": False, "best": None, "nudges": 0,
             "usage": {"prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}}
    if not cfg.model.startswith(("scripted:", "builtin/")):
        rt.prefetch(first["messages"])  # a remote model answers while LangGraph imports; offline models stay in order
    graph = build_graph(rt, _checkpointer(session))
    return rt, graph, first


def starting_kernel(task: Any) -> Path:
    """The demo kernel with tunables if one exists for the task, else the task's baseline."""
    from .demo_kernels import demo_kernel_path

    demo = demo_kernel_path(task.name)
    if demo is not None:
        return demo
    base = task.baseline_path()
    if base is None or not base.is_file():
        raise FileNotFoundError(f"task {task.name} has no baseline kernel to start from; pass --kernel")
    return base


def resume_session(session_dir: Path, on_event: Callable[[str, dict[str, Any]], None] | None = None,
                   on_token: Callable[[str], None] | None = None, approve: str | None = None) -> tuple[Runtime, Any]:
    """Reopen a stored session with its checkpoint (after a crash or a deliberate stop)."""
    store = SessionStore(session_dir.parent)
    session = store.open(session_dir.name)
    meta = session.meta()
    conf = meta.get("config", {})
    cfg = SessionConfig(task=meta["task"], model=meta["model"], workspace=Path(meta["workspace"]), target=meta.get("target", "trn2"),
                        approve=approve or meta.get("approve", "auto"), kernel_path=meta.get("kernel_path"),
                        max_turns=int(conf.get("max_turns", 30)), api_base=None if conf.get("api_base") in (None, "None") else conf["api_base"])
    rt = _runtime(cfg, session, on_event, on_token)
    rt.emit("note", text="session resumed")
    return rt, build_graph(rt, _checkpointer(session))


def terminal_review(payload: dict[str, Any]) -> dict[str, Any]:
    """Answer a review interrupt at the terminal: accept all, reject (with feedback), or pick hunks."""
    print(payload["diff"])
    n = len(payload["hunks"])
    while True:
        ans = input(f"apply this edit to {payload['path']}? [a]ccept / [r]eject / hunks e.g. '1,3' of {n} / [e]dit / [f]eedback: ").strip().lower()
        if ans in ("a", "accept", "y", "yes"):
            return {"action": "accept"}
        if ans in ("e", "edit"):
            return {"action": "edit", "content": edit_in_editor(payload["proposed"], payload["path"])}
        if ans in ("r", "reject", "n", "no"):
            return {"action": "reject"}
        if ans in ("f", "feedback"):
            return {"action": "reject", "feedback": input("feedback for the model: ").strip()}
        try:
            picked = [int(x) for x in ans.replace(" ", "").split(",") if x]
        except ValueError:
            continue
        if picked and all(1 <= i <= n for i in picked):
            return {"action": "partial", "hunks": picked}


def edit_in_editor(text: str, path: str) -> str:
    """Open the proposed file in ``$EDITOR`` (default ``vi``) and return what the person saved."""
    import os
    import shlex
    import subprocess
    import tempfile

    suffix = Path(path).suffix or ".txt"
    with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False) as fh:
        fh.write(text)
        tmp = fh.name
    try:
        subprocess.call([*shlex.split(os.environ.get("EDITOR", "vi")), tmp])
        return Path(tmp).read_text()
    finally:
        os.unlink(tmp)


def drive(rt: Runtime, graph: Any, first: Any, review: Callable[[dict[str, Any]], dict[str, Any]] = terminal_review) -> SessionOutcome:
    """Run the graph to the end, answering every review interrupt with ``review``."""
    from langgraph.types import Command

    config = {"configurable": {"thread_id": rt.session.id}, "recursion_limit": 10_000}
    payload: Any = first
    while True:
        graph.invoke(payload, config, durability="sync")
        snap = graph.get_state(config)
        if snap.interrupts:
            payload = Command(resume=review(snap.interrupts[0].value))
            continue
        if snap.next:  # stopped without an interrupt (should not happen); continue from the checkpoint
            payload = None
            continue
        state = dict(snap.values)
        rt.emit("session_end", stop_reason=state.get("stop_reason", ""), best=state.get("best"), usage=state.get("usage"),
                turns=state.get("turn", 0))
        return SessionOutcome(rt.session, state)


def copy_demo_workspace(task_name: str, dest: Path) -> Path:
    """A throwaway git workspace for the demo, with the demo's starting kernel committed."""
    from git import Repo

    dest.mkdir(parents=True, exist_ok=True)
    repo = Repo.init(dest)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "nkiagent demo")
        cw.set_value("user", "email", "demo@nkiagent.invalid")
    (dest / "README.md").write_text(f"nkiagent demo workspace for task {task_name}\n")
    (dest / ".gitignore").write_text("sessions/\n")
    repo.index.add(["README.md", ".gitignore"])
    repo.index.commit("demo workspace")
    shutil.rmtree(dest / "kernels", ignore_errors=True)
    return dest
