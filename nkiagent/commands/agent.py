"""``nkiagent run``, ``nkiagent demo --headless``, ``nkiagent sessions …``, ``nkiagent undo``."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["Progress", "run_demo", "run_run", "run_sessions", "run_ui", "run_undo"]


class Progress:
    """One line per step of the session: turn, edit, verdict, best speedup, tokens, cost."""

    def __init__(self, quiet: bool = False) -> None:
        from rich.console import Console

        self.console = Console(stderr=False, highlight=False)
        self.quiet = quiet
        self.turn = 0
        self.best: float | None = None
        self.tokens = 0
        self.cost = 0.0

    def __call__(self, type_: str, event: dict[str, Any]) -> None:
        if self.quiet:
            return
        c = self.console
        if type_ == "model_response":
            self.turn = event["turn"]
            u = event.get("usage", {})
            self.tokens += u.get("prompt_tokens", 0) + u.get("completion_tokens", 0)
            self.cost += u.get("cost_usd", 0.0)
            text = (event["message"].get("content") or "").strip().splitlines()
            calls = ", ".join(tc["function"]["name"] for tc in event["message"].get("tool_calls") or [])
            c.print(f"[bold]turn {self.turn}[/] {text[0][:100] if text else ''} [dim]{('→ ' + calls) if calls else ''}[/]")
        elif type_ == "review_decision":
            c.print(f"  review: {event['decision']['action']} edit to {event['path']} [dim]({event['mode']})[/]")
        elif type_ == "edit_applied":
            c.print(f"  applied {event['path']} [dim]{(event.get('commit') or '')[:10]}[/]")
        elif type_ == "candidate":
            v, lat, sp = event.get("verdict"), event.get("latency_us"), event.get("speedup")
            if v == "pass" and sp is not None:
                self.best = max(self.best or 0.0, sp)
            color = {"pass": "green", "fail": "red", "rejected": "magenta"}.get(v, "white")
            nums = f"{lat:,.2f} µs ({event.get('timing_source') or 'emulator-estimate'}), {sp:.3f}×" if lat is not None and sp is not None else ""
            best = f"best {self.best:.3f}×" if self.best else "best –"
            c.print(f"  [{color}]{v}[/] {nums}  [dim]{best} · tokens {self.tokens} · ${self.cost:.4f}[/]")
        elif type_ == "error":
            c.print(f"  [red]error[/] {event['message']}")
        elif type_ == "note":
            c.print(f"  [dim]{event['text']}[/]")


def _config(args: argparse.Namespace, workspace: Path, model: str, approve: str) -> Any:
    from ..agent.runner import SessionConfig

    return SessionConfig(task=args.task, model=model, workspace=workspace, target=args.target or "trn2", approve=approve,
                         max_turns=args.max_turns, budget_usd=getattr(args, "budget_usd", None), api_base=getattr(args, "api_base", None),
                         kernel_path=getattr(args, "kernel", None))


def _summary(outcome: Any, t0: float, as_json: bool, workspace: Path) -> None:
    state = outcome.state
    best = state.get("best")
    usage = state.get("usage", {})
    summary = {"session": outcome.session.id, "session_dir": str(outcome.session.dir), "stop_reason": state.get("stop_reason"),
               "turns": state.get("turn", 0), "best": best, "usage": usage, "wall_s": round(time.time() - t0, 1)}
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    print(f"\nsession {summary['session']} finished after {summary['turns']} turns: {summary['stop_reason']}")
    result = state.get("result")
    if result:
        if result.get("verdict") == "pass" and result.get("latency_us") is not None:
            speed = f", speedup {result['speedup']:.3f}× vs the task baseline" if result.get("speedup") else ""
            print(f"submitted: {result['path']} — pass, {result['latency_us']:,.2f} µs ({result.get('timing_source') or 'emulator-estimate'}){speed} "
                  "(full verification)")
        else:
            print(f"submitted: {result['path']} — {result.get('verdict')} in its full verification: {'; '.join(result.get('reasons') or [])}")
    if best:
        here = _holds(workspace, best)
        print(f"best evaluated kernel: version {str(best.get('code_sha256'))[:12]} — {best['latency_us']:,.2f} µs "
              f"({best.get('timing_source') or 'emulator-estimate'}), speedup {best['speedup']:.3f}× vs the task baseline; "
              + (f"{best['path']} holds it" if here else f"{best['path']} now holds another version (sessions/<id>/kernels/ keeps this one)"))
    else:
        print("no kernel passed verification")
    print(f"tokens {usage.get('prompt_tokens', 0) + usage.get('completion_tokens', 0)}, cost ${usage.get('cost_usd', 0.0):.4f}")
    print(f"session written to {summary['session_dir']}")


def _holds(workspace: Path, best: dict[str, Any]) -> bool:
    """Whether the best kernel's file in the repository still has the best kernel's code."""
    import hashlib

    try:
        text = (workspace / best["path"]).read_text()
    except OSError:
        return False
    return hashlib.sha256(text.encode()).hexdigest() == best.get("code_sha256")


def run_run(args: argparse.Namespace) -> int:
    from ..agent.runner import drive, start_session

    if not args.model.startswith(("scripted:", "builtin/")):
        from ..agent.models import prewarm

        prewarm()  # import litellm in the background while the session is set up
    t0 = time.time()
    progress = Progress(quiet=args.json)
    try:
        rt, graph, first = start_session(_config(args, Path(args.workspace).resolve(), args.model, args.approve), progress)
    except (KeyError, FileNotFoundError, ValueError) as exc:
        print(f"nkiagent run: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    outcome = drive(rt, graph, first)
    _summary(outcome, t0, args.json, rt.ctx.workspace.root)
    return 0 if outcome.best else 1


def run_ui(args: argparse.Namespace) -> int:
    """``nkiagent [--task NAME --model MODEL …]``: the terminal UI in a workspace (idle until ``/task``, or a session)."""
    from ..tui import run_app
    from ..tui.app import Launch

    return run_app(Launch(workspace=Path(args.ui_workspace).resolve(), task=args.ui_task, model=args.ui_model, target=args.ui_target,
                          approve=args.ui_approve, api_base=args.ui_api_base, max_turns=args.ui_max_turns))


def run_demo(args: argparse.Namespace) -> int:
    from ..agent.runner import copy_demo_workspace, drive, start_session

    ws = copy_demo_workspace(args.task, Path(tempfile.mkdtemp(prefix="nkiagent-demo-")))
    if not args.headless:
        from ..tui import run_app
        from ..tui.app import Launch

        return run_app(Launch(workspace=ws, task=args.task, model="builtin/tuner", target=args.target or "trn2", approve="ask",
                              max_turns=args.max_turns, headline=f"demo workspace {ws} (a fresh git repo); /approve auto stops asking"))
    t0 = time.time()
    print(f"demo workspace: {ws} (a fresh git repo)\ntask {args.task} on {args.target or 'trn2'}, model builtin/tuner (offline), edits auto-approved\n")
    ns = argparse.Namespace(task=args.task, target=args.target, max_turns=args.max_turns, kernel=None)
    rt, graph, first = start_session(_config(ns, ws, "builtin/tuner", "auto"), Progress(quiet=args.json))
    outcome = drive(rt, graph, first)
    _summary(outcome, t0, args.json, rt.ctx.workspace.root)
    return 0 if outcome.best and (outcome.best.get("speedup") or 0) > 1.0 else 1


def run_sessions(args: argparse.Namespace) -> int:
    from ..traces.store import SessionStore

    store = SessionStore(Path(args.sessions_dir).resolve())
    if args.action == "list":
        rows = store.list()
        if not rows:
            print(f"no sessions in {store.root}")
        for sid, meta in rows:
            print(f"{sid}  task={meta.get('task')}  model={meta.get('model')}  target={meta.get('target')}")
        return 0
    if not args.id:
        print("nkiagent sessions: give a session id", file=sys.stderr)
        return 2
    try:
        session = store.open(args.id)
    except KeyError as exc:
        print(f"nkiagent sessions: {exc.args[0]}", file=sys.stderr)
        return 2
    if args.action == "show":
        events = session.events()
        print(json.dumps(session.meta(), indent=2))
        counts: dict[str, int] = {}
        for e in events:
            counts[e["type"]] = counts.get(e["type"], 0) + 1
        print("events:", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        for e in events:
            if e["type"] == "candidate":
                print(f"  turn {e.get('turn')}: {e.get('verdict')} {e.get('latency_us')} µs speedup {e.get('speedup')} ({e.get('code_sha256', '')[:12]})")
        return 0
    if not args.headless:
        from ..tui import run_app
        from ..tui.app import Launch

        session.close()
        return run_app(Launch(workspace=Path(session.meta().get("workspace", ".")), resume=session.dir, approve=args.approve))
    from ..agent.runner import drive, resume_session

    t0 = time.time()
    rt, graph = resume_session(session.dir, Progress(), approve=args.approve)
    outcome = drive(rt, graph, None)
    _summary(outcome, t0, False, rt.ctx.workspace.root)
    return 0


def run_undo(args: argparse.Namespace) -> int:
    from ..agent.workspace import Workspace
    from ..traces.store import SessionStore

    ws_root = Path(args.workspace).resolve()
    store = SessionStore(ws_root / "sessions")
    sid = args.session or (store.list()[-1][0] if store.list() else None)
    if sid is None:
        print("nkiagent undo: no session to undo", file=sys.stderr)
        return 2
    from ..agent.workspace import WorkspaceError

    try:
        path, sha = Workspace(ws_root).undo(sid)
    except (WorkspaceError, ValueError, KeyError) as exc:
        print(f"nkiagent undo: {exc}", file=sys.stderr)
        return 1
    store.open(sid).append("note", text=f"undo: restored {path} to {sha}")
    print(f"restored {path} to snapshot {str(sha)[:10]}")
    return 0
