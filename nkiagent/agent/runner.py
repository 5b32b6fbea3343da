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

from ..config import Settings
from ..sessions.store import Session, SessionStore, new_session_id
from .graph import Budget, Runtime, build_graph
from .lock import lock_repository
from .prompts import system_prompt, task_prompt
from .tools import AgentContext, ToolRegistry, load_tools

__all__ = [
    "SessionConfig",
    "SessionOutcome",
    "build_model",
    "check_model",
    "copy_demo_workspace",
    "drive",
    "edit_in_editor",
    "resume_session",
    "start_session",
    "starting_kernel",
    "terminal_review",
]


@dataclass(kw_only=True)
class SessionConfig(Settings):
    """A session's whole configuration: the person's :class:`~nkiagent.config.Settings` and what the session works on.

    Stored whole in ``meta.json`` (:meth:`to_meta`) and read back whole on resume (:meth:`from_meta`).
    """

    task: str
    workspace: Path
    approve: str = "auto"  #: a session made in code applies its edits unless told otherwise; the CLI's default comes from Settings
    kernel_path: str | None = None
    sessions_dir: Path | None = None
    tools: list[str] | None = None

    @property
    def settings(self) -> Settings:
        return Settings(**{k: getattr(self, k) for k in Settings().to_dict()})

    @classmethod
    def from_settings(cls, settings: Settings, **where: Any) -> SessionConfig:
        return cls(**settings.to_dict(), **where)

    def to_meta(self) -> dict[str, Any]:
        """JSON for ``meta.json``: typed values, nothing turned into strings."""
        return {
            "settings": self.settings.to_dict(),
            "task": self.task,
            "workspace": str(self.workspace),
            "kernel_path": self.kernel_path,
            "sessions_dir": None if self.sessions_dir is None else str(self.sessions_dir),
            "tools": self.tools,
        }

    @classmethod
    def from_meta(cls, conf: dict[str, Any]) -> SessionConfig:
        """The config :meth:`to_meta` stored; a bad value is a :class:`~nkiagent.config.ConfigError` naming it."""
        settings = Settings.from_dict(conf.get("settings") or {})
        return cls.from_settings(
            settings,
            task=conf["task"],
            workspace=Path(conf["workspace"]),
            kernel_path=conf.get("kernel_path"),
            sessions_dir=None if conf.get("sessions_dir") is None else Path(conf["sessions_dir"]),
            tools=conf.get("tools"),
        )


@dataclass
class SessionOutcome:
    session: Session
    state: dict[str, Any]

    @property
    def best(self) -> dict[str, Any] | None:
        return self.state.get("best")

    @property
    def result(self) -> dict[str, Any] | None:
        """The submitted kernel's full verification (``None`` when the session ended without a submit)."""
        return self.state.get("result")

    @property
    def stop_reason(self) -> str:
        return self.state.get("stop_reason", "")


def build_model(settings: Settings) -> Any:
    """The model ``settings`` name, with their endpoint, key variable, timeout, retries and sampling options."""
    from .models import get_model

    if settings.model.startswith(("scripted:", "builtin/")):
        return get_model(settings.model)  # offline models take no endpoint or sampling options
    return get_model(
        settings.model,
        api_base=settings.api_base,
        api_key_env=settings.api_key_env,
        timeout_s=settings.timeout_s,
        num_retries=settings.retries,
        temperature=settings.temperature,
        max_tokens=settings.max_tokens,
    )


def check_model(model: Any) -> None:
    """Raise the configuration problems a model can know before its first request (ModelError), sending nothing."""
    check = getattr(model, "check", None)
    if check is not None:
        check()


def _runtime(
    cfg: SessionConfig,
    session: Session,
    on_event: Callable[[str, dict[str, Any]], None] | None,
    on_token: Callable[[str], None] | None,
    model: Any = None,
) -> Runtime:
    """The runtime of a new or resumed session; the starting kernel (stored in the session) is the reference of a task without a baseline."""
    from ..tasks import get_task
    from .workspace import Workspace, kernel_path

    task = get_task(cfg.task)
    ws = Workspace(cfg.workspace)
    kernel = cfg.kernel_path or kernel_path(task.name)
    sha = session.meta().get("start_kernel_sha")
    ctx = AgentContext(ws, task, cfg.target, cfg.verify_seeds, start_text=session.kernel(sha) if sha else None)
    ctx.prepare()
    registry = ToolRegistry(load_tools(cfg.workspace, cfg.tools))
    budget = Budget(cfg.max_turns, cfg.budget_usd, cfg.max_seconds)
    rt = Runtime(model if model is not None else build_model(cfg), registry, ctx, session, cfg.approve, budget, kernel, on_event, on_token)
    rt.watch_model()
    return rt


def _checkpointer(session: Session) -> Any:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(session.dir / "checkpoint.sqlite", check_same_thread=False)
    return SqliteSaver(conn)


def start_session(
    cfg: SessionConfig, on_event: Callable[[str, dict[str, Any]], None] | None = None, on_token: Callable[[str], None] | None = None
) -> tuple[Runtime, Any, dict[str, Any]]:
    """Create the session (store, kernel file if missing) and return (runtime, graph, first input).

    The task and the model are checked first (``KeyError``/``FileNotFoundError``/``ModelError``), so a
    start that cannot work leaves no session behind.
    """
    from .. import __version__
    from ..tasks import get_task
    from .workspace import Workspace, kernel_path

    task = get_task(cfg.task)
    ws = Workspace(cfg.workspace)
    kernel = cfg.kernel_path or kernel_path(task.name)
    start_text = None if ws.exists(kernel) else starting_kernel(task).read_text()
    model = build_model(cfg)
    check_model(model)
    store = SessionStore(cfg.sessions_dir or cfg.workspace / "sessions")
    session_id = new_session_id()
    lock_repository(cfg.workspace, store.root, session_id)  # before anything is written: a busy repository leaves no session
    cfg.kernel_path = kernel
    session = store.create(
        {
            "task": task.name,
            "model": cfg.model,
            "strategy": "refine",
            "target": cfg.target,
            "approve": cfg.approve,
            "kernel_path": kernel,
            "workspace": str(cfg.workspace),
            "config": cfg.to_meta(),
            "versions": {"nkiagent": __version__, "python": sys.version.split()[0]},
        },
        session_id,
    )
    if start_text is not None:  # the session owns the starting kernel it writes, so it may keep editing it
        ws.write(kernel, start_text, session.id, f"nkiagent: starting kernel for {task.name}")
    # the kernel in force at the first prompt: the speedup reference of a task without a baseline, and
    # where exports replay edits from (so an edit-style answer can be re-scored)
    start_sha = session.save_kernel(ws.read(kernel))
    session.update_meta(start_kernel_sha=start_sha)
    rt = _runtime(cfg, session, on_event, on_token, model)
    session.update_meta(tools=rt.tools.schemas())  # exports read the tools the session offered from the session itself
    if ws.warning:
        rt.emit("note", text=ws.warning)
    rt.emit(
        "session_start",
        task=task.name,
        model=cfg.model,
        target=cfg.target,
        approve=cfg.approve,
        kernel_path=kernel,
        kernel_sha256=start_sha,
    )
    first = _first_input(cfg, task, kernel)
    if not cfg.model.startswith(("scripted:", "builtin/")):
        rt.prefetch(first["messages"])  # a remote model answers while LangGraph imports; offline models stay in order
    graph = build_graph(rt, _checkpointer(session))
    return rt, graph, first


def _first_input(cfg: SessionConfig, task: Any, kernel: str) -> dict[str, Any]:
    """The graph's input of a new session: the system and task prompts, nothing spent."""
    return {
        "messages": [
            {"role": "system", "content": system_prompt(cfg.target, cfg.workspace)},
            {"role": "user", "content": task_prompt(task, kernel, cfg.target, workspace=cfg.workspace, turns=cfg.max_turns)},
        ],
        "turn": 0,
        "pending": None,
        "decision": None,
        "done": False,
        "best": None,
        "nudges": 0,
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0},
    }


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


def resume_session(
    session_dir: Path,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
    on_token: Callable[[str], None] | None = None,
    approve: str | None = None,
) -> tuple[Runtime, Any]:
    """Reopen a stored session with its checkpoint (after a crash or a deliberate stop)."""
    store = SessionStore(session_dir.parent)
    session = store.open(session_dir.name)
    meta = session.meta()
    lock_repository(Path(meta["workspace"]), store.root, session.id)
    cfg = SessionConfig.from_meta(meta["config"]) if "settings" in meta.get("config", {}) else _legacy_config(meta)
    if approve:
        cfg.approve = approve
    rt = _runtime(cfg, session, on_event, on_token)
    rt.emit("note", text="session resumed")
    graph = build_graph(rt, _checkpointer(session))
    config = {"configurable": {"thread_id": session.id}}
    if not graph.get_state(config).values:  # stopped before its first step was recorded (ctrl+c during the first request)
        from ..tasks import get_task

        graph.invoke(_first_input(cfg, get_task(cfg.task), rt.kernel_path), config, interrupt_before=["model"], durability="sync")
    return rt, graph


def _legacy_config(meta: dict[str, Any]) -> SessionConfig:
    """The config of a session stored before issue 23 (every value a string): read with the same validation."""
    conf = {k: v for k, v in meta.get("config", {}).items() if k in Settings().to_dict()}
    return SessionConfig.from_settings(
        Settings.from_dict(conf), task=meta["task"], workspace=Path(meta["workspace"]), kernel_path=meta.get("kernel_path")
    )


def terminal_review(payload: dict[str, Any]) -> dict[str, Any]:
    """Answer a review interrupt at the terminal: accept all, reject (with feedback), or pick hunks."""
    print(payload["diff"])
    n = len(payload["hunks"])
    while True:
        ans = (
            input(f"apply this edit to {payload['path']}? [a]ccept / [r]eject / hunks e.g. '1,3' of {n} / [e]dit / [f]eedback: ")
            .strip()
            .lower()
        )
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
        rt.emit(
            "session_end",
            stop_reason=state.get("stop_reason", ""),
            best=state.get("best"),
            result=state.get("result"),
            usage=state.get("usage"),
            turns=state.get("turn", 0),
        )
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
